"""The container image. ``scripts/build-image.sh`` says what is missing where nothing can
build. The built image (optional, marked ``image``): its commands answer, the device plugin's
stubs were generated at build time and load as the image's non-root user without writing
anything, and neither a compiler nor the build context is left in it.

Opt-in: build the image first (``scripts/build-image.sh``) and name it in
``COTENANT_IMAGE``; it runs with ``docker run`` where an engine answers, else with
``buildah run`` (``BUILDAH_STORAGE_DRIVER`` as for the build script). Skipped otherwise."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
SCRIPT = ROOT / "scripts" / "build-image.sh"
TOOLS = ("bash", "dirname", "git", "mktemp", "tar", "rm", "tail")
SETTINGS = ("BASE", "BUILDAH_ARGS", "BUILDAH_STORAGE_DRIVER", "CA_BUNDLE")
TRUST = "/etc/ssl/certs/ca-certificates.crt"

STUBS = ("import cotenant.integrations.k8s.deviceplugin.stubs as s; pb2, grpc = s.load(); "
         "print(pb2.__file__); print(grpc.__file__); "
         "print(sorted(pb2.DESCRIPTOR.services_by_name))")
Run = Callable[..., subprocess.CompletedProcess[str]]


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], check=False, capture_output=True).returncode == 0


def build_with(tmp_path: Path, fakes: dict[str, str],
               settings: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The build script with only the basic tools, and ``fakes`` (name -> script), on PATH,
    and only ``settings`` of the script's environment variables."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and this repository's history")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"the build script needs {tool}, which is not on PATH")
        (bin_dir / tool).symlink_to(found)
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    return subprocess.run(["bash", str(SCRIPT)], check=False, capture_output=True, text=True,
                          timeout=120, env={**env, **(settings or {}), "PATH": str(bin_dir)})


def buildah_calls(tmp_path: Path, settings: dict[str, str]) -> list[list[str]]:
    """The arguments of each buildah call the build script makes (a fake buildah records
    them), with no docker on PATH."""
    log = tmp_path / "buildah.log"
    done = build_with(tmp_path, {"buildah": f'printf "%s\\n" "$@" -- >> "{log}"'}, settings)
    assert done.returncode == 0, done.stderr
    calls: list[list[str]] = []
    current: list[str] = []
    for line in log.read_text().splitlines():
        if line == "--":
            calls.append(current)
            current = []
        else:
            current.append(line)
    return calls


def test_the_build_script_says_what_is_missing(tmp_path: Path) -> None:
    done = build_with(tmp_path, {})
    assert done.returncode == 1
    assert "cannot build: no docker CLI on PATH; and no buildah on PATH." in done.stderr


def test_a_docker_cli_without_an_engine_is_named(tmp_path: Path) -> None:
    engine_down = ("echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.'"
                   " >&2; exit 1")
    done = build_with(tmp_path, {"docker": engine_down})
    assert done.returncode == 1
    assert ("the docker CLI is installed but no engine answers: Cannot connect to the Docker "
            "daemon at unix:///var/run/docker.sock.") in done.stderr


def test_buildah_gets_no_empty_arguments_where_nothing_is_set(tmp_path: Path) -> None:
    bud, images = buildah_calls(tmp_path, {})
    context = bud[-1]  # the script's temporary copy of HEAD
    assert bud == ["bud", "--isolation", "chroot", "-f", f"{context}/deploy/Dockerfile",
                   "-t", "cotenant:latest", context]
    assert images == ["images", "cotenant:latest"]


def test_a_ca_bundle_reaches_the_trust_store_and_pip(tmp_path: Path) -> None:
    bundle = tmp_path / "proxy-ca.pem"
    bud, images = buildah_calls(tmp_path, {"CA_BUNDLE": str(bundle), "BASE": "debian:x",
                                           "BUILDAH_STORAGE_DRIVER": "vfs"})
    context = bud[-1]
    assert bud == ["--storage-driver", "vfs", "bud", "--isolation", "chroot",
                   "-v", f"{bundle}:{TRUST}:ro",
                   "--build-arg", "BASE=debian:x", "--build-arg", f"PIP_CERT={TRUST}",
                   "-f", f"{context}/deploy/Dockerfile", "-t", "cotenant:latest", context]
    assert images == ["--storage-driver", "vfs", "images", "cotenant:latest"]


def test_arrays_expand_safely_on_old_bash() -> None:
    """Under ``set -u``, bash before 4.4 (macOS's 3.2) calls an empty ``"${a[@]}"`` unbound;
    every array expansion in the script is guarded as ``${a[@]+"${a[@]}"}``."""
    text = SCRIPT.read_text()
    expansions = re.findall(r'"\$\{(\w+)\[@\]\}"', text)
    assert expansions
    for name in expansions:
        assert text.count(f'"${{{name}[@]}}"') == text.count(f'${{{name}[@]+"${{{name}[@]}}"}}')


@pytest.fixture(scope="module")
def run_in_image() -> Iterator[Run]:
    image = os.environ.get("COTENANT_IMAGE", "")
    if not image:
        pytest.skip("set COTENANT_IMAGE to an image built by scripts/build-image.sh")
    if _docker_answers():
        def docker(*argv: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["docker", "run", "--rm", image, *argv], check=False,
                                  capture_output=True, text=True, timeout=120)
        yield docker
        return
    if shutil.which("buildah") is None:
        pytest.skip("neither a Docker engine nor buildah is here to run the image")
    driver = os.environ.get("BUILDAH_STORAGE_DRIVER", "")
    buildah = ["buildah", *(["--storage-driver", driver] if driver else [])]
    made = subprocess.run([*buildah, "from", image], check=False, capture_output=True,
                          text=True)
    assert made.returncode == 0, made.stderr
    container = made.stdout.strip().splitlines()[-1]

    def chroot(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*buildah, "run", "--isolation", "chroot", container, "--", *argv],
                              check=False, capture_output=True, text=True, timeout=120)
    try:
        yield chroot
    finally:
        subprocess.run([*buildah, "rm", container], check=False, capture_output=True)


@pytest.mark.image
@pytest.mark.parametrize("command", [["cotenant", "--help"],
                                     ["cotenant", "k8s", "extender", "--help"],
                                     ["cotenant", "k8s", "device-plugin", "--help"]])
def test_the_commands_answer(run_in_image: Run, command: list[str]) -> None:
    done = run_in_image(*command)
    assert done.returncode == 0, done.stderr
    assert "Usage: cotenant" in done.stdout


@pytest.mark.image
def test_it_runs_as_a_non_root_user(run_in_image: Run) -> None:
    done = run_in_image("id", "-u")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "10001"


@pytest.mark.image
def test_the_stubs_were_generated_at_build_time(run_in_image: Run) -> None:
    done = run_in_image("python3", "-c", STUBS)
    assert done.returncode == 0, done.stderr
    pb2, grpc_file, services = done.stdout.strip().splitlines()
    cache = "/opt/cotenant/cache/deviceplugin/"  # the image's COTENANT_CACHE, not generated now
    assert pb2.startswith(cache)
    assert grpc_file.startswith(cache)
    assert services == "['DevicePlugin', 'Registration']"


@pytest.mark.image
def test_the_build_stage_ca_setting_is_not_in_the_image(run_in_image: Run) -> None:
    done = run_in_image("sh", "-c", 'echo "${PIP_CERT-unset}"')
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "unset"


@pytest.mark.image
def test_no_compiler_and_no_build_context_are_left(run_in_image: Run) -> None:
    done = run_in_image("sh", "-c", "command -v gcc cc make; ls -d /src 2>/dev/null; true")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
