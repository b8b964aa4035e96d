"""Tests of cotenant.perf."""
