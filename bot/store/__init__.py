"""The incident store: every diagnosis remembered, grouped into incidents and counted.

SQLite file by default (zero set-up), PostgreSQL in production; see `Store.open`.
"""

from bot.store.engine import StoreError
from bot.store.fingerprint import FINGERPRINT_VERSION, diagnosis_fingerprint, fingerprint, normalise_host
from bot.store.records import IncidentRecord, IncidentSummary, OccurrenceSummary, ProbeRunSummary
from bot.store.store import Store

__all__ = [
    "FINGERPRINT_VERSION",
    "IncidentRecord",
    "IncidentSummary",
    "OccurrenceSummary",
    "ProbeRunSummary",
    "Store",
    "StoreError",
    "diagnosis_fingerprint",
    "fingerprint",
    "normalise_host",
]
