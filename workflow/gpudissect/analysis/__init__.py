"""Estimators that turn latency traces into hierarchy parameters (ruptures-style)."""
