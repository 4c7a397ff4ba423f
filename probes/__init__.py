"""GPU probe: an allreduce size sweep and node checks on a suspect node, with a verdict.

On the node (torch only): `probes.allreduce` (the probe's entry point and rank 0's coordinator; under
torchrun or self-spawning via `probes.spawn`), `probes.worker` (one rank's collectives),
`probes.assemble` (per-rank reports -> result), `probes.sideband` (per-rank check-in through the
TCPStore), `probes.checks` (node checks).
Anywhere (stdlib only, no torch): `probes.result` (the JSON document), `probes.verdict`,
`probes.baselines` (per-SKU busbw and fleet history), `probes.bisect`, `probes.launchers`
(local, ssh, slurm, kubernetes: `probes.launchers.launch`), `probes.progress` (progress lines).
"""
