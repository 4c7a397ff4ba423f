"""Recurrence queries: a covering index over time (replacing the plain one) and per-class and per-node
indexes; time since the last progress line.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("occurrences") as batch:
        batch.add_column(sa.Column("since_progress_ms", sa.Integer(), nullable=True))
    op.create_index(
        "ix_occurrences_recurrence_cover",
        "occurrences",
        ["occurred_at", "class_id", "node_id"],
        postgresql_include=["incident_id", "gpu_hours_lost"],
    )
    op.drop_index("ix_occurrences_occurred_at", table_name="occurrences")
    op.create_index("ix_occurrences_class_id_occurred_at", "occurrences", ["class_id", "occurred_at"])
    op.create_index("ix_occurrences_node_id_occurred_at", "occurrences", ["node_id", "occurred_at"])


def downgrade() -> None:
    op.drop_index("ix_occurrences_node_id_occurred_at", table_name="occurrences")
    op.drop_index("ix_occurrences_class_id_occurred_at", table_name="occurrences")
    op.create_index("ix_occurrences_occurred_at", "occurrences", ["occurred_at"])
    op.drop_index("ix_occurrences_recurrence_cover", table_name="occurrences")
    with op.batch_alter_table("occurrences") as batch:
        batch.drop_column("since_progress_ms")
