"""Prometheus metrics of the server, defined in one place so that every layer counts into the same
objects and `/metrics` (bot.server.ops) exposes them. Label values are small fixed sets (class ids,
Slack method names, verdicts), never free text, so the series stay bounded."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

DIAGNOSES = Counter(
    "ncclbot_diagnoses_total", "Diagnoses made, by primary class and source", ["class_id", "source"]
)
DIAGNOSIS_SECONDS = Histogram(
    "ncclbot_diagnosis_seconds",
    "Time to read and diagnose one bundle",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
BYTES_READ = Counter("ncclbot_bytes_read_total", "Log bytes read by the matcher (decompressed)")
QUEUE_DEPTH = Gauge("ncclbot_queue_depth", "Work items waiting or in progress, by kind", ["kind"])
QUEUE_OLDEST_AGE = Gauge("ncclbot_queue_oldest_pending_seconds", "Age of the oldest pending work item")
QUEUE_DEAD = Gauge("ncclbot_queue_dead_items", "Work items given up after their last attempt (need a person)")
SLACK_API_ERRORS = Counter(
    "ncclbot_slack_api_errors_total",
    "Slack Web API calls that failed, by method and HTTP status",
    ["method", "status"],
)
PROBE_VERDICTS = Counter("ncclbot_probe_verdicts_total", "Probe runs by verdict", ["verdict"])
DIGEST_POSTS = Counter("ncclbot_digest_posts_total", "Weekly digests posted, by outcome", ["outcome"])
WEBHOOK_REQUESTS = Counter(
    "ncclbot_webhook_requests_total", "Job-failure webhook requests by HTTP status", ["status"]
)
