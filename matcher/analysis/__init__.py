"""Analysis: observations (+ a Flight Recorder finding) -> ranked classes, symptom, culprit, redacted
evidence."""
