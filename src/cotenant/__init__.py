"""cotenant: GPU sharing for deep-learning clusters.

Layers point one way (enforced by import-linter in the tests):
``cli -> report -> sim -> traces -> policies -> perf -> model``. ``model``, ``perf`` and
``policies`` are pure: they import no infrastructure and do no I/O.
"""

__version__ = "0.1.0"
