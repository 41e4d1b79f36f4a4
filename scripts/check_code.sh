#!/usr/bin/env bash
# The linter and the type checker over the product packages, as pyproject.toml configures them
# (the files and the rules): ruff check, then mypy, one line each with its time, after what it
# found. PY is the Python that has both (requirements-dev.txt), .venv's by default. Exits 1 when
# either finds something.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PY:-.venv/bin/python}"

run() {
    local name=$1 status=0 started=${EPOCHREALTIME/./}
    shift
    "$@" || status=$?
    local ms=$(( (${EPOCHREALTIME/./} - started) / 1000 ))
    printf '%s: %s in %d.%01d s\n' "$name" "$([ "$status" = 0 ] && echo clean || echo "exit $status")" \
        $((ms / 1000)) $((ms % 1000 / 100))
    return "$status"
}

status=0
run ruff "$PY" -m ruff check --quiet || status=1
run mypy "$PY" -m mypy --no-error-summary || status=1
exit "$status"
