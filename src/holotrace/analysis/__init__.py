"""Analyses: pure functions of a loaded :class:`~holotrace.model.job.Job` returning pandas frames."""
