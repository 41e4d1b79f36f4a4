#!/usr/bin/env bash
# One step of the Makefile's set-up, condensed: the step's whole output goes to its log and the
# terminal gets one line when it ends,
#
#   setup: .venv (pip install -r requirements-dev.txt) 182 s
#
# and, while a step runs longer than a minute, a line a minute with its time so far and the last
# line of its log. A failed step prints its log's last 40 lines and the log's path, and exits
# with the step's status, which fails the make.
#
#   scripts/setup_step.sh NAME WHAT SCRIPT
#
# NAME names the step and its log (.venv-dlc: build/setup/venv-dlc.log), WHAT says what it does,
# SCRIPT is run by bash with the Makefile's own flags (-euo pipefail), its stdin /dev/null: CI and
# apt-get are non-interactive. SETUP_LOG_DIR (build/setup) and SETUP_PROGRESS_SECONDS (60) change
# where the logs go and how often a running step reports.
set -uo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 NAME WHAT SCRIPT" >&2
  exit 2
fi
name=$1 what=$2 script=$3
log_dir=${SETUP_LOG_DIR:-build/setup}
every=${SETUP_PROGRESS_SECONDS:-60}
log=$log_dir/${name#.}.log
mkdir -p "$log_dir"
: >"$log"
start=$(date +%s)

# The log's last message: a line that starts with a capital letter (pip's "Collecting ...",
# "Installing collected packages: ...", apt-get's "Unpacking ...") or is cmake's progress
# ("[ 45%] Building CXX object ..."), not a command that make echoes nor a compiler's diagnostic.
last_line() {
  tr -d '\r' <"$log" | awk '/^[[:space:]]*(\[ *[0-9]+%\]|[A-Z])/ { line = $0 }
    END { sub(/^[[:space:]]+/, "", line); print substr(line, 1, 120) }'
}

report_progress() {
  local sleeper
  trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  while :; do
    # In the background, so that TERM ends the wait at once, with no descriptor of make's
    # output: a `make demo | tee` must not wait for a sleep left behind.
    sleep "$every" </dev/null >/dev/null 2>&1 &
    sleeper=$!
    wait "$sleeper"
    line=$(last_line)
    echo "setup: $name, $(($(date +%s) - start)) s so far: ${line:-(no output yet)}"
  done
}

report_progress &
reporter=$!
# On any exit, Ctrl-C included: the reporter, a background job, ignores SIGINT.
trap 'kill "$reporter" 2>/dev/null' EXIT

# A log is not a terminal: pip's progress bars would fill it.
PIP_PROGRESS_BAR=off bash -euo pipefail -c "$script" </dev/null >"$log" 2>&1
status=$?
kill "$reporter" 2>/dev/null
wait "$reporter" 2>/dev/null
elapsed=$(($(date +%s) - start))

if [ "$status" -eq 0 ]; then
  echo "setup: $name ($what) $elapsed s"
  exit 0
fi
{
  echo "setup: $name ($what) FAILED after $elapsed s (exit status $status); the last 40 lines of $log:"
  tail -n 40 "$log" | sed 's/^/  /'
  echo "setup: $name: the whole output is in $log"
} >&2
exit "$status"
