"""Addresses that name no machine: loopback, the unspecified address, an unset MASTER_ADDR, and the
stand-ins users type when they mask an address before pasting. They are never culprit hosts and never
go into a suggested command (`ssh 127.0.0.1 ...` would inspect the engineer's own machine)."""

from __future__ import annotations

import ipaddress
import re

_PLACEHOLDER = re.compile(
    r"^(?:\(null\)|null|none|localhost(?:\.localdomain)?|ip6-localhost|0\.0\.0\.0|::|\*"
    r"|ip\d*|ip_?addr(?:ess)?\d*|(?:master|head|node|host|private|public)_(?:addr|ip)\d*"
    r"|x+(?:\.x+){0,3}|(?:x+\.){1,3}\d+|\d+(?:\.x+){1,3}|\*+(?:\.\*+){0,3}|(?:\d+\.){1,3}\*(?:\.\*)*"
    r"|[a-z0-9-]*-x{2,}|your_\w+|<[^>]*>|\.\.\.)$",
    re.IGNORECASE,
)


def is_placeholder_host(host: str) -> bool:
    """True for 127.0.0.0/8, ::1, localhost, 0.0.0.0, (null) and masked stand-ins (IP1, MASTER_ADDR,
    x.x.x.x, PRIVATE_IP, <ip>); False for a real name or routable-looking address."""
    name = host.strip().strip("[]").rstrip(".")
    if not name or _PLACEHOLDER.match(name):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
