"""Renderers that turn diagnoses and runbooks into terminal text (and, later, chat messages)."""
