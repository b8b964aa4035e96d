"""Sweeps: many independent runs of a simulator, declared once and spread by an executor.

:mod:`.executor` spreads ``fn(shared, item)`` over items (in this process, a local process
pool, or a Ray cluster through :mod:`cotenant.integrations.ray`); :mod:`.spec` reads a
sweep file (``kind: Sweep``: a simulator's base settings, a grid of settings, seeds);
:mod:`.simulators` turns one into runs of the co-location or placement simulator; and
:mod:`.run` runs it and streams each result as it finishes.
"""
