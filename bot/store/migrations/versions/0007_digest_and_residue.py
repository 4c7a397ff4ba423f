"""Weekly digest claims (one per channel and ISO week), the log-template miner's state and the
unrecognised lines of unknown / low-confidence diagnoses.

Revision ID: 0007
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "digests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("week", sa.String(10), nullable=False),
        sa.Column("as_of", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_by", sa.String(255), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("slack_ts", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_digests"),
        sa.UniqueConstraint("channel", "week", name="uq_digests_channel_week"),
    )
    op.create_table(
        "miner_states",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_miner_states"),
    )
    op.create_table(
        "residue_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("occurrence_id", sa.Integer(), nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("example", sa.Text(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["occurrence_id"], ["occurrences.id"], name="fk_residue_samples_occurrence_id_occurrences"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_residue_samples"),
        sa.UniqueConstraint("occurrence_id", "template_id", name="uq_residue_samples_occurrence_id"),
    )
    op.create_index(
        "ix_residue_samples_seen_at_template_id", "residue_samples", ["seen_at", "template_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_residue_samples_seen_at_template_id", table_name="residue_samples")
    for table in ("residue_samples", "miner_states", "digests"):
        op.drop_table(table)
