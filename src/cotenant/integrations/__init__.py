"""Integrations of cotenant's policies with cluster managers (Kubernetes).

This layer sits between the CLI and the agent/simulator: it may import the agent, the
simulator, traces, policies, perf and model; nothing below it imports it.
"""
