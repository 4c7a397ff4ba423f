"""The Slack front end, part by part, against the fake Slack Web API (real HTTP, in this process)."""
