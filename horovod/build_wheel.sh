#!/usr/bin/env bash
# Builds Horovod 0.28.1 from PyPI's sdist, with horovod-0.28.1-tf2.19.patch applied, into a wheel
# compiled against the TensorFlow of PYTHON. One script for every Horovod this project runs: the
# local environments (Makefile, target .venv/.horovod) and the training image (Dockerfile).
#
#   build_wheel.sh PYTHON WHEEL_DIR    build; what to build with comes from the environment
#                                      (HOROVOD_WITH_TENSORFLOW=1, HOROVOD_GPU_OPERATIONS=NCCL, ...)
#   build_wheel.sh --check PYTHON      download, verify and patch the sdist, build nothing
#                                      (tests/training/test_horovod_patch.py)
set -euo pipefail

VERSION=0.28.1
# PyPI's sdist of horovod 0.28.1 (2023-06-12), so a changed file on the index fails the build.
SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
HERE=$(cd "$(dirname "$0")" && pwd)
PATCH="$HERE/horovod-$VERSION-tf2.19.patch"

check_only=false
if [ "${1:-}" = "--check" ]; then check_only=true; shift; fi
PYTHON=${1:?usage: build_wheel.sh [--check] PYTHON [WHEEL_DIR]}
WHEEL_DIR=${2:-}
$check_only || [ -n "$WHEEL_DIR" ] || { echo "build_wheel.sh: WHEEL_DIR missing" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m pip download --quiet --no-deps --no-binary :all: --no-cache-dir -d "$work" "horovod==$VERSION"
echo "$SHA256  $work/horovod-$VERSION.tar.gz" | sha256sum --check --quiet -
mkdir "$work/src"
tar xzf "$work/horovod-$VERSION.tar.gz" -C "$work/src" --strip-components=1
# git apply outside any repository (mktemp's directory): it applies to the unpacked sdist as it is.
(cd "$work/src" && GIT_CEILING_DIRECTORIES="$work" git apply --verbose "$PATCH")
$check_only && exit 0

mkdir -p "$WHEEL_DIR"
"$PYTHON" -m pip wheel --no-deps --no-build-isolation --no-cache-dir -w "$WHEEL_DIR" "$work/src"
