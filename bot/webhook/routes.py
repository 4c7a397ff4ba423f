"""The Flask side of the webhook: one route, translating the request for the intake and back."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from bot.webhook.intake import JobFailedIntake

PATH = "/webhooks/job-failed"


def blueprint(intake: JobFailedIntake) -> Blueprint:
    routes = Blueprint("webhook", __name__)

    @routes.post(PATH)
    def job_failed() -> Response:
        reply = intake.accept(
            request.headers,
            request.content_length,
            lambda: request.get_data(cache=False),
            request.args,
        )
        response = jsonify(reply.body)
        response.status_code = reply.status
        response.headers.update(reply.headers)
        return response

    return routes
