"""The Slack app end to end, the way bolt-python tests itself: a real `ncclbot serve` on loopback,
correctly (and wrongly) signed Slack requests sent over HTTP, and a fake Slack Web API
(tests/fakes/slack_api.py) that counts and records what the app posts back."""
