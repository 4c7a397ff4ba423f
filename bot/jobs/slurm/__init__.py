"""Slurm: reading its text output (scontrol, sacct), its host lists and file-name patterns, and the
commands that look up jobs and act on nodes. Slurm 22.05 (Debian 12) and newer."""
