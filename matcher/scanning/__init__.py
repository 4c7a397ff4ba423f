"""Scanning: the signature catalog (data in matcher/signatures/) and the scanner that turns lines into
observations."""
