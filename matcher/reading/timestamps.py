"""Log timestamps -> epoch seconds (UTC), never raising.

Log clocks are host-local and most formats carry no zone, so every wall time is read as if it were UTC:
consistent within one host, approximately comparable across hosts (which is all the analysis asks).
Formats without a year (c10/glog `E1129 03:11:40.6`, syslog `Nov 29 03:11:40`) take the reference
year (the caller's, else the current UTC year) and fall back one year when that would put the line
more than a day in the future (a January diagnosis of a December log).
"""

from __future__ import annotations

import calendar
import re
import time

MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1
    )
}
_DAY = 86_400.0


def epoch(
    year: int, month: int, day: int, hour: int, minute: int, second: int, fraction: str = ""
) -> float | None:
    """Epoch seconds for a wall-clock time read as UTC; None when the fields are not a real time."""
    if not (1 <= year <= 9999 and 1 <= month <= 12 and 0 <= hour < 24 and 0 <= minute < 60):
        return None
    if not (0 <= second <= 60 and 1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    try:
        seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    return seconds + (float("0." + fraction) if fraction.isdigit() else 0.0)


def epoch_without_year(
    month: int,
    day: int,
    hour: int,
    minute: int,
    second: int,
    fraction: str = "",
    year: int | None = None,
) -> float | None:
    """As `epoch`, for formats that omit the year (see the module note on the year rule)."""
    if year is not None:
        return epoch(year, month, day, hour, minute, second, fraction)
    now = time.time()
    this_year = time.gmtime(now).tm_year
    value = epoch(this_year, month, day, hour, minute, second, fraction)
    if value is None or value > now + _DAY:
        earlier = epoch(this_year - 1, month, day, hour, minute, second, fraction)
        return earlier if earlier is not None else value
    return value


def month_number(name: str) -> int | None:
    return MONTHS.get(name[:3].lower())


_DATED = re.compile(rb"(?<!\d)((?:19|20)\d\d)-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[T _]\d\d:\d\d")


def year_hint(head: bytes) -> int | None:
    """The year of the first full date-time in `head` (ISO, torch._logging, ChildFailedError forms)."""
    match = _DATED.search(head)
    return int(match.group(1)) if match else None
