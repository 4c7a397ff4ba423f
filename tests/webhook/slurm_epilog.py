"""Installing deploy/slurm/ncclbot-epilog.py as a hook of the test cluster's EpilogSlurmctld
dispatcher (.ci/services/slurm.sh runs every executable in epilog.d), for the length of a test."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import ROOT, need_service

EPILOG = ROOT / "deploy" / "slurm" / "ncclbot-epilog.py"


def epilog_dir() -> Path:
    need_service(os.environ.get("NCCLBOT_TEST_SLURM") == "1", "no test Slurm (source .ci/services/slurm.sh)")
    folder = Path(os.environ.get("NCCLBOT_TEST_SLURM_EPILOG_DIR", "/nonexistent"))
    need_service(
        folder.is_dir(), "the test Slurm has no EpilogSlurmctld hook folder (NCCLBOT_TEST_SLURM_EPILOG_DIR)"
    )
    return folder


@contextmanager
def installed_epilog(tmp_path: Path, url: str, secret: str, **settings: str) -> Iterator[Path]:
    """The epilog, reporting to `url`; yields its spool folder. slurmctld gives the epilog almost no
    environment, so PATH and SLURM_CONF come from the config file, as on a real controller."""
    spool = tmp_path / "epilog-spool"
    config = tmp_path / "epilog.conf"
    values = {
        "NCCLBOT_WEBHOOK_URL": url,
        "NCCLBOT_WEBHOOK_SECRET": secret,
        "NCCLBOT_EPILOG_SPOOL": str(spool),
        "NCCLBOT_BIN": "none",
        "PATH": os.environ["PATH"],
        "SLURM_CONF": os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"),
        **settings,
    }
    config.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    hook = epilog_dir() / f"ncclbot-test-{uuid.uuid4().hex[:8]}"
    hook.write_text(f"#!/bin/sh\nNCCLBOT_EPILOG_CONFIG='{config}' exec '{sys.executable}' '{EPILOG}'\n")
    hook.chmod(0o755)
    try:
        yield spool
    finally:
        hook.unlink(missing_ok=True)
