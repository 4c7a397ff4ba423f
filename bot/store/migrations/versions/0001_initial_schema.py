"""Initial schema: nodes, incidents, occurrences, probe runs, feedback, audit log.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("cluster", sa.String(255), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_nodes"),
        sa.UniqueConstraint("hostname", "cluster", name="uq_nodes_hostname_cluster"),
    )
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(80), nullable=False),
        sa.Column("class_id", sa.String(64), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("culprit_hosts", sa.JSON(), nullable=False),
        sa.Column("culprit_ranks", sa.JSON(), nullable=False),
        sa.Column("cluster", sa.String(255), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("occurrences", sa.Integer(), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_by", sa.String(255), nullable=True),
        sa.Column("resolution_fix", sa.Text(), nullable=True),
        sa.Column("slack_channel", sa.String(64), nullable=True),
        sa.Column("slack_ts", sa.String(32), nullable=True),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], name="fk_incidents_node_id_nodes"),
        sa.PrimaryKeyConstraint("id", name="pk_incidents"),
    )
    op.create_index("ix_incidents_fingerprint_last_seen", "incidents", ["fingerprint", "last_seen"])
    op.create_index("ix_incidents_status", "incidents", ["status"])
    op.create_index("ix_incidents_node_id", "incidents", ["node_id"])
    op.create_table(
        "occurrences",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(255), nullable=True),
        sa.Column("cluster", sa.String(255), nullable=True),
        sa.Column("input_digest", sa.String(128), nullable=False),
        sa.Column("class_id", sa.String(64), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("evidence_excerpt", sa.Text(), nullable=False),
        sa.Column("ranks", sa.JSON(), nullable=False),
        sa.Column("world_size", sa.Integer(), nullable=True),
        sa.Column("timeout_ms", sa.Integer(), nullable=True),
        sa.Column("gpu_hours_lost", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["incident_id"], ["incidents.id"], name="fk_occurrences_incident_id_incidents"),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], name="fk_occurrences_node_id_nodes"),
        sa.PrimaryKeyConstraint("id", name="pk_occurrences"),
    )
    op.create_index("ix_occurrences_incident_id", "occurrences", ["incident_id"])
    op.create_index("ix_occurrences_occurred_at", "occurrences", ["occurred_at"])
    op.create_index(
        "uq_occurrences_job_digest",
        "occurrences",
        [sa.text("coalesce(job_id, '')"), "input_digest"],
        unique=True,
    )
    op.create_table(
        "probe_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verdict", sa.String(32), nullable=False),
        sa.Column("backend", sa.String(32), nullable=True),
        sa.Column("world_size", sa.Integer(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["nodes.id"], name="fk_probe_runs_node_id_nodes"),
        sa.PrimaryKeyConstraint("id", name="pk_probe_runs"),
    )
    op.create_index("ix_probe_runs_node_id_started_at", "probe_runs", ["node_id", "started_at"])
    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=False),
        sa.Column("slack_user", sa.String(64), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("corrected_class", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["incident_id"], ["incidents.id"], name="fk_feedback_incident_id_incidents"),
        sa.PrimaryKeyConstraint("id", name="pk_feedback"),
    )
    op.create_index("ix_feedback_incident_id", "feedback", ["incident_id"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["incident_id"], ["incidents.id"], name="fk_audit_log_incident_id_incidents"),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"])
    op.create_index("ix_audit_log_incident_id", "audit_log", ["incident_id"])


def downgrade() -> None:
    for table in ("audit_log", "feedback", "probe_runs", "occurrences", "incidents", "nodes"):
        op.drop_table(table)
