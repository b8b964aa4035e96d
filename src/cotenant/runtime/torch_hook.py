"""Where the runtime meets PyTorch: a dispatch mode on the BE side, module hooks on the HP side.

**BE: a ``TorchDispatchMode``** entered on the thread that imported torch (the training
loop's). Every ATen operator passes through it on its way to a kernel - those of the backward
pass too, which the autograd engine runs with the forward thread's modes - so BE waits between
any two kernel launches, not only between modules. Module hooks would miss the backward pass
(two thirds of a training step) and a ``TorchFunctionMode`` sees only Python-level calls, not
the backward's operators. It costs a Python call per operator (docs/priority-runtime.md has
the measured figures); a forked child (a DataLoader worker) is never gated (it launches no
kernels of the training step).

**HP: global module forward hooks** (``register_module_forward_pre_hook`` and
``register_module_forward_hook``), which fire in every thread - a server's worker pool too,
where a mode (thread-local) would miss them - at each module's start and end: each renews
the HP lease, so HP counts as busy from a request's first module until ``lease_s`` after its
last. Cheap: a few module calls per layer, not a call per operator.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def install_be(check: Callable[[], object]) -> Any:
    """Enter a dispatch mode that calls ``check`` before each operator of this process; the
    mode (exit it to stop)."""
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415 - lazy, optional

    pid = os.getpid()

    class Gated(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            if os.getpid() == pid:
                check()
            return func(*args, **(kwargs or {}))

    mode = Gated()
    mode.__enter__()
    return mode


def install_hp(touch: Callable[[], None]) -> tuple[Any, Any]:
    """Call ``touch`` at the start and end of every module's forward, in every thread; the
    two hook handles (``remove()`` them to stop)."""
    from torch.nn.modules import module  # noqa: PLC0415 - lazy, optional

    def before(*_: Any) -> None:  # (module, args): inputs unchanged
        touch()

    def after(*_: Any) -> None:  # (module, args, output): output unchanged
        touch()

    return (module.register_module_forward_pre_hook(before),
            module.register_module_forward_hook(after))
