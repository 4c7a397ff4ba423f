"""Cross-rank analysis: observations (+ Flight Recorder findings) -> ranked classes, symptom, culprit.

OWNER: analysis helper. Interface:
`analyze(scan: ScanResult, fr: FRFinding | None) -> Diagnosis`.
"""
