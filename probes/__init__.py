"""GPU probe: an allreduce size sweep and node checks on a suspect node, with a verdict.

On the node (torch only): `probes.allreduce` (the probe; under torchrun or self-spawning),
`probes.checks` (node checks), `probes.sideband` (per-rank check-in through the TCPStore).
Anywhere (stdlib only, no torch): `probes.result` (the JSON document), `probes.verdict`,
`probes.baselines` (per-SKU busbw and fleet history), `probes.bisect`, `probes.launchers`
(local, ssh, slurm, kubernetes: `probes.launchers.launch`), `probes.progress` (progress lines).
"""
