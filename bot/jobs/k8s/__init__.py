"""Kubernetes: the failed pods of a PyTorchJob or JobSet and their logs, and cordon + taint of a node,
through the official `kubernetes` client (an optional extra: `pip install 'ncclbot[kubernetes]'`)."""
