#!/usr/bin/env bash
# Build the container image the manifests in deploy/kubernetes run, from the committed files
# (git archive HEAD) and deploy/Dockerfile. Uses docker where an engine answers, otherwise
# buildah (daemonless); where neither can build, says what is missing and exits 1.
#
#   scripts/build-image.sh [TAG]          # TAG defaults to cotenant:latest
#
# Environment:
#   BASE          the base image (a Debian-based image with python3 >= 3.11 and venv);
#                 the Dockerfile's default is python:3.11-slim
#   BUILDAH_ARGS  arguments for buildah bud (default: --isolation chroot, which needs no
#                 user namespaces)
#   BUILDAH_STORAGE_DRIVER  buildah's storage driver, e.g. vfs where overlay cannot mount
#   CA_BUNDLE     buildah only: a CA bundle (a TLS-intercepting proxy) mounted over the build
#                 stage's trust store and handed to pip as PIP_CERT (pip before 24.2 reads
#                 certifi's bundle, not the system's); neither enters the final image
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-cotenant:latest}"
build_args=()
[ -n "${BASE:-}" ] && build_args+=(--build-arg "BASE=$BASE")

builder="" missing=""
if command -v docker >/dev/null 2>&1; then
    if answer="$(docker info --format '{{.ServerVersion}}' 2>&1)"; then
        builder=docker
    else
        missing="the docker CLI is installed but no engine answers: $(echo "$answer" | tail -n 1)"
    fi
else
    missing="no docker CLI on PATH"
fi
if [ -z "$builder" ]; then
    if ! command -v buildah >/dev/null 2>&1; then
        echo "build-image: cannot build: $missing; and no buildah on PATH." >&2
        echo "build-image: start a Docker engine, or install buildah (Debian: apt-get install" \
             "buildah)." >&2
        exit 1
    fi
    builder=buildah
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
git archive HEAD | tar -x -C "$context"
[ -n "$(git status --porcelain --untracked-files=no)" ] \
    && echo "build-image: uncommitted changes are not in the image (it builds HEAD)" >&2

if [ "$builder" = docker ]; then
    [ -n "${CA_BUNDLE:-}" ] && echo "build-image: CA_BUNDLE is for buildah builds; docker" \
        "ignores it (give the Docker engine the proxy's CA)" >&2
    # ${a[@]+"${a[@]}"}: an empty array under set -u fails on bash before 4.4 (macOS has 3.2)
    docker build -t "$tag" -f "$context/deploy/Dockerfile" ${build_args[@]+"${build_args[@]}"} \
        "$context"
    docker image ls "$tag"
else
    echo "build-image: $missing; building with buildah" >&2
    read -r -a extra <<< "${BUILDAH_ARGS:---isolation chroot}"
    globals=()
    [ -n "${BUILDAH_STORAGE_DRIVER:-}" ] && globals+=(--storage-driver "$BUILDAH_STORAGE_DRIVER")
    if [ -n "${CA_BUNDLE:-}" ]; then
        trust=/etc/ssl/certs/ca-certificates.crt
        extra+=(-v "$CA_BUNDLE:$trust:ro")
        build_args+=(--build-arg "PIP_CERT=$trust")
    fi
    buildah ${globals[@]+"${globals[@]}"} bud ${extra[@]+"${extra[@]}"} \
        ${build_args[@]+"${build_args[@]}"} -f "$context/deploy/Dockerfile" -t "$tag" "$context"
    buildah ${globals[@]+"${globals[@]}"} images "$tag"
fi
