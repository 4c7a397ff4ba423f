"""The job-failure webhook (`POST /webhooks/job-failed`): authentication (`auth.py`), the payload shapes
and their conversion to the generic event (`payloads.py`, `shapes.py`), the intake that commits events to
the durable queue before answering 202 (`intake.py`), the Flask blueprint (`routes.py`) and the server
plug-in (`plug.py`). Processing an accepted event is a use case: bot.services.job_failure."""
