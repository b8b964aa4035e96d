"""Trace-driven simulation: a small discrete-event core and the experiments built on it."""
