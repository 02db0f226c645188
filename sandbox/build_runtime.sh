#!/usr/bin/env bash
# Build a runtime's packages (sandbox/runtimes/NAME.txt), each step cached:
#   1. a wheelhouse from PyPI        .cache/runtimes/NAME-wheels   (the only step that needs a registry)
#   2. the directory bwrap binds     .cache/runtimes/NAME          (pip --no-index from the wheelhouse)
#   3. with DOCKER=1, the image      verireward-sandbox:NAME       (sandbox/Dockerfile.sci, air-gapped:
#                                    the wheelhouse is the build context, pip --no-index inside)
#   NAME            runtime name (default sci)
#   PYTHON          interpreter whose X.Y the wheels are for (default: the one running the server)
#   BASE_IMAGE      image the variant builds on (default verireward-sandbox:latest)
#   SANDBOX_IMAGE   tag of the variant (default verireward-sandbox:NAME)
#   FORCE=1         rebuild every step
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${1:-sci}
REQ=sandbox/runtimes/$NAME.txt
[ -f "$REQ" ] || { echo "no runtime $NAME ($REQ missing)" >&2; exit 2; }
CACHE=${VERIREWARD_RUNTIME_CACHE:-.cache/runtimes}
PYTHON=${PYTHON:-python3}
WHEELS=$CACHE/$NAME-wheels
SITE=$CACHE/$NAME
BASE_IMAGE=${BASE_IMAGE:-verireward-sandbox:latest}
SANDBOX_IMAGE=${SANDBOX_IMAGE:-verireward-sandbox:$NAME}
pyver=$("$PYTHON" -c 'import sys; print("%d%d" % sys.version_info[:2])')
stamp="$(sha256sum "$REQ" | cut -c1-16)-cp$pyver"
t0=$(date +%s)

if [ "${FORCE:-0}" = 1 ] || [ "$(cat "$WHEELS/.complete" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$WHEELS" && mkdir -p "$WHEELS"
  "$PYTHON" -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version "$pyver" \
    --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$WHEELS" -r "$REQ"
  cp "$REQ" "$WHEELS/requirements.txt"
  echo "$stamp" > "$WHEELS/.complete"
fi
echo "wheelhouse: $(ls "$WHEELS"/*.whl | wc -l) wheels, $(du -sh "$WHEELS" | cut -f1)"

if [ "${FORCE:-0}" = 1 ] || [ "$(cat "$SITE/.complete" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$SITE"
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-index --find-links "$WHEELS" --target "$SITE" -r "$REQ"
  "$PYTHON" -m compileall -q "$SITE" >/dev/null || true  # read-only in the sandbox: bytecode made here
  echo "$stamp" > "$SITE/.complete"
fi
echo "bwrap runtime: $SITE, $(du -sh "$SITE" | cut -f1)"

if [ "${DOCKER:-0}" = 1 ]; then
  if [ "${FORCE:-0}" = 1 ] || [ "$(docker image inspect -f '{{index .Config.Labels "verireward.runtime"}}' "$SANDBOX_IMAGE" 2>/dev/null)" != "$stamp" ]; then
    docker build -q -f sandbox/Dockerfile.sci --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg STAMP="$stamp" \
      -t "$SANDBOX_IMAGE" "$WHEELS" >/dev/null
  fi
  echo "docker runtime: $SANDBOX_IMAGE on $BASE_IMAGE"
fi
echo "runtime $NAME ready in $(( $(date +%s) - t0 )) s"
