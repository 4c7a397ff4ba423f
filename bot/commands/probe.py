"""Placeholder: the owning issue fills this in."""
