"""The node agent: discovers GPUs, applies MIG layouts, runs MPS, supervises online and offline
workloads with their limits, applies the co-location policy's SM share, serves an API and
Prometheus metrics.

Everything with side effects sits behind the small Protocols in :mod:`cotenant.agent.backends`
(real: NVML, ``nvidia-cuda-mps-control``, ``subprocess``; fake: one stateful in-memory node). The
managers reconcile on ``tick(now)`` calls; there are no threads in the core.
"""
