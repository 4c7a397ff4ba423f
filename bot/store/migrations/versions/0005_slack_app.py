"""Slack app: a note with each feedback, the diagnosis document of each occurrence (so that a message
can be drawn again after a button), the files of an incident's bundle, and keys of events already
processed (Slack's retries, a file seen through two events).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("feedback") as batch:
        batch.add_column(sa.Column("note", sa.Text(), nullable=True))
    with op.batch_alter_table("occurrences") as batch:
        batch.add_column(sa.Column("document", sa.JSON(), nullable=True))
    op.create_table(
        "incident_files",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("origin", sa.String(255), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["incident_id"], ["incidents.id"], name="fk_incident_files_incident_id_incidents"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_incident_files"),
        sa.UniqueConstraint("incident_id", "origin", name="uq_incident_files_incident_id_origin"),
    )
    op.create_index("ix_incident_files_added_at", "incident_files", ["added_at"])
    op.create_table(
        "processed_events",
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_processed_events"),
    )
    op.create_index("ix_processed_events_seen_at", "processed_events", ["seen_at"])


def downgrade() -> None:
    op.drop_index("ix_processed_events_seen_at", table_name="processed_events")
    op.drop_table("processed_events")
    op.drop_index("ix_incident_files_added_at", table_name="incident_files")
    op.drop_table("incident_files")
    with op.batch_alter_table("occurrences") as batch:
        batch.drop_column("document")
    with op.batch_alter_table("feedback") as batch:
        batch.drop_column("note")
