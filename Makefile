# Two commands do everything on a fresh Debian machine (as root):
#   make demo   set up what the demo uses (apt packages, .venv with Horovod, the CDK CLI),
#               synthesize the app, and run the training job locally
#   make test   set up everything (the demo's and the tests' environments) and run every test
# Both are idempotent: each set-up step leaves a stamp and is skipped when its inputs are unchanged.
# Each step prints one line with its time, and a line a minute while it runs; its whole output is
# in build/setup/<step>.log, whose end a failed step prints (scripts/setup_step.sh).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV := .venv
# A stand-in for the Deep Learning Container's packages, toolkits included: the image-build
# rehearsal dry-runs the Dockerfile's pip commands against it (tests/training/test_image_rehearsal.py).
DLC_VENV := .venv-dlc
# The training image's Python: the DLC stand-in as a lower layer (a .pth file, as an image layer
# sits on its base) plus what the Dockerfile adds (Horovod, the contract). The emulated hosts run
# the toolkit and the job with it (maskrcnn_local/emulated_hosts.py).
IMAGE_VENV := .venv-image
# The serving image's TensorFlow (2.20), which must load and answer the SavedModel the job exports.
SERVING_VENV := .venv-serving
# The labeling tools' own COCO exporters (Datumaro, CVAT's; label-studio-sdk, Label Studio's): the
# tests write their exports with them (tests/training/labeling_tools.py).
LABELING_VENV := .venv-labeling
# What the CDK pipeline's Synth step installs (stacks/pipeline_stack.py): requirements-infra.txt
# alone. `make test` runs tests/infra in it, as that step runs them.
INFRA_VENV := .venv-infra
# One Horovod build serves both environments: both have TensorFlow 2.21.0 from PyPI on this Python.
HOROVOD_WHEEL_DIR := $(VENV)/horovod-wheel
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CDK := npx --no-install cdk
STEP := scripts/setup_step.sh

# `cdk.json` runs `python3 app.py`: the virtual environment's python must come first.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# Node 20 is end-of-life for jsii; the banner it prints on every synth is noise here.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export TF_CPP_MIN_LOG_LEVEL ?= 2
# As the training image sets it (training_code/Dockerfile): tf.keras is tf_keras, Model Garden's Keras.
export TF_USE_LEGACY_KERAS := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Open MPI for Horovod; compilers, and git to patch its sdist, for its build.
# libgl1, libglib2.0-0: the DLC's opencv-python (not the headless build) loads them, as on its OS.
APT_PACKAGES := openmpi-bin libopenmpi-dev g++ make cmake git libgl1 libglib2.0-0
# The emulated hosts of the tests and benchmarks: sshd per host, as in the DLC; network namespaces.
APT_HOSTS_PACKAGES := openssh-server iproute2
HOROVOD_ENV := HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
               HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1

.PHONY: help setup setup-demo apt apt-hosts demo synth summary bench check test test-infra test-training \
        test-launcher lint clean

help:
	@echo "make demo   - set up what it uses, synthesize the CDK app and summarize it, run the training job locally"
	@echo "make check  - the inner loop (minutes): ruff, mypy and every test that starts no training run"
	@echo "make test   - set up everything and run all tests (what CI runs)"
	@echo "make synth  - synthesize the CDK app into cdk.out (offline, cdk-nag applied)"
	@echo "make lint   - synthesize, then cfn-lint every template"
	@echo "make bench  - CPU benchmarks (root, long): the demo's accuracy; COCOeval by pycocotools and faster-coco-eval; horovod, multi_worker_mirrored, parameter_server side by side; converter speed; what large images cost; writes docs/benchmarks.md"

# What `make demo` uses: the job's environment with Horovod, the CDK CLI and what they need.
setup-demo: apt $(VENV)/.horovod node_modules/.installed
# Everything: the tests' environments too (the DLC stand-in and the image's Python, the serving,
# labeling and pipeline environments) and the emulated hosts' packages.
setup: setup-demo apt-hosts $(DLC_VENV)/.installed $(IMAGE_VENV)/.installed \
       $(SERVING_VENV)/.installed $(LABELING_VENV)/.installed $(INFRA_VENV)/.installed

# System packages, those missing only (a step only when one is): $(1) plus, with node, Node.js
# for the CDK CLI.
define apt_install
@missing=""; \
for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
$(if $(2),command -v node >/dev/null 2>&1 || missing="$$missing nodejs npm";) \
if [ -n "$$missing" ]; then \
  $(STEP) $@ "apt-get install$$missing" \
    "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends$$missing"; \
fi
endef

apt:
	$(call apt_install,$(APT_PACKAGES),node)

apt-hosts:
	$(call apt_install,$(APT_HOSTS_PACKAGES))

$(VENV)/.installed: requirements.txt requirements-infra.txt requirements-dev.txt training_code/requirements.txt \
                   training_code/image-requirements.txt training_code/model-garden.txt \
                   notebooks/requirements.txt tests/launcher/requirements.txt \
                   contract/pyproject.toml training_code/pyproject.toml
	@$(STEP) $(VENV) "pip install -r requirements-dev.txt" '\
	  test -x $(PY) || python3 -m venv $(VENV); \
	  $(PIP) install --upgrade pip wheel; \
	  $(PIP) install -r requirements-dev.txt; \
	  $(PIP) install --no-deps -r training_code/model-garden.txt'
	@touch $@

# The TensorFlow in .venv, rewritten only when its version changes: Horovod is rebuilt (minutes)
# when TensorFlow changes, not when another requirement of .venv does (make re-reads the stamp's
# time after its recipe ran).
$(VENV)/.tensorflow-version: $(VENV)/.installed
	@$(PY) -c "import importlib.metadata as m; print(m.version('tensorflow'))" > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

# Horovod is compiled against the TensorFlow just installed, from PyPI's sdist with our patch for
# TF >= 2.19 (horovod/build_wheel.sh, the same script the Dockerfile runs), into a wheel both
# environments install; --no-cache-dir because a cached wheel built against another TensorFlow
# fails at import (horovod issue 4039).
# flock: a second `make` in the same tree waits for this build instead of compiling it again.
# Uninstalled first: pip would keep a Horovod built against the previous TensorFlow.
# PIP_VERBOSE: pip shows the build's own output (cmake's "[ 45%] Building CXX object ..."), in the
# log and in the step's progress lines. MAKEFLAGS: Horovod's setup.py runs `make -j8` only when
# MAKEFLAGS is empty; under `make -s`, `-k` or `-jN` it is not, and the build ran one job at a
# time (`-jN`'s jobserver does not reach it through pip: "jobserver unavailable: using -j1").
# One job per core, whatever make was given.
$(VENV)/.horovod: $(VENV)/.tensorflow-version horovod/build_wheel.sh $(wildcard horovod/*.patch)
	@flock $(VENV)/.build.lock $(STEP) horovod "build and install Horovod 0.28.1 against .venv's TensorFlow" '\
	  rm -rf $(HOROVOD_WHEEL_DIR); \
	  $(PIP) uninstall -y horovod; \
	  env PIP_VERBOSE=1 MAKEFLAGS=-j$$(nproc) $(HOROVOD_ENV) horovod/build_wheel.sh $(PY) $(HOROVOD_WHEEL_DIR); \
	  $(PIP) install --no-deps $(HOROVOD_WHEEL_DIR)/horovod-*.whl; \
	  $(PY) -c "import horovod.tensorflow as hvd; assert hvd.gloo_built() and hvd.mpi_built(), \"horovod lacks Gloo or MPI\""'
	@touch $@

# The DLC's packages (dlc-seed.txt) at the versions of its own lock (dlc-constraints.txt), pip,
# setuptools and wheel included.
$(DLC_VENV)/.installed: training_code/dlc-seed.txt training_code/dlc-constraints.txt
	@$(STEP) $(DLC_VENV) "the DLC's packages, training_code/dlc-seed.txt" '\
	  rm -rf $(DLC_VENV); \
	  python3 -m venv $(DLC_VENV); \
	  $(DLC_VENV)/bin/pip install -c training_code/dlc-constraints.txt pip setuptools wheel; \
	  $(DLC_VENV)/bin/pip install -c training_code/dlc-constraints.txt -r training_code/dlc-seed.txt; \
	  $(DLC_VENV)/bin/python -c "import sagemaker_training.cli.train, sagemaker_tensorflow_container.training, gethostname, mpi4py, cv2"'
	@touch $@

# The image's layer on the DLC: image-requirements.txt, Model Garden without its dependencies,
# Horovod (the wheel built above: same TensorFlow) and the contract, installed as the Dockerfile
# installs them (not editable).
$(IMAGE_VENV)/.installed: $(DLC_VENV)/.installed $(VENV)/.horovod contract/pyproject.toml \
                         training_code/image-requirements.txt training_code/model-garden.txt \
                         $(wildcard contract/maskrcnn_contract/*.py)
	@$(STEP) $(IMAGE_VENV) "the Dockerfile's layer on .venv-dlc" '\
	  rm -rf $(IMAGE_VENV); \
	  python3 -m venv --without-pip $(IMAGE_VENV); \
	  $(DLC_VENV)/bin/python -c "import site; print(site.getsitepackages()[0])" \
	    > $$($(IMAGE_VENV)/bin/python -c "import site; print(site.getsitepackages()[0])")/dlc-layer.pth; \
	  $(IMAGE_VENV)/bin/python -m pip install -c training_code/dlc-constraints.txt -r training_code/image-requirements.txt; \
	  $(IMAGE_VENV)/bin/python -m pip install --no-deps -r training_code/model-garden.txt; \
	  $(IMAGE_VENV)/bin/python -m pip install -c training_code/dlc-constraints.txt $(HOROVOD_WHEEL_DIR)/horovod-*.whl; \
	  $(IMAGE_VENV)/bin/python -m pip install --no-deps --no-build-isolation ./contract; \
	  $(IMAGE_VENV)/bin/python -c "import horovod.tensorflow as hvd, horovod.tensorflow.mpi_ops, maskrcnn_contract, sagemaker_training, official.vision.tasks.maskrcnn; assert hvd.mpi_built() and hvd.gloo_built()"'
	@touch $@

# A virtual environment made afresh from one requirements file: $(1) the environment, $(2) the
# file, $(3) Python that checks the result (optional).
define fresh_venv
@$(STEP) $(1) "pip install -r $(2)" '\
  rm -rf $(1); \
  python3 -m venv $(1); \
  $(1)/bin/pip install -r $(2)$(if $(3),; \
  $(1)/bin/python -c "$(3)")'
@touch $@
endef

SERVING_CHECK := import tensorflow as tf; assert tf.__version__ == \"2.20.0\", tf.__version__
$(SERVING_VENV)/.installed: tests/training/serving-requirements.txt
	$(call fresh_venv,$(SERVING_VENV),$<,$(SERVING_CHECK))

LABELING_CHECK := import datumaro.plugins.data_formats.coco.exporter; \
                  from label_studio_sdk.converter import Converter
$(LABELING_VENV)/.installed: tests/training/labeling-requirements.txt
	$(call fresh_venv,$(LABELING_VENV),$<,$(LABELING_CHECK))

# As the pipeline's Synth step: `pip install -r requirements-infra.txt` in a fresh environment.
$(INFRA_VENV)/.installed: requirements-infra.txt requirements.txt contract/pyproject.toml
	$(call fresh_venv,$(INFRA_VENV),$<)

node_modules/.installed: package.json package-lock.json
	@$(STEP) node_modules "npm ci: the CDK CLI of package.json" 'npm ci --no-audit --no-fund'
	@touch $@

synth: setup-demo
	rm -rf cdk.out
	$(CDK) synth --quiet

summary: synth
	$(PY) scripts/summarize_cloud_assembly.py cdk.out

demo: summary
	$(PY) -m maskrcnn_local.local_run

# The inner loop: ruff and mypy (scripts/check_code.sh) beside every test not marked end_to_end,
# in five pytest processes (scripts/run_tests.py --check).
check: setup
	$(PY) scripts/run_tests.py --check

# Six pytest processes side by side (scripts/run_tests.py says why), beside the code checks: every
# test; plain `pytest` runs the same tests in one process.
test: setup
	$(PY) scripts/run_tests.py

test-infra: setup
	$(PY) -m pytest tests/infra

test-training: setup
	$(PY) -m pytest tests/training

# One run: its JSON files only (the old ones are removed first), rendered into docs/benchmarks.md,
# each table with its date, machine and command (benchmarks/report.py).
BENCH_RESULTS := build/bench/results
# The last run on the previous platform (TensorFlow 2.18, this kind of machine), set beside each
# new run in docs/benchmarks.md, "Before and after".
BENCH_BASELINE := benchmarks/baselines/tf2.18
# The demo's set-up and the emulated hosts' (cpu_scaling.py: the image's Python, sshd).
bench: setup-demo apt-hosts $(IMAGE_VENV)/.installed
	rm -rf $(BENCH_RESULTS)
	# Step times first: the demo's AP does not depend on what else the machine is doing.
	$(PY) benchmarks/cpu_scaling.py --results-dir $(BENCH_RESULTS)
	$(PY) benchmarks/converter_speed.py --results-dir $(BENCH_RESULTS)
	$(PY) benchmarks/demo_accuracy.py --results-dir $(BENCH_RESULTS)
	# COCOeval by pycocotools and faster-coco-eval on the model demo_accuracy.py just trained.
	$(PY) benchmarks/coco_eval_speed.py --results-dir $(BENCH_RESULTS)
	# What images up to 48 MP cost the converter and the predictions, on that model too.
	$(PY) benchmarks/large_images.py --model build/bench/demo/opt_ml/model --results-dir $(BENCH_RESULTS)
	$(PY) benchmarks/report.py $(BENCH_RESULTS) --baseline $(BENCH_BASELINE) --out docs/benchmarks.md \
	    --evaluation-doc docs/evaluation.md

test-launcher: setup
	$(PY) -m pytest tests/launcher

lint: synth
	$(VENV)/bin/cfn-lint $$(find cdk.out -name '*.template.json')

clean:
	rm -rf cdk.out .pytest_cache build
