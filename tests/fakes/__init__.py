"""Fakes of outside services that the tests run for real over loopback (a fake Slack Web API, ...)."""
