"""NCCL incident bot: matcher (logs -> diagnosis)."""
