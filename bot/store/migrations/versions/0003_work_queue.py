"""Durable work queue (accepted events are committed before they are acknowledged) and the messages
posted under idempotency keys (exactly-once posting).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "work_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("key", sa.String(512), nullable=False),
        sa.Column("group_key", sa.String(512), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("available_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_by", sa.String(255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_work_items"),
        sa.UniqueConstraint("kind", "key", name="uq_work_items_kind_key"),
    )
    op.create_index("ix_work_items_status_available_at", "work_items", ["status", "available_at"])
    op.create_index("ix_work_items_group_key_id", "work_items", ["group_key", "id"])
    op.create_table(
        "posted_messages",
        sa.Column("key", sa.String(512), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("thread_ts", sa.String(32), nullable=True),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_posted_messages"),
    )


def downgrade() -> None:
    op.drop_table("posted_messages")
    op.drop_index("ix_work_items_group_key_id", table_name="work_items")
    op.drop_index("ix_work_items_status_available_at", table_name="work_items")
    op.drop_table("work_items")
