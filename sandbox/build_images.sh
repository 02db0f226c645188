#!/usr/bin/env bash
# Build the images without any container registry.
#   BASE_IMAGE   base with python3 (default: verireward-base:bookworm, made here by debootstrap;
#                set it to e.g. python:3.11-slim where a registry is reachable)
#   SANDBOX_IMAGE / SERVER_IMAGE   tags of the images built (defaults below)
#   WITH_SERVER=1   also build the server image, from a wheelhouse built here in .cache/wheelhouse
#                   (see reward_server/Dockerfile); compose.yaml and tests/deploy need it
#   PYTHON          host interpreter that builds the wheelhouse (its X.Y must match the base's)
#   RUNTIMES="sci"  also build these runtimes (sandbox/build_runtime.sh: the bwrap site directory and
#                   the image variant on $SANDBOX_IMAGE), each cached in .cache/runtimes
#   TOOLCHAINS=1    also build the toolchain variant (sandbox/Dockerfile.toolchains: g++, OpenJDK 17,
#                   Go, Rust, node, TypeScript from npm: sandbox/fetch_typescript.sh), on TOOLCHAIN_BASE (default verireward-base-toolchains:bookworm,
#                   made here by debootstrap with those Debian packages), tagged TOOLCHAIN_IMAGE
set -euo pipefail
cd "$(dirname "$0")/.."
BASE_IMAGE=${BASE_IMAGE:-verireward-base:bookworm}
SANDBOX_IMAGE=${SANDBOX_IMAGE:-verireward-sandbox:latest}
SERVER_IMAGE=${SERVER_IMAGE:-verireward-server:latest}

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  if [ "$BASE_IMAGE" = "verireward-base:bookworm" ]; then
    command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
    root=$(mktemp -d /tmp/verireward-rootfs.XXXXXX)
    echo "building $BASE_IMAGE with debootstrap in $root"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" >/tmp/debootstrap.log 2>&1 \
      || { tail -20 /tmp/debootstrap.log; exit 1; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$BASE_IMAGE"
    rm -rf "$root"
  else
    docker pull "$BASE_IMAGE"
  fi
fi

docker build -q -f sandbox/Dockerfile --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$SANDBOX_IMAGE" .
echo "built $SANDBOX_IMAGE on $BASE_IMAGE"

for rt in ${RUNTIMES:-}; do
  DOCKER=1 BASE_IMAGE="$SANDBOX_IMAGE" SANDBOX_IMAGE="${SANDBOX_IMAGE%%:*}:$rt" bash sandbox/build_runtime.sh "$rt" \
    2>&1 | grep -v "^WARNING: Location"
done

if [ "${TOOLCHAINS:-0}" = "1" ]; then
  TOOLCHAIN_BASE=${TOOLCHAIN_BASE:-verireward-base-toolchains:bookworm}
  TOOLCHAIN_IMAGE=${TOOLCHAIN_IMAGE:-verireward-sandbox:toolchains}
  # the Debian packages the languages of sandbox/runner/languages/table.py need (.ci/run installs
  # the same ones on the host for the bwrap sandbox)
  TOOLCHAIN_PACKAGES=${TOOLCHAIN_PACKAGES:-g++,openjdk-17-jdk-headless,golang-go,rustc,nodejs}
  if ! docker image inspect "$TOOLCHAIN_BASE" >/dev/null 2>&1; then
    if [ "$TOOLCHAIN_BASE" = "verireward-base-toolchains:bookworm" ]; then
      command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
      root=$(mktemp -d /tmp/verireward-rootfs.XXXXXX)
      echo "building $TOOLCHAIN_BASE with debootstrap in $root"
      debootstrap --variant=minbase --include="python3,ca-certificates,$TOOLCHAIN_PACKAGES" bookworm "$root" \
        >/tmp/debootstrap-toolchains.log 2>&1 || { tail -20 /tmp/debootstrap-toolchains.log; exit 1; }
      rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/*
      tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$TOOLCHAIN_BASE"
      rm -rf "$root"
    else
      docker pull "$TOOLCHAIN_BASE"
    fi
  fi
  bash sandbox/fetch_typescript.sh  # TypeScript's compiler (npm), copied into the image
  docker build -q -f sandbox/Dockerfile.toolchains --build-arg BASE_IMAGE="$TOOLCHAIN_BASE" -t "$TOOLCHAIN_IMAGE" .
  echo "built $TOOLCHAIN_IMAGE on $TOOLCHAIN_BASE"
fi

if [ "${WITH_SERVER:-0}" = "1" ]; then
  # The server image installs from a wheelhouse built here (no registry inside the build):
  # the project and its base dependencies only, not the `train` extra (torch & co).
  # Binary wheels (pydantic-core, PyYAML) are per Python version, so the host interpreter
  # must match the base image's; set PYTHON=python3.X to pick another one.
  PYTHON=${PYTHON:-python3}
  base_py=$(docker run --rm --network none --entrypoint python3 "$BASE_IMAGE" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  host_py=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "$base_py" != "$host_py" ]; then
    echo "error: $BASE_IMAGE has Python $base_py but $PYTHON is $host_py; rerun with PYTHON=python$base_py" >&2
    exit 1
  fi
  rm -rf .cache/wheelhouse && mkdir -p .cache/wheelhouse
  "$PYTHON" -m pip wheel -q --disable-pip-version-check -w .cache/wheelhouse . >/tmp/verireward-wheelhouse.log 2>&1 \
    || { tail -30 /tmp/verireward-wheelhouse.log; exit 1; }
  echo "wheelhouse: $(ls .cache/wheelhouse | wc -l) wheels, $(du -sh .cache/wheelhouse | cut -f1)"
  docker build -q -f reward_server/Dockerfile --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$SERVER_IMAGE" .
  echo "built $SERVER_IMAGE on $BASE_IMAGE"
fi
