"""Scanner: blocks -> candidate lines (multi-literal prefilter) -> signature regexes -> observations.

OWNER: signatures helper. Interface:
- `scan(sources: Iterable[Source], catalog: Catalog, limits: ReadLimits, progress: Callable[[int], None] | None)
   -> ScanResult` with `observations: list[Observation]`, `sources: list[SourceSummary]`, `stats: Stats`.
"""
