"""Checks that stay out of the handlers.

- Signatures: bolt's own `RequestVerification` middleware (one class, one `process()`, the 401 built
  there; `X-Slack-Request-Timestamp` more than 5 minutes off is refused) stays on in `App`.
- `refuse_replays`: what Slack's scheme leaves open, the same signed request sent again within those 5
  minutes (a replayed button press, command or form), is refused with 401 too (an event sent again is
  dropped with 200, as its event id would be). Each accepted signature is
  remembered in the database (replicas share it) for longer than the window.
- `unavailable`: what Slack gets while the database is down (nothing can be committed, so nothing is
  taken): a slash command an ephemeral "try again in a minute", a button press the same as an ephemeral
  message, an event or form 503 (Slack delivers events again later; a form stays open to submit again).
- `drop_repeated_events`: the Events API retries a delivery it thinks failed (and a slow first attempt
  gets retried while still running); an event id seen before is acknowledged and dropped. Kept in the
  database, so replicas share it.
- `AdminPolicy` + `admin_only`: Probe, Drain and Resolve (and `/nccl probe`) only for the configured
  user ids and members of the configured user groups; others get an ephemeral refusal.
- `audited`: every action written to the store's audit table: who, what, when, outcome.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from slack_bolt import BoltResponse
from slack_bolt.request import BoltRequest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import SQLAlchemyError

from bot.store.engine import StoreError

log = logging.getLogger("ncclbot.slack.middleware")

GROUP_CACHE_S = 300.0
GROUP_RETRY_S = 5.0  # after a failed user-group lookup
REFUSAL = "Only the bot's admins may do that (ask one, or see NCCLBOT_ADMIN_USERS / NCCLBOT_ADMIN_GROUPS)."
UNAVAILABLE = (
    "ncclbot cannot take requests right now: its database is unavailable. Nothing was started; "
    "try again in a minute."
)
# Errors that mean the database is unreachable or refused the write.
DATABASE_DOWN: tuple[type[Exception], ...] = (SQLAlchemyError, StoreError)


def refuse_replays(store: Any, client: WebClient) -> Callable[..., BoltResponse | None]:
    """Global middleware, right after bolt's signature check: a signed request seen before is refused
    with 401. Slack's own retries of an event are signed anew (and dropped by event id further on)."""

    def middleware(request: BoltRequest, next: Callable[[], None]) -> BoltResponse | None:
        if request.mode == "socket_mode":  # no signatures: the connection itself is authenticated
            next()
            return None
        timestamp = request.headers.get("x-slack-request-timestamp", ["0"])[0]
        signature = request.headers.get("x-slack-signature", [""])[0]
        key = "slack-request:" + hashlib.sha256(f"{timestamp}:{signature}".encode()).hexdigest()
        try:
            first = store.mark_processed(key)  # remembered two days, far beyond Slack's 5 minutes
        except DATABASE_DOWN as error:
            log.warning("database unavailable, Slack request not taken: %s", type(error).__name__)
            return unavailable(request.body, client)
        if not first:
            if request.body.get("type") == "event_callback":
                # An event delivered twice is dropped, not refused: Slack's own immediate retry of an
                # event may come with the same signature, and a refusal would make it retry again.
                log.info("dropping an event delivered again with the same signature")
                return BoltResponse(status=200, body="")
            log.warning("refused a replayed Slack request (its signature was accepted before)")
            return BoltResponse(status=401, body={"error": "replayed request"})
        next()
        return None

    return middleware


def unavailable(body: dict[str, Any], client: WebClient) -> BoltResponse:
    """The answer to a request that cannot be committed (see the module's notes)."""
    if body.get("command"):
        return BoltResponse(status=200, body={"response_type": "ephemeral", "text": UNAVAILABLE})
    if body.get("type") in ("block_actions", "message_action", "shortcut"):
        channel, user = channel_of(body), actor_of(body)
        if channel and user:
            try:
                client.chat_postEphemeral(channel=channel, user=user, text=UNAVAILABLE)
            except SlackApiError as error:
                log.warning("cannot tell %s: %s", user, error.response.get("error"))
        return BoltResponse(status=200, body="")
    return BoltResponse(status=503, body={"error": "database unavailable"})


def drop_repeated_events(
    store: Any, client: WebClient, *, queued: Callable[[dict[str, Any]], bool]
) -> Callable[..., BoltResponse | None]:
    """Global middleware: an Events API delivery whose event id was processed before ends here.
    Events for which `queued(event)` holds are left to the queue, whose keys are the event ids (marking
    them here first could lose one: marked, then the database fails before it is committed)."""

    def middleware(body: dict[str, Any], next: Callable[[], None], request: Any) -> BoltResponse | None:
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if event_id and queued(body.get("event") or {}):
            next()
            return None
        try:
            fresh = not event_id or store.mark_processed(f"event:{event_id}")
        except DATABASE_DOWN as error:
            log.warning("database unavailable, event not taken: %s", type(error).__name__)
            return unavailable(body, client)
        if not fresh:
            retry = request.headers.get("x-slack-retry-num", ["0"])[0]
            log.info("dropping repeated event %s (retry %s)", event_id, retry)
            return BoltResponse(status=200, body="")
        next()
        return None

    return middleware


def actor_of(body: dict[str, Any]) -> str | None:
    """The Slack user behind a command, action, shortcut or view submission."""
    user = body.get("user")
    if isinstance(user, dict):
        user = user.get("id")
    found = body.get("user_id") or user
    return str(found) if found else None


def channel_of(body: dict[str, Any]) -> str | None:
    """The channel a command, action, shortcut or event came from, whatever shape the payload has."""
    channel = body.get("channel")
    if isinstance(channel, dict):
        channel = channel.get("id")
    container = body.get("container")
    if not channel and isinstance(container, dict):
        channel = container.get("channel_id")
    channel = channel or body.get("channel_id")
    return str(channel) if channel else None


def action_value(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON value of the pressed button (bot.render.slack_blocks.button)."""
    try:
        value = json.loads((body.get("actions") or [{}])[0].get("value") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class AdminPolicy:
    """Who counts as an admin: listed user ids, or members of listed user groups (usergroups.users.list,
    cached for `cache_s`). A lookup that fails is not cached: until one succeeds, the members last
    seen stay in force and the lookup is tried again after `retry_s` (an empty answer cached for minutes
    would refuse every group admin that long after one slow or failed call)."""

    def __init__(
        self,
        client: WebClient,
        users: Iterable[str],
        groups: Iterable[str],
        *,
        cache_s: float = GROUP_CACHE_S,
        retry_s: float = GROUP_RETRY_S,
    ) -> None:
        self.client = client
        self.users = frozenset(users)
        self.groups = tuple(groups)
        self.cache_s = cache_s
        self.retry_s = retry_s
        self._members: frozenset[str] = frozenset()
        self._next_lookup = float("-inf")
        self._lock = threading.Lock()

    def allows(self, user: str | None) -> bool:
        if not user:
            return False
        return user in self.users or user in self._group_members()

    def _group_members(self) -> frozenset[str]:
        if not self.groups:
            return frozenset()
        with self._lock:
            if time.monotonic() < self._next_lookup:
                return self._members
            members: set[str] = set()
            for group in self.groups:
                try:
                    members |= set(self.client.usergroups_users_list(usergroup=group).get("users") or [])
                except Exception as error:  # Slack down or slow: keep what was known, ask again soon
                    reason = error.response.get("error") if isinstance(error, SlackApiError) else error
                    log.warning("cannot list user group %s: %s", group, reason)
                    self._next_lookup = time.monotonic() + self.retry_s
                    return self._members
            self._members, self._next_lookup = frozenset(members), time.monotonic() + self.cache_s
            return self._members


def admin_only(
    policy: AdminPolicy, store: Any, what: Callable[[dict[str, Any]], str | None]
) -> Callable[..., BoltResponse | None]:
    """Listener middleware: `what(body)` names the privileged action in this request (None: nothing
    privileged, let it through). A refusal is audited and answered ephemerally."""

    def middleware(body: dict[str, Any], client: WebClient, next: Callable[[], None]) -> BoltResponse | None:
        action = what(body)
        user = actor_of(body)
        if action is None or policy.allows(user):
            next()
            return None
        record(store, user, action, body, "refused: not an admin")
        if body.get("command"):  # a slash command's refusal is its (ephemeral) response
            return BoltResponse(status=200, body={"response_type": "ephemeral", "text": REFUSAL})
        channel = channel_of(body)
        if channel and user:
            try:
                client.chat_postEphemeral(channel=channel, user=user, text=REFUSAL)
            except SlackApiError as error:
                log.warning("cannot post the refusal: %s", error.response.get("error"))
        return BoltResponse(status=200, body="")

    return middleware


def record(store: Any, user: str | None, action: str, body: dict[str, Any], outcome: str) -> None:
    incident = action_value(body).get("incident") if body.get("actions") else None
    try:
        store.audit(
            user or "unknown",
            action,
            incident_id=incident if isinstance(incident, int) else None,
            detail={
                "outcome": outcome[:500],
                "channel": channel_of(body),
            },
        )
    except Exception:  # the audit must not block the action it describes
        log.exception("audit record failed")


def audited(
    store: Any, what: str | Callable[[dict[str, Any]], str]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for listeners taking `body`: the listener's return value (a short outcome, None = "ok")
    or its exception goes to the audit table with who and what."""

    def decorate(listener: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(listener)
        def wrapper(**kwargs: Any) -> Any:
            body = kwargs["body"]
            name = what if isinstance(what, str) else what(body)
            try:
                outcome = listener(**kwargs)
            except Exception as error:
                record(store, actor_of(body), name, body, f"error: {type(error).__name__}: {error}")
                raise
            record(store, actor_of(body), name, body, str(outcome or "ok"))
            return None

        return wrapper

    return decorate
