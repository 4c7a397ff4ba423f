"""The argument list a launcher builds is exactly what the node's probe parses back."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from probes.options import ProbeOptions, add_probe_arguments, options_from_args, parse_size, sweep


def parse(argv: list[str]) -> ProbeOptions:
    parser = argparse.ArgumentParser()
    add_probe_arguments(parser)
    return options_from_args(parser, parser.parse_args(argv))


@pytest.mark.parametrize(
    "opts",
    [
        ProbeOptions(),
        ProbeOptions(json=True, explicit_sizes=[8, 1 << 20], iters=2, deadline=15.5, no_checks=True, nproc=4),
        ProbeOptions(
            backend="nccl", min_bytes=1024, max_bytes=1 << 30, p2p_bytes_option=1 << 24, watch_stdin=True
        ),
        ProbeOptions(nnodes=3, node_rank=2, master_addr="gpu01", master_port=29555, baselines="/etc/b.json"),
    ],
)
def test_to_argv_round_trips(opts: ProbeOptions) -> None:
    assert parse(opts.to_argv()) == opts


def test_slurm_style_node_rank_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = ProbeOptions(nnodes=2, node_rank=None, master_addr="gpu01", master_port=1)
    assert "--node-rank" not in opts.to_argv()
    monkeypatch.setenv("SLURM_NODEID", "1")
    assert parse(opts.to_argv()) == dataclasses.replace(opts, node_rank=1)


def test_sizes_and_default_sweeps() -> None:
    assert [parse_size(t) for t in ("8", "64K", "1M", "1GiB", "4 KB")] == [8, 65536, 1 << 20, 1 << 30, 4096]
    with pytest.raises(ValueError, match="multiple of 4"):
        parse_size("6")
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")
    assert sweep(8, 64) == [8, 16, 32, 64]
    gpu = ProbeOptions(backend_resolved="nccl")
    assert gpu.sizes[0] == 8 and gpu.sizes[-1] == 1 << 30 and len(gpu.sizes) == 28
    assert gpu.p2p_bytes == 64 << 20
    assert ProbeOptions(backend_resolved="gloo").sizes[-1] == 16 << 20


def test_bad_options_are_usage_errors() -> None:
    for argv in (["--iters", "0"], ["--nnodes", "2"], ["--node-rank", "3"], ["--sizes", "7"]):
        with pytest.raises(SystemExit):
            parse(argv)
