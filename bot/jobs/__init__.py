"""Where a failed job's logs are and what can be done to its nodes.

Job sources (`sources.py`: one protocol, a registry by kind) turn a job id into its metadata and the log
files to read: `slurm` (scontrol / sacct), `directory` (a path template), `kubernetes` (the failed pods
of a PyTorchJob or JobSet). Cluster actions (`actions.py`, the same shape) drain or resume a node and
requeue a job away from one: Slurm's scontrol, Kubernetes' cordon and taint. Every name that reaches a
scheduler is validated first (`names.py`), and every command is an argument list, never a shell line.
"""
