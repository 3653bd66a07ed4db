#!/usr/bin/env bash
# Installs the wheel WHEEL into a fresh venv with only boto3 and pytest beside it, and runs
# this folder's tests there: the packaged binary, `sqsim.Server` and the pytest plugin, as a
# user's project would get them. Usage: run.sh WHEEL [PYTHON]
set -euo pipefail
wheel=$(realpath "$1")
python=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$wheel" -r "$here/requirements.txt"
cp "$here"/test_*.py "$work/"
# From the temp dir, not the repo: nothing of the source tree is importable, only the wheel.
cd "$work"
env -u SQSIM_BIN -u SQSIM_BINARY_PATH "$work/venv/bin/python" -m pytest -q -p no:cacheprovider .
