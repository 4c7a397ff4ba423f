"""The weekly digest's scheduler (the project's only APScheduler user) and its plug into the server.
What a digest holds and how it is posted once per channel and week is bot.services.digest."""
