"""Pre-annotation files read back by the labeling tools' own code: runs
tests/launcher/labeling_readback.py in .venv-labeling (it says what each tool does) and returns
what it printed."""

import json
import os
import subprocess

from tests.paths import LABELING_PYTHON

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "labeling_readback.py")


def read_back(paths, workdir) -> dict:
    """`paths`: the Label Studio tasks, its config and the CVAT COCO file, in
    PreAnnotations.write's order; `workdir`: an empty folder for what the tools write."""
    if not LABELING_PYTHON.is_file():
        raise AssertionError(f"{LABELING_PYTHON} is missing: run `make setup` (the labeling "
                             "tools, tests/training/labeling-requirements.txt)")
    done = subprocess.run([str(LABELING_PYTHON), SCRIPT, *map(str, paths), str(workdir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout)
