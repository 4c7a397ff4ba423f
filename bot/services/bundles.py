"""An incident's bundle: the log files it was diagnosed from, kept (within a size bound) so that files
added later re-run the diagnosis with everything, and so that corrected incidents become labelled
cases (`ncclbot feedback export DIR`, read by `ncclbot eval`)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from bot.settings import Settings

log = logging.getLogger("ncclbot.services.bundles")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class SpooledFile:
    """A downloaded input file on local disk. `origin` identifies it (a Slack file id, "pasted:<hash>")."""

    name: str
    path: Path
    size: int
    origin: str
    # The folder it sits in, kept in the bundle: a pod log's node folder is the host the matcher reads.
    folder: str = ""


def safe_name(name: str) -> str:
    """A file name that stays inside its folder and still tells the matcher what it is (rank3.log)."""
    cleaned = _UNSAFE.sub("_", Path(name).name).strip("._") or "log"
    return cleaned[:200]


def keep(
    store: Any,
    root: Path,
    incident_id: int,
    files: Sequence[SpooledFile],
    *,
    cap_bytes: int,
    occurrence_id: int | None = None,
) -> int:
    """Copy `files` into the incident's bundle under `root` and record them for `occurrence_id` (the
    diagnosis they were read for); forget the oldest kept files beyond `cap_bytes` in all. Returns how
    many files joined (a file already there joins once)."""
    joined = 0
    for spooled in files:
        folder = root / str(incident_id) / hashlib.sha256(spooled.origin.encode()).hexdigest()[:16]
        if spooled.folder:
            folder = folder / safe_name(spooled.folder)
        target = folder / safe_name(spooled.name)
        if not target.exists():
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(spooled.path, target)
        if store.add_incident_file(
            incident_id,
            name=target.name,
            path=str(target),
            size_bytes=spooled.size,
            origin=spooled.origin,
            occurrence_id=occurrence_id,
        ):
            joined += 1
    for path in store.prune_incident_files(cap_bytes):
        Path(path).unlink(missing_ok=True)
    return joined


def keep_references(store: Any, incident_id: int, paths: Sequence[str], *, occurrence_id: int | None) -> int:
    """Record a job's own log paths (files or folders, where the job source found them) with the
    incident's bundle, without copying them: a job's logs can be gigabytes and stay where they are, and a
    thread re-run reads them there next to the files added later. Returns how many joined."""
    joined = 0
    for path in paths:
        if store.add_incident_file(
            incident_id,
            name=Path(path).name or path,
            path=path,
            size_bytes=0,
            origin=f"job:{path}",
            occurrence_id=occurrence_id,
            external=True,
        ):
            joined += 1
    return joined


def bundle_root(settings: Settings) -> Path:
    """Where incidents' kept files live: `bundles/` under NCCLBOT_SPOOL_DIR, else the user data dir."""
    base = settings.spool_dir or Path(platformdirs.user_data_dir("ncclbot", appauthor=False))
    return base / "bundles"


def fetched_files(folder: Path, paths: Sequence[str], *, origin: str) -> list[SpooledFile]:
    """Log files the bot wrote into `folder` for one job (`paths`: pod logs `<node>/<pod>__<container>.log`,
    a webhook's inline logs), as files to keep: each keeps its subfolder (a pod log's node), and its
    origin is `origin` (one fetch or event: another job's files of the same names join too) plus the
    file's path in the folder."""
    files = []
    for path in map(Path, paths):
        relative = path.relative_to(folder)
        files.append(
            SpooledFile(
                name=path.name,
                path=path,
                size=path.stat().st_size,
                origin=f"{origin}:{relative.as_posix()}",
                folder=relative.parent.name,  # "" for a file at the top
            )
        )
    return files


@dataclass(frozen=True, slots=True)
class BundleLogs:
    """What a re-run of an incident reads, and the occurrence it refines."""

    occurrence_id: int | None
    paths: list[str]


def bundle_logs(store: Any, incident_id: int) -> BundleLogs:
    """The incident's bundle files that are still there (a kept copy, or a job's own file or folder)."""
    bundle = store.bundle(incident_id)
    paths = [f.path for f in bundle.files if Path(f.path).is_file() or (f.external and Path(f.path).is_dir())]
    return BundleLogs(occurrence_id=bundle.occurrence_id, paths=paths)


@dataclass(frozen=True, slots=True)
class ExportSummary:
    cases: int
    skipped: list[str]  # one line per incident left out, with why


def export_feedback(store: Any, directory: Path) -> ExportSummary:
    """Write `cases.jsonl` and each case's logs (a folder `<id>/`) in the `ncclbot eval` format: one case
    per incident with feedback; the label is the corrected class, or the diagnosed one when confirmed."""
    directory.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    skipped: list[str] = []
    for summary, feedback, files in store.feedback_cases():
        label = summary.class_id if feedback.correct else feedback.corrected_class
        if label is None:
            skipped.append(f"incident {summary.id}: marked wrong without the right class")
            continue
        present = [f for f in files if Path(f.path).is_file()]  # a job's own folder is not copied
        if not present:
            skipped.append(f"incident {summary.id}: no log files kept")
            continue
        case_id = f"incident-{summary.id}"
        folder = directory / case_id
        folder.mkdir(exist_ok=True)
        for index, kept in enumerate(present):
            name = safe_name(kept.name)
            target = folder / name if not (folder / name).exists() else folder / f"{index}-{name}"
            shutil.copyfile(kept.path, target)
        case: dict[str, Any] = {"id": case_id, "label": label, "source": "feedback", "incident": summary.id}
        if feedback.correct and summary.culprit_hosts:
            case["culprit_host"] = summary.culprit_hosts[0]
        if feedback.note:
            case["note"] = feedback.note
        lines.append(json.dumps(case, ensure_ascii=False))
    (directory / "cases.jsonl").write_text("".join(line + "\n" for line in lines))
    return ExportSummary(cases=len(lines), skipped=skipped)
