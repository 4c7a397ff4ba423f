"""Bolt listeners, one module per Slack surface; each has `register(app, deps)`."""
