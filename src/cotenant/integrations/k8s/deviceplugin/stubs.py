"""The device plugin's gRPC stubs, generated from ``deviceplugin_v1beta1.proto`` on first use.

``grpc_tools.protoc`` writes ``deviceplugin_v1beta1_pb2.py`` and ``..._pb2_grpc.py`` into a
cache directory keyed by the proto's hash and the generator's version
(``$COTENANT_CACHE`` or ``~/.cache/cotenant``, the temporary directory where that cannot be
created), atomically; later imports reuse them. Nothing
generated is committed, and nothing is edited by hand.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType

from cotenant.errors import CotenantError

PROTO = Path(__file__).with_name("deviceplugin_v1beta1.proto")
STEM = PROTO.stem
VERSION = "v1beta1"


def cache_root() -> Path:
    env = os.environ.get("COTENANT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "cotenant"


def _generate(out: Path) -> None:
    from grpc_tools import protoc  # noqa: PLC0415 (only when stubs are missing)

    tmp = Path(tempfile.mkdtemp(prefix=".gen-", dir=out.parent))
    args = ["protoc", f"-I{PROTO.parent}", f"--python_out={tmp}", f"--grpc_python_out={tmp}",
            str(PROTO)]
    if protoc.main(args) != 0:
        raise CotenantError(f"grpc_tools.protoc could not compile {PROTO}")
    tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache (an image's) from other users
    try:
        tmp.rename(out)
    except OSError:  # another process generated them first
        if not (out / f"{STEM}_pb2_grpc.py").exists():
            raise


@cache
def load() -> tuple[ModuleType, ModuleType]:
    """``(pb2, pb2_grpc)``: the messages and the service stubs/servicers."""
    try:
        import grpc_tools  # noqa: PLC0415
    except ImportError:
        raise CotenantError("the device plugin needs grpcio-tools",
                            hint="pip install 'cotenant[k8s]'") from None
    version = getattr(grpc_tools, "__version__", "")
    digest = hashlib.sha256(PROTO.read_bytes() + version.encode()).hexdigest()[:16]
    out = cache_root() / "deviceplugin" / digest
    if not (out / f"{STEM}_pb2_grpc.py").exists():
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
        except OSError:  # a read-only home (a container): the system's temporary directory
            out = Path(tempfile.gettempdir()) / f"cotenant-{os.getuid()}" / "deviceplugin" / digest
            out.parent.mkdir(parents=True, exist_ok=True)
        if not (out / f"{STEM}_pb2_grpc.py").exists():
            _generate(out)
    modules = []
    for name in (f"{STEM}_pb2", f"{STEM}_pb2_grpc"):  # _grpc imports _pb2 by this bare name
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, out / f"{name}.py")
            if spec is None or spec.loader is None:
                raise CotenantError(f"cannot import the generated {name} from {out}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        modules.append(sys.modules[name])
    return modules[0], modules[1]
