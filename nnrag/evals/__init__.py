"""Evaluations and benchmarks that print figures (never timed unit tests)."""
