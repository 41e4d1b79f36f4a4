"""The repository's paths, defined once for every test module."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TRAINING_CODE = REPO / "training_code"
NOTEBOOKS = REPO / "notebooks"
# The virtual environments the Makefile builds (`make test`), each standing for another machine.
IMAGE_PYTHON = REPO / ".venv-image" / "bin" / "python"
SERVING_PYTHON = REPO / ".venv-serving" / "bin" / "python"
LABELING_PYTHON = REPO / ".venv-labeling" / "bin" / "python"
DLC_PYTHON = REPO / ".venv-dlc" / "bin" / "python"
