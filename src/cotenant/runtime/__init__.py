"""Priority time sharing in PyTorch, without changing the application: the cotenant runtime.

A high-priority (HP) inference process and a best-effort (BE) training process share a GPU.
The agent starts both with the runtime on (:mod:`.env`: an environment and a startup hook).
HP renews a lease on its GPU's shared-memory board (:mod:`.lease`) whenever a module runs;
BE waits before each operator while a lease is live (:mod:`.gate`), at most ``max_hold_s`` at
a time and never below its rate floor; a crashed HP process's lease runs out by itself. The
torch side is :mod:`.torch_hook`; :mod:`.hook` puts it in when the process imports torch.

This package imports only the standard library - nothing else of cotenant, no numpy - and
imports only relatively: a workload process loads it from the agent's files under a name of
its own (the startup hook), without the agent's ``site-packages`` on its path, and its
startup stays cheap.
"""

from .env import BOARD, HOOK_DIR, ROLE, runtime_env, settings_from_env
from .gate import Gate, GateSettings, GateStats
from .lease import Board, BoardError, HpLease

__all__ = [
    "BOARD",
    "HOOK_DIR",
    "ROLE",
    "Board",
    "BoardError",
    "Gate",
    "GateSettings",
    "GateStats",
    "HpLease",
    "runtime_env",
    "settings_from_env",
]
