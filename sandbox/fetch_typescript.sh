#!/usr/bin/env bash
# Fetch the TypeScript compiler for the `typescript` language (sandbox/runner/languages/tsc.js):
# the npm package, pinned, pure JavaScript (5.x; 7.x is the native port, without the JS API
# used here), into .cache/typescript (VERIREWARD_TYPESCRIPT_DIR to move it). Never committed;
# the toolchain image copies it at build (no network inside) and the bwrap host binds it
# read-only. Needs npm (Debian: apt-get install npm). Does nothing when that version is there.
set -euo pipefail
cd "$(dirname "$0")/.."
TYPESCRIPT_VERSION=${TYPESCRIPT_VERSION:-5.9.3}
dest=${VERIREWARD_TYPESCRIPT_DIR:-.cache/typescript}
pkg="$dest/node_modules/typescript/package.json"
if [ -f "$pkg" ] && grep -q "\"version\": \"$TYPESCRIPT_VERSION\"" "$pkg"; then
  exit 0
fi
command -v npm >/dev/null || { echo "error: npm not found (apt-get install npm)" >&2; exit 1; }
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$(dirname "$dest")/.typescript.XXXXXX")
npm install --silent --no-audit --no-fund --ignore-scripts --no-package-lock --prefix "$tmp" \
  "typescript@$TYPESCRIPT_VERSION" >/dev/null
chmod -R a+rX "$tmp"
rm -rf "$dest"
mv "$tmp" "$dest"
echo "typescript $TYPESCRIPT_VERSION in $dest ($(du -sh "$dest" | cut -f1))"
