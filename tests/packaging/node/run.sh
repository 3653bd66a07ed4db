#!/usr/bin/env bash
# Installs the two tarballs from .ci/packaging/npm/build.mjs (sqsim and @sqsim/<platform>) into a
# copy of this project in a fresh temp directory, as a user would, and runs its Jest tests.
#   tests/packaging/node/run.sh target/npm-test/*.tgz
# The temp directory is removed on success and kept (its path printed) on failure.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 sqsim-VERSION.tgz sqsim-PLATFORM-VERSION.tgz" >&2
  exit 2
fi
for t in "$@"; do
  [ -f "$t" ] || { echo "run.sh: no such tarball: $t" >&2; exit 2; }
done
tarballs=("$(realpath "$1")" "$(realpath "$2")")
here=$(cd "$(dirname "$0")" && pwd)
# The tests check the platform package's binary; an override would hide it.
unset SQSIM_BINARY_PATH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sqsim-npm-test.XXXXXX")
trap 'echo "run.sh: failed; left $tmp" >&2' ERR
cp "$here"/package.json "$here"/package-lock.json "$here"/*.test.cjs "$tmp"/
cp -r "$here"/fixtures "$tmp"/
cd "$tmp"

# --include: NODE_ENV=production or omit=optional in someone's npm config must not change the test.
npm_flags=(--no-audit --no-fund --prefer-offline --loglevel=error --include=dev --include=optional)
npm ci "${npm_flags[@]}"
# The other platforms' packages (@sqsim/darwin-arm64, …) are optional dependencies that only a
# registry could supply; npm must skip them, not fail.
npm install "${npm_flags[@]}" "${tarballs[@]}"
test -x "node_modules/@sqsim/$(node -p 'process.platform + "-" + process.arch')/bin/sqsim"

# `--no`: jest must come from the lockfile; `--`: the flags after it are jest's, not npx's.
npx --no -- jest --ci
cd /
rm -rf "$tmp"
