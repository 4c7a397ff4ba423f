"""Occurrences record the analysis version (signature catalog + rules) that produced them.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"  # the newest revision on this branch; re-chained at merge
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("occurrences") as batch:
        batch.add_column(sa.Column("analysis_version", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("occurrences") as batch:
        batch.drop_column("analysis_version")
