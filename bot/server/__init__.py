"""`ncclbot serve`: the HTTP server and the background services of every front end, wired together.

This package is the composition root: it is the one place that knows all front ends (Slack, webhook,
digest, operations endpoints). Each of them offers a `plug(context)` function that adds its HTTP routes
(a Flask blueprint) and background services to a `ServerContext`; the front ends never import each other.
"""
