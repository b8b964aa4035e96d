"""cotenant's startup hook: the agent puts this directory first on a workload's PYTHONPATH.

Python imports ``sitecustomize`` at startup; this one loads the cotenant runtime from the
files beside it, under a private name (``_cotenant_runtime``, so the workload needs no
cotenant install and sees no other package of the agent's), activates it from the
environment, then runs the ``sitecustomize`` it shadows, if the interpreter has one. It never
raises: a failure is one line on stderr and the application runs ungated.
"""

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAME = "_cotenant_runtime"


def _activate() -> None:
    if not os.environ.get("COTENANT_PRIORITY_ROLE"):
        return
    if sys.version_info < (3, 10):  # noqa: UP036 - this file runs in the workload's Python
        raise RuntimeError("the runtime needs Python 3.10 or later, this is "
                           f"{sys.version_info[0]}.{sys.version_info[1]}")
    package = os.path.dirname(_HERE)
    spec = importlib.util.spec_from_file_location(
        _NAME, os.path.join(package, "__init__.py"), submodule_search_locations=[package])
    if spec is None or spec.loader is None:
        raise ImportError(f"no cotenant runtime at {package}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    importlib.import_module(f"{_NAME}.hook").activate()


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows (the application's or a distribution's), as
    Python would have, and leave it as ``sys.modules["sitecustomize"]`` (the import system
    takes whatever that entry holds once this module has run), so ``import sitecustomize``
    in the application finds its own module, not this hook."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    own = sys.modules.get(__name__)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if own is not None:  # a module that failed to run is not left importable
            sys.modules["sitecustomize"] = own
        raise


try:
    _activate()
except Exception as _exc:
    sys.stderr.write(f"cotenant runtime: startup hook failed ({type(_exc).__name__}: "
                     f"{_exc}); this process runs ungated\n")
try:
    _chain()
except Exception as _exc:  # the runtime's state is as _activate left it
    sys.stderr.write(f"cotenant runtime: the sitecustomize this hook runs after it failed "
                     f"({type(_exc).__name__}: {_exc}); the runtime is not affected\n")
