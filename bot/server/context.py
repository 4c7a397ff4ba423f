"""What a front end gets when it plugs into the server, and what it may add to it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from flask import Blueprint

from bot.services.outlet import Outlet
from bot.settings import Settings
from bot.store import Store

log = logging.getLogger("ncclbot.server")


class BackgroundService(Protocol):
    """Something that runs beside the HTTP server: queue workers, the Socket Mode client, the digest
    scheduler. `start` must return promptly (spawn threads); `stop` must end them within a few seconds."""

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


# A readiness check returns None when fine, else one line saying what is wrong.
ReadinessCheck = Callable[[], str | None]


@dataclass
class ServerContext:
    settings: Settings
    outlet: Outlet
    blueprints: list[Blueprint] = field(default_factory=list)
    background: list[BackgroundService] = field(default_factory=list)
    readiness: dict[str, ReadinessCheck] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)
    _store: Store | None = field(default=None, repr=False)
    _store_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def store(self) -> Store:
        """The one incident store of this process, opened (and migrated to the newest schema) on first
        use, so that every plug-in shares one connection pool."""
        with self._store_lock:
            if self._store is None:
                self._store = Store.open(self.settings.database_url)
            return self._store

    def add_blueprint(self, blueprint: Blueprint) -> None:
        self.blueprints.append(blueprint)

    def add_background(self, service: BackgroundService) -> None:
        self.background.append(service)

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self.readiness[name] = check

    def start_background(self) -> None:
        for service in self.background:
            log.info("starting %s", service.name)
            service.start()

    def stop_background(self) -> None:
        self.stopping.set()
        for service in reversed(self.background):
            try:
                service.stop()
            except Exception:  # one service failing to stop must not keep the others running
                log.exception("stopping %s failed", service.name)
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None
