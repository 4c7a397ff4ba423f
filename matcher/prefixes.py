"""Line attribution: peel launcher/log prefixes off one raw line -> `Line` (rank, host, pid, time, text).

OWNER: reader helper. Interface: `parse_line(raw: bytes, source: Source, lineno: int) -> Line`.
Called by the scanner only on candidate lines, so it may be thorough rather than fast.
"""
