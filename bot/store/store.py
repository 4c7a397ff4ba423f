"""`Store`: the incident store's entry point. Opens (and migrates) the database, records diagnoses and
probe runs, changes incidents on people's behalf, and answers the queries of `bot.store.queries`."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Engine, delete, func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from bot.store import digest_queries, digests, migrate, queries, residue
from bot.store.engine import WRITE_OPTION, StoreError, conflict_insert, create_store_engine
from bot.store.facts import diagnosis_document, occurrence_facts, stored_name
from bot.store.fingerprint import culprit_hosts, diagnosis_fingerprint, normalise_host
from bot.store.models import (
    STATUS_OPEN,
    STATUS_RESOLVED,
    STATUS_SNOOZED,
    AuditLog,
    Feedback,
    Incident,
    IncidentFile,
    Node,
    Occurrence,
    PostedMessage,
    ProbeRun,
    ProcessedEvent,
)
from bot.store.records import (
    AuditEntry,
    Bundle,
    FeedbackRecord,
    IncidentDetail,
    IncidentFileRecord,
    IncidentRecord,
    IncidentSummary,
    OccurrenceSummary,
    PostedRef,
    ProbeRunSummary,
    RepeatNote,
)
from bot.store.recurrence import recurrence_line
from bot.store.settings import INCIDENT_WINDOW, database_url
from matcher.model import Diagnosis

Source = Literal["cli", "slack", "webhook"]
SOURCES: frozenset[str] = frozenset({"cli", "slack", "webhook"})
PROBE_VERDICTS: frozenset[str] = frozenset({"healthy", "degraded", "failed"})

BOT_ACTOR = "ncclbot"
# How long inbound request keys are remembered (Slack retries within minutes; a signature is good for 5).
PROCESSED_KEEP = timedelta(days=2)


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise StoreError("times given to the store must carry a time zone")
    return now.astimezone(UTC)


def remember_processed(session: Session, key: str, *, at: datetime, keep: timedelta = PROCESSED_KEEP) -> bool:
    """Record an inbound request key in `session`'s transaction, forgetting keys older than `keep`;
    False when it was there already. (Store.mark_processed commits it alone; the work queue commits it
    with the item the request became.)"""
    session.execute(delete(ProcessedEvent).where(ProcessedEvent.seen_at < at - keep))
    inserted = session.scalar(
        conflict_insert(session.get_bind(), ProcessedEvent)
        .values(key=key[:255], seen_at=at)
        .on_conflict_do_nothing(index_elements=["key"])
        .returning(ProcessedEvent.key)
    )
    return inserted is not None


def _lock_key(fingerprint: str) -> int:
    """A signed 64-bit advisory-lock key per fingerprint."""
    return int.from_bytes(hashlib.sha256(fingerprint.encode()).digest()[:8], "big", signed=True)


class Store:
    """Open with `Store.open()`; close with `close()` or use as a context manager."""

    def __init__(self, engine: Engine, *, incident_window: timedelta = INCIDENT_WINDOW) -> None:
        self.engine = engine
        self.incident_window = incident_window
        self._read = sessionmaker(engine, expire_on_commit=False)
        self._write = sessionmaker(engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False)

    @classmethod
    def open(cls, url: str | None = None, *, incident_window: timedelta = INCIDENT_WINDOW) -> Store:
        """Open the database `url` (default: NCCLBOT_DATABASE_URL, else the SQLite file in the user's data
        directory) and bring its schema to the newest revision."""
        engine = create_store_engine(database_url(url))
        try:
            migrate.upgrade(engine)
        except Exception:
            engine.dispose()
            raise
        return cls(engine, incident_window=incident_window)

    def close(self) -> None:
        self.engine.dispose()

    def writing(self) -> Any:
        """A write transaction (SQLite: BEGIN IMMEDIATE) for store extensions such as the work queue."""
        return self._write.begin()

    def reading(self) -> Session:
        """A read-only session for store extensions."""
        return self._read()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- recording -----------------------------------------------------------------------------------

    def record_diagnosis(
        self,
        diagnosis: Diagnosis,
        *,
        source: Source = "cli",
        job_id: str | None = None,
        cluster: str | None = None,
        input_digest: str,
        now: datetime | None = None,
    ) -> IncidentRecord:
        """Store one diagnosis as an occurrence and group it into an incident.

        Idempotent per (job_id, input_digest): recording the same input again returns the incident it
        went to, counting nothing. Otherwise it joins the open or snoozed incident with the same
        fingerprint seen within the incident window, or opens a new one.
        """
        if source not in SOURCES:
            raise StoreError(f"unknown source {source!r}; expected one of {', '.join(sorted(SOURCES))}")
        if not input_digest:
            raise StoreError("input_digest must not be empty")
        at = _now(now)
        try:
            return self._record(diagnosis, source, job_id, cluster, input_digest, at)
        except IntegrityError:
            # The same job and input raced in under another fingerprint (another matcher version);
            # the winner's row is there now.
            return self._record(diagnosis, source, job_id, cluster, input_digest, at)

    def _record(
        self,
        diagnosis: Diagnosis,
        source: str,
        job_id: str | None,
        cluster: str | None,
        input_digest: str,
        at: datetime,
    ) -> IncidentRecord:
        fingerprint = diagnosis_fingerprint(diagnosis)
        class_id = diagnosis.primary.class_id
        hosts = tuple(dict.fromkeys(h for h in (stored_name(h) for h in culprit_hosts(diagnosis)) if h))
        job_id = stored_name(job_id) if job_id is not None else None
        cluster = stored_name(cluster) if cluster is not None else None
        with self._write.begin() as session:
            self._lock_fingerprint(session, fingerprint)
            earlier = session.scalar(
                select(Occurrence).where(
                    Occurrence.job_id.is_(None) if job_id is None else Occurrence.job_id == job_id,
                    Occurrence.input_digest == input_digest,
                )
            )
            if earlier is not None:
                return self._incident_record(session, earlier, new_incident=False, duplicate=True)

            node = self._node(session, hosts[0], cluster, at) if hosts else None
            incident = self._open_incident_for(session, fingerprint, cluster, at)
            new_incident = incident is None
            if incident is None:
                incident = Incident(
                    fingerprint=fingerprint,
                    class_id=class_id,
                    node_id=node.id if node else None,
                    culprit_hosts=list(hosts),
                    culprit_ranks=list(diagnosis.culprit.ranks) if diagnosis.culprit else [],
                    cluster=cluster,
                    status=STATUS_OPEN,
                    first_seen=at,
                    last_seen=at,
                    occurrence_count=1,
                )
                session.add(incident)
            else:
                incident.occurrence_count = Incident.occurrence_count + 1
                incident.first_seen = min(incident.first_seen, at)
                incident.last_seen = max(incident.last_seen, at)
                if incident.status == STATUS_SNOOZED and (
                    incident.snoozed_until is None or incident.snoozed_until <= at
                ):
                    incident.status, incident.snoozed_until = STATUS_OPEN, None
            session.flush()
            occurrence = Occurrence(
                incident_id=incident.id,
                occurred_at=at,
                source=source,
                job_id=job_id,
                cluster=cluster,
                input_digest=input_digest,
                **_diagnosis_columns(diagnosis, node),
            )
            session.add(occurrence)
            session.flush()
            session.refresh(incident)
            return self._incident_record(session, occurrence, new_incident=new_incident, duplicate=False)

    def refine_occurrence(
        self, occurrence_id: int, diagnosis: Diagnosis, *, input_digest: str, now: datetime | None = None
    ) -> IncidentRecord:
        """Replace an occurrence's diagnosis with a better one of the same failure (its bundle re-run
        with more files): nothing is counted again. The incident takes the refined class, fingerprint
        and culprit when this is its newest occurrence (its message shows that one).

        Idempotent: the same input again changes nothing (`duplicate`); an input already stored as
        another occurrence of the same job is that occurrence."""
        if not input_digest:
            raise StoreError("input_digest must not be empty")
        at = _now(now)
        fingerprint = diagnosis_fingerprint(diagnosis)
        hosts = tuple(dict.fromkeys(h for h in (stored_name(h) for h in culprit_hosts(diagnosis)) if h))
        with self._write.begin() as session:
            occurrence = session.get(Occurrence, occurrence_id, with_for_update=True)
            if occurrence is None:
                raise StoreError(f"no occurrence with id {occurrence_id}")
            self._lock_fingerprint(session, fingerprint)
            if occurrence.input_digest == input_digest:
                return self._incident_record(session, occurrence, new_incident=False, duplicate=True)
            same_input = session.scalar(
                select(Occurrence).where(
                    Occurrence.job_id.is_(None)
                    if occurrence.job_id is None
                    else Occurrence.job_id == occurrence.job_id,
                    Occurrence.input_digest == input_digest,
                )
            )
            if same_input is not None:
                return self._incident_record(session, same_input, new_incident=False, duplicate=True)
            incident = session.get_one(Incident, occurrence.incident_id)
            node = self._node(session, hosts[0], occurrence.cluster, at) if hosts else None
            occurrence.input_digest = input_digest
            for column, value in _diagnosis_columns(diagnosis, node).items():
                setattr(occurrence, column, value)
            newest = session.scalar(
                select(func.max(Occurrence.id)).where(Occurrence.incident_id == incident.id)
            )
            if newest == occurrence.id:
                incident.fingerprint, incident.class_id = fingerprint, diagnosis.primary.class_id
                incident.node_id = node.id if node else None
                incident.culprit_hosts = list(hosts)
                incident.culprit_ranks = list(diagnosis.culprit.ranks) if diagnosis.culprit else []
            session.add(
                AuditLog(
                    at=at,
                    actor=BOT_ACTOR,
                    action="refine",
                    incident_id=incident.id,
                    detail={"occurrence": occurrence.id, "class": diagnosis.primary.class_id},
                )
            )
            session.flush()
            record = self._incident_record(session, occurrence, new_incident=False, duplicate=False)
            return replace(record, refined=True)

    def _lock_fingerprint(self, session: Session, fingerprint: str) -> None:
        """Serialise writers of one fingerprint so that counts never lose an update. SQLite needs
        nothing more: the write transaction began with BEGIN IMMEDIATE, which takes the database lock."""
        if self.engine.dialect.name == "postgresql":
            session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(fingerprint)})

    def _open_incident_for(
        self, session: Session, fingerprint: str, cluster: str | None, at: datetime
    ) -> Incident | None:
        """The incident this occurrence joins: same fingerprint and cluster, not resolved, seen within
        the window (either side, so that late-arriving diagnoses group too)."""
        window = self.incident_window
        return session.scalar(
            select(Incident)
            .where(
                Incident.fingerprint == fingerprint,
                Incident.cluster.is_(None) if cluster is None else Incident.cluster == cluster,
                Incident.status != STATUS_RESOLVED,
                Incident.last_seen >= at - window,
                Incident.first_seen <= at + window,
            )
            .order_by(Incident.last_seen.desc())
            .limit(1)
        )

    def _node(self, session: Session, hostname: str, cluster: str | None, at: datetime) -> Node:
        """Get or create; concurrent writers of different fingerprints may race for the same node.

        Without a cluster, a hostname known in exactly one cluster is that node (a probe launched by
        hand rarely says which cluster it ran in)."""
        hostname, cluster_key = normalise_host(hostname), cluster or ""
        if cluster is None:
            known = session.scalars(select(Node).where(Node.hostname == hostname).limit(2)).all()
            if len(known) == 1:
                return known[0]
        session.execute(
            conflict_insert(self.engine, Node)
            .values(hostname=hostname, cluster=cluster_key, first_seen=at)
            .on_conflict_do_nothing(index_elements=["hostname", "cluster"])
        )
        return session.scalars(
            select(Node).where(Node.hostname == hostname, Node.cluster == cluster_key)
        ).one()

    def _incident_record(
        self, session: Session, occurrence: Occurrence, *, new_incident: bool, duplicate: bool
    ) -> IncidentRecord:
        incident = session.get_one(Incident, occurrence.incident_id)
        node = session.get(Node, occurrence.node_id) if occurrence.node_id is not None else None
        line = recurrence_line(
            session,
            class_id=occurrence.class_id,
            node_id=occurrence.node_id,
            hostname=node.hostname if node else None,
            cluster=occurrence.cluster,
            at=occurrence.occurred_at,
        )
        return IncidentRecord(
            id=incident.id,
            fingerprint=incident.fingerprint,
            class_id=incident.class_id,
            occurrences=incident.occurrence_count,
            first_seen=incident.first_seen,
            last_seen=incident.last_seen,
            status=incident.status,
            culprit_hosts=tuple(incident.culprit_hosts),
            cluster=incident.cluster,
            occurrence_id=occurrence.id,
            new_incident=new_incident,
            duplicate=duplicate,
            recurrence_line=line,
            slack_channel=incident.slack_channel,
            slack_ts=incident.slack_ts,
        )

    def record_probe_run(
        self,
        result: dict[str, Any],
        *,
        node: str,
        cluster: str | None = None,
        started: datetime | None = None,
        finished: datetime | None = None,
    ) -> int:
        """Store a probe's JSON result for `node`; returns the ProbeRun id."""
        verdict = result.get("verdict")
        if verdict not in PROBE_VERDICTS:
            raise StoreError(f"probe result has no valid verdict (got {verdict!r})")
        if not node.strip():
            raise StoreError("a probe run needs the node it ran on")
        recorded = _now(None)
        world_size = result.get("world_size")
        with self._write.begin() as session:
            node_row = self._node(session, node, cluster, recorded)
            run = ProbeRun(
                node_id=node_row.id,
                started_at=None if started is None else _now(started),
                finished_at=None if finished is None else _now(finished),
                recorded_at=recorded,
                verdict=verdict,
                backend=result.get("backend"),
                world_size=world_size if isinstance(world_size, int) else None,
                metrics=result,
            )
            session.add(run)
            session.flush()
            return run.id

    # -- people acting on incidents (the Slack app calls these) ---------------------------------------

    def _change_incident(
        self,
        incident_id: int,
        actor: str,
        action: str,
        detail: dict[str, Any],
        at: datetime,
        change: Callable[[Incident], None],
    ) -> IncidentSummary:
        """Apply `change` to one incident and log it, in one transaction."""
        with self._write.begin() as session:
            incident = session.get(Incident, incident_id)
            if incident is None:
                raise StoreError(f"no incident with id {incident_id}")
            change(incident)
            session.add(AuditLog(at=at, actor=actor, action=action, incident_id=incident_id, detail=detail))
        return self._summary(incident_id)

    def resolve_incident(
        self, incident_id: int, who: str, fix: str | None, *, now: datetime | None = None
    ) -> IncidentSummary:
        """Mark resolved by `who` with `fix` (free text naming what was done, e.g. "drained node")."""
        at = _now(now)
        fix_text = fix.strip() if fix and fix.strip() else None

        def resolve(incident: Incident) -> None:
            incident.status, incident.snoozed_until = STATUS_RESOLVED, None
            incident.resolved_at, incident.resolved_by, incident.resolution_fix = at, who, fix_text

        return self._change_incident(incident_id, who, "resolve", {"fix": fix_text}, at, resolve)

    def snooze(
        self, incident_id: int, who: str, until: datetime, *, now: datetime | None = None
    ) -> IncidentSummary:
        """Keep the incident open but quiet until `until`; a recurrence after that reopens it."""
        at, until_utc = _now(now), _now(until)
        if until_utc <= at:
            raise StoreError("a snooze must end in the future")

        def quiet(incident: Incident) -> None:
            if incident.status == STATUS_RESOLVED:
                raise StoreError(f"incident {incident_id} is resolved; nothing to snooze")
            incident.status, incident.snoozed_until = STATUS_SNOOZED, until_utc

        return self._change_incident(incident_id, who, "snooze", {"until": until_utc.isoformat()}, at, quiet)

    def set_slack_message(self, incident_id: int, channel: str, ts: str) -> None:
        """Remember the incident's one Slack message so that repeats edit it instead of posting anew."""

        def attach(incident: Incident) -> None:
            incident.slack_channel, incident.slack_ts = channel, ts

        self._change_incident(
            incident_id, BOT_ACTOR, "slack-message", {"channel": channel, "ts": ts}, _now(None), attach
        )

    def record_feedback(
        self,
        incident_id: int,
        slack_user: str,
        *,
        correct: bool,
        corrected_class: str | None = None,
        note: str | None = None,
        now: datetime | None = None,
    ) -> int:
        if correct and corrected_class:
            raise StoreError("feedback that says the diagnosis is correct cannot name another class")
        at = _now(now)
        with self._write.begin() as session:
            if session.get(Incident, incident_id) is None:
                raise StoreError(f"no incident with id {incident_id}")
            feedback = Feedback(
                incident_id=incident_id,
                slack_user=slack_user,
                correct=correct,
                corrected_class=corrected_class,
                note=note.strip() if note and note.strip() else None,
                created_at=at,
            )
            session.add(feedback)
            session.add(
                AuditLog(
                    at=at,
                    actor=slack_user,
                    action="feedback",
                    incident_id=incident_id,
                    detail={"correct": correct, "corrected_class": corrected_class, "note": feedback.note},
                )
            )
            session.flush()
            return feedback.id

    def audit(
        self,
        actor: str,
        action: str,
        *,
        incident_id: int | None = None,
        detail: dict[str, Any] | None = None,
        now: datetime | None = None,
    ) -> int:
        """Log an action that changes nothing in the store itself (a probe launched, a digest posted)."""
        with self._write.begin() as session:
            entry = AuditLog(
                at=_now(now), actor=actor, action=action, incident_id=incident_id, detail=detail or {}
            )
            session.add(entry)
            session.flush()
            return entry.id

    # -- messages posted under idempotency keys -----------------------------------------------------

    def message_for_key(self, key: str) -> PostedRef | None:
        with self._read() as session:
            row = session.get(PostedMessage, key)
            return None if row is None else PostedRef(channel=row.channel, ts=row.ts, thread_ts=row.thread_ts)

    def remember_message(
        self, key: str, channel: str, ts: str, *, thread_ts: str | None = None, now: datetime | None = None
    ) -> PostedRef:
        """Record what was posted under `key`; if another writer recorded the key first, theirs stands."""
        with self._write.begin() as session:
            session.execute(
                conflict_insert(self.engine, PostedMessage)
                .values(key=key, channel=channel, ts=ts, thread_ts=thread_ts, posted_at=_now(now))
                .on_conflict_do_nothing(index_elements=["key"])
            )
            row = session.get_one(PostedMessage, key)
            return PostedRef(channel=row.channel, ts=row.ts, thread_ts=row.thread_ts)

    def audit_entries(
        self, *, incident_id: int | None = None, action: str | None = None, limit: int = 200
    ) -> list[AuditEntry]:
        """The newest audit entries first, optionally of one incident or one action."""
        query = select(AuditLog).order_by(AuditLog.id.desc()).limit(limit)
        if incident_id is not None:
            query = query.where(AuditLog.incident_id == incident_id)
        if action is not None:
            query = query.where(AuditLog.action == action)
        with self._read() as session:
            return [
                AuditEntry(row.id, row.at, row.actor, row.action, row.incident_id, dict(row.detail))
                for row in session.scalars(query)
            ]

    # -- reading ---------------------------------------------------------------------------------------

    def _summary(self, incident_id: int) -> IncidentSummary:
        with self._read() as session:
            for summary in queries.list_incidents(session, open_only=False, ids=[incident_id]):
                return summary
        raise StoreError(f"no incident with id {incident_id}")

    def incident(self, incident_id: int) -> IncidentSummary:
        return self._summary(incident_id)

    def incidents(self, *, open_only: bool = False, limit: int = 200) -> list[IncidentSummary]:
        with self._read() as session:
            return queries.list_incidents(session, open_only=open_only, limit=limit)

    def history(
        self,
        *,
        days: int = 30,
        node: str | None = None,
        class_id: str | None = None,
        now: datetime | None = None,
    ) -> list[OccurrenceSummary]:
        with self._read() as session:
            return queries.history(session, now=_now(now), days=days, node=node, class_id=class_id)

    def probe_runs(
        self, *, days: int = 30, node: str | None = None, now: datetime | None = None
    ) -> Sequence[ProbeRunSummary]:
        with self._read() as session:
            return queries.probe_runs(session, now=_now(now), days=days, node=node)

    def recurrence(
        self, *, by: queries.Grouping, days: int, now: datetime | None = None
    ) -> list[queries.RecurrenceRow]:
        with self._read() as session:
            return queries.recurrence(session, by=by, days=days, now=_now(now))

    def lemon_nodes(self, *, days: int = 30, now: datetime | None = None) -> list[queries.LemonNode]:
        with self._read() as session:
            return queries.lemon_nodes(session, days=days, now=_now(now))

    def gpu_hours_lost(
        self, *, by: queries.Grouping, days: int, now: datetime | None = None
    ) -> list[queries.CostRow]:
        with self._read() as session:
            return queries.gpu_hours_lost(session, by=by, days=days, now=_now(now))

    def mttr(self, *, days: int, now: datetime | None = None) -> list[queries.MttrRow]:
        with self._read() as session:
            return queries.mttr(session, days=days, now=_now(now))

    def fix_effectiveness(self, *, now: datetime | None = None) -> list[queries.FixEffectiveness]:
        with self._read() as session:
            return queries.fix_effectiveness(session, now=_now(now))

    # -- the weekly digest ------------------------------------------------------------------------------

    def claim_digest(
        self,
        channel: str,
        week: str,
        *,
        as_of: datetime,
        claimant: str,
        lease: timedelta,
        now: datetime | None = None,
    ) -> digests.DigestClaim:
        """Claim the digest of (channel, ISO week) before posting it; see `bot.store.digests`."""
        with self._write.begin() as session:
            return digests.claim(
                session,
                channel=channel,
                week=week,
                as_of=_now(as_of),
                claimant=claimant,
                at=_now(now),
                lease=lease,
            )

    def mark_digest_posted(
        self, claim_id: int, claimant: str, ts: str, *, now: datetime | None = None
    ) -> bool:
        with self._write.begin() as session:
            return digests.mark_posted(session, claim_id, claimant, ts, _now(now))

    def release_digest(self, claim_id: int, claimant: str) -> None:
        with self._write.begin() as session:
            digests.release(session, claim_id, claimant)

    def digest_claim(self, channel: str, week: str) -> digests.DigestClaim | None:
        with self._read() as session:
            return digests.find(session, channel, week)

    def top_fingerprints(
        self, *, days: int, now: datetime | None = None, limit: int = 5
    ) -> list[digest_queries.FingerprintRow]:
        with self._read() as session:
            return digest_queries.top_fingerprints(session, days=days, now=_now(now), limit=limit)

    def stale_open_incidents(
        self, *, older_than_days: int, now: datetime | None = None, limit: int = 10
    ) -> list[IncidentSummary]:
        with self._read() as session:
            return digest_queries.stale_open_incidents(
                session, now=_now(now), older_than_days=older_than_days, limit=limit
            )

    def corrections(self, *, days: int, now: datetime | None = None) -> list[digest_queries.CorrectionRow]:
        with self._read() as session:
            return digest_queries.corrections(session, days=days, now=_now(now))

    def class_counts(self, *, start: datetime, end: datetime) -> dict[str, int]:
        with self._read() as session:
            return digest_queries.class_counts(session, start=_now(start), end=_now(end))

    def latest_incident_per_node(
        self, *, start: datetime, end: datetime
    ) -> list[digest_queries.NodeIncident]:
        with self._read() as session:
            return digest_queries.latest_incident_per_node(session, start=_now(start), end=_now(end))

    def node_class_counts(self, *, start: datetime, end: datetime) -> list[digest_queries.NodeClassCount]:
        with self._read() as session:
            return digest_queries.node_class_counts(session, start=_now(start), end=_now(end))

    # -- residue: the lines no signature recognised --------------------------------------------------------

    @contextmanager
    def residue_writer(self, miner: str) -> Iterator[residue.ResidueWriter]:
        """One write transaction holding `miner`'s lock: read its state, mine, save state and samples."""
        with self._write.begin() as session:
            residue.lock_miner(session, miner)
            yield residue.ResidueWriter(session, miner)

    def miner_state(self, miner: str) -> bytes | None:
        with self._read() as session:
            return residue.miner_state(session, miner)

    def residue_counts(self, *, days: int, now: datetime | None = None) -> list[residue.ResidueCount]:
        end = _now(now)
        with self._read() as session:
            return residue.residue_counts(session, start=end - timedelta(days=days), end=end)

    def residue_examples(
        self, template_id: int, *, limit: int = 5, until: datetime | None = None
    ) -> list[str]:
        """Distinct example lines of a template, newest first (seen up to `until` when given)."""
        with self._read() as session:
            return residue.examples(
                session, template_id, limit=limit, end=None if until is None else _now(until)
            )

    # -- what a chat front end needs to draw and extend an incident -----------------------------------

    def incident_detail(self, incident_id: int) -> IncidentDetail:
        """The incident with its newest diagnosis document, recurrence, feedback and bundle."""
        summary = self._summary(incident_id)
        with self._read() as session:
            latest = session.scalar(
                select(Occurrence)
                .where(Occurrence.incident_id == incident_id)
                .order_by(Occurrence.occurred_at.desc(), Occurrence.id.desc())
                .limit(1)
            )
            line, first = None, None
            if latest is not None:
                node = session.get(Node, latest.node_id) if latest.node_id is not None else None
                line = recurrence_line(
                    session,
                    class_id=latest.class_id,
                    node_id=latest.node_id,
                    hostname=node.hostname if node else None,
                    cluster=latest.cluster,
                    at=latest.occurred_at,
                )
                if line is not None:
                    first = self._first_message(session, latest)
            feedback = session.scalar(
                select(Feedback)
                .where(Feedback.incident_id == incident_id)
                .order_by(Feedback.created_at.desc(), Feedback.id.desc())
                .limit(1)
            )
        return IncidentDetail(
            summary=summary,
            document=latest.document if latest is not None else None,
            job_id=latest.job_id if latest is not None else None,
            recurrence_line=line,
            first_message=first,
            feedback=None if feedback is None else _feedback_record(feedback),
            files=tuple(self.incident_files(incident_id)),
        )

    @staticmethod
    def _first_message(session: Session, occurrence: Occurrence) -> tuple[str, str] | None:
        """The chat message of the earliest occurrence in the recurrence line's scope (same class, same
        culprit node), for a "first seen" link."""
        scope = [Occurrence.class_id == occurrence.class_id]
        if occurrence.node_id is not None:
            scope.append(Occurrence.node_id == occurrence.node_id)
        row = session.execute(
            select(Incident.slack_channel, Incident.slack_ts)
            .join(Occurrence, Occurrence.incident_id == Incident.id)
            .where(*scope, Incident.slack_ts.is_not(None))
            .order_by(Occurrence.occurred_at, Occurrence.id)
            .limit(1)
        ).first()
        return None if row is None or row[0] is None or row[1] is None else (row[0], row[1])

    def incident_for_message(self, channel: str, ts: str) -> IncidentSummary | None:
        """The incident whose chat message is (channel, ts): files posted in its thread join it."""
        with self._read() as session:
            found = session.scalar(
                select(Incident.id).where(Incident.slack_channel == channel, Incident.slack_ts == ts).limit(1)
            )
        return None if found is None else self._summary(found)

    def message_for_job(self, job_id: str, cluster: str | None) -> tuple[str, str] | None:
        """The chat message already posted for this job (another diagnosis of it edits that message)."""
        with self._read() as session:
            row = session.execute(
                select(Incident.slack_channel, Incident.slack_ts)
                .join(Occurrence, Occurrence.incident_id == Incident.id)
                .where(
                    Occurrence.job_id == job_id,
                    Occurrence.cluster.is_(None) if cluster is None else Occurrence.cluster == cluster,
                    Incident.slack_ts.is_not(None),
                )
                .order_by(Occurrence.occurred_at.desc())
                .limit(1)
            ).first()
        return None if row is None or row[0] is None or row[1] is None else (row[0], row[1])

    def processed(self, key: str, *, now: datetime | None = None) -> bool:
        """Whether `key` was marked processed within the last PROCESSED_KEEP."""
        with self._read() as session:
            row = session.get(ProcessedEvent, key[:255])
            return row is not None and row.seen_at >= _now(now) - PROCESSED_KEEP

    def mark_processed(
        self, key: str, *, keep: timedelta = PROCESSED_KEEP, now: datetime | None = None
    ) -> bool:
        """Remember an inbound event key; False when it was seen before (a retry, a duplicate event).
        Keys older than `keep` are forgotten (Slack retries within minutes)."""
        with self._write.begin() as session:
            return remember_processed(session, key, at=_now(now), keep=keep)

    def add_incident_file(
        self,
        incident_id: int,
        *,
        name: str,
        path: str,
        size_bytes: int,
        origin: str,
        occurrence_id: int | None = None,
        external: bool = False,
        now: datetime | None = None,
    ) -> bool:
        """Keep a file with the incident's bundle (for `occurrence_id`, the diagnosis it was read for);
        False when that origin had joined already. `external`: the path is the job's own log, kept as
        a reference (never counted against the cap, never deleted)."""
        with self._write.begin() as session:
            inserted = session.scalar(
                conflict_insert(self.engine, IncidentFile)
                .values(
                    incident_id=incident_id,
                    name=name[:255],
                    path=path,
                    size_bytes=size_bytes,
                    origin=origin[:255],
                    added_at=_now(now),
                    occurrence_id=occurrence_id,
                    external=external,
                )
                .on_conflict_do_nothing(index_elements=["incident_id", "origin"])
                .returning(IncidentFile.id)
            )
            return inserted is not None

    def incident_files(self, incident_id: int) -> list[IncidentFileRecord]:
        with self._read() as session:
            rows = session.scalars(
                select(IncidentFile).where(IncidentFile.incident_id == incident_id).order_by(IncidentFile.id)
            )
            return [_file_record(row) for row in rows]

    def bundle(self, incident_id: int) -> Bundle:
        """What a re-run of the incident reads: the files of its newest occurrence that has files (files
        kept before occurrences were recorded with them belong to every occurrence), else none, with the
        incident's newest occurrence."""
        files = self.incident_files(incident_id)
        with self._read() as session:
            newest = session.scalar(
                select(func.max(Occurrence.id)).where(Occurrence.incident_id == incident_id)
            )
        owners = [f.occurrence_id for f in files if f.occurrence_id is not None]
        owner = max(owners) if owners else newest
        chosen = tuple(f for f in files if f.occurrence_id in (None, owner))
        return Bundle(occurrence_id=owner, files=chosen)

    def repeat_notes(self, incident_id: int, *, limit: int = 20) -> list[RepeatNote]:
        """The incident's occurrences after its first that came through a chat or the webhook (they get a
        "seen again" note in the incident's thread), oldest first, at most `limit` of the newest."""
        with self._read() as session:
            rows = session.execute(
                select(Occurrence.id, Occurrence.job_id, Occurrence.source)
                .where(Occurrence.incident_id == incident_id)
                .order_by(Occurrence.id)
            ).all()
        notes = [
            RepeatNote(occurrence_id=row[0], ordinal=index, job_id=row[1])
            for index, row in enumerate(rows, start=1)
            if index > 1 and row[2] != "cli"
        ]
        return notes[-limit:]

    def prune_incident_files(self, max_total_bytes: int) -> list[str]:
        """Forget the oldest bundle files until the kept ones fit `max_total_bytes`; returns the paths
        to delete from disk."""
        removed: list[str] = []
        with self._write.begin() as session:
            rows = session.scalars(
                select(IncidentFile)
                .where(IncidentFile.external.is_(False))
                .order_by(IncidentFile.added_at.desc(), IncidentFile.id.desc())
            )
            total = 0
            for row in rows:
                total += row.size_bytes
                if total > max_total_bytes:
                    removed.append(row.path)
                    session.delete(row)
        return removed

    def feedback_cases(self) -> list[tuple[IncidentSummary, FeedbackRecord, list[IncidentFileRecord]]]:
        """Each incident's newest feedback with the incident and its bundle (one job's files): labelled
        cases."""
        with self._read() as session:
            newest = (
                select(Feedback.incident_id, func.max(Feedback.id).label("id"))
                .group_by(Feedback.incident_id)
                .subquery()
            )
            rows = list(
                session.scalars(
                    select(Feedback).join(newest, newest.c.id == Feedback.id).order_by(Feedback.id)
                )
            )
            feedback = [_feedback_record(row) for row in rows]
        return [(self._summary(f.incident_id), f, list(self.bundle(f.incident_id).files)) for f in feedback]


def _feedback_record(row: Feedback) -> FeedbackRecord:
    return FeedbackRecord(
        id=row.id,
        incident_id=row.incident_id,
        user=row.slack_user,
        correct=row.correct,
        corrected_class=row.corrected_class,
        note=row.note,
        created_at=row.created_at,
    )


def _file_record(row: IncidentFile) -> IncidentFileRecord:
    return IncidentFileRecord(
        id=row.id,
        incident_id=row.incident_id,
        name=row.name,
        path=row.path,
        size_bytes=row.size_bytes,
        origin=row.origin,
        added_at=row.added_at,
        occurrence_id=row.occurrence_id,
        external=row.external,
    )


def _diagnosis_columns(diagnosis: Diagnosis, node: Node | None) -> dict[str, Any]:
    """An occurrence's columns that come from its diagnosis (set when recorded, replaced when refined)."""
    facts = occurrence_facts(diagnosis)
    return {
        "class_id": diagnosis.primary.class_id,
        "node_id": node.id if node else None,
        "confidence": facts.confidence,
        "evidence_excerpt": facts.evidence_excerpt,
        "ranks": list(facts.ranks),
        "world_size": facts.world_size,
        "timeout_ms": facts.timeout_ms,
        "since_progress_ms": facts.since_progress_ms,
        "gpu_hours_lost": facts.gpu_hours_lost,
        "document": diagnosis_document(diagnosis),
        "analysis_version": diagnosis.analysis_version,
    }
