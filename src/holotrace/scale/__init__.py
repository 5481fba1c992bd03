"""Scale out: a job as a map over ranks (on the local pool or Ray) and a reduce over small per-rank summaries."""

from holotrace.scale.run import JobSummary, ingest, read_ingest, summarize

__all__ = ["JobSummary", "summarize", "ingest", "read_ingest"]
