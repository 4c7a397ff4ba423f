"""Bundles belong to an occurrence: each kept file names the diagnosis it was read for (a repeat from
another job keeps its own files, so a thread re-run reads one job's logs), and a job's own log files can
be kept as references (`external`: read where they lie, never copied, counted or deleted).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("incident_files") as batch:
        batch.add_column(sa.Column("occurrence_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("external", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch.create_foreign_key(
            "fk_incident_files_occurrence_id_occurrences", "occurrences", ["occurrence_id"], ["id"]
        )
        batch.create_index("ix_incident_files_occurrence_id", ["occurrence_id"])


def downgrade() -> None:
    with op.batch_alter_table("incident_files") as batch:
        batch.drop_index("ix_incident_files_occurrence_id")
        batch.drop_constraint("fk_incident_files_occurrence_id_occurrences", type_="foreignkey")
        batch.drop_column("external")
        batch.drop_column("occurrence_id")
