"""Exports as the labeling tools' own code writes them: CVAT's COCO 1.0 (Datumaro's
`coco_instances` exporter) and Label Studio's "COCO with Images" (label_studio_sdk's
Converter.convert_to_coco), written by tests/training/labeling_tools.py in .venv-labeling
(`make setup`; tests/training/labeling-requirements.txt pins both)."""

import json
import os
import subprocess
from tests.paths import REPO

LABELING_PYTHON = os.path.join(REPO, ".venv-labeling", "bin", "python")
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "labeling_tools.py")
CVAT, LABEL_STUDIO = "cvat", "label-studio"


def item(name, image, width, height, shapes, subset=None):
    """One image of the task: `name` as the tool knows it, `image` the file it was uploaded
    from, `shapes` [{"type": "rectangle", "label", "box": [x, y, w, h]}, {"type": "polygon",
    "label", "points": [...]}, {"type": "mask", "label", "mask": PNG path}]."""
    found = {"name": name, "image": str(image), "width": width, "height": height,
             "shapes": shapes}
    if subset:
        found["subset"] = subset
    return found


def write(tool, out, labels, items, project=3):
    """Writes the export of `items` with `tool`'s exporter into `out` (Label Studio's media and
    task list go beside it, in <out>-server/, as on its server); returns (out, its annotations
    as written)."""
    if not os.path.isfile(LABELING_PYTHON):
        raise AssertionError(f"{LABELING_PYTHON} is missing: run `make setup` (the labeling "
                             "tools' exporters, tests/training/labeling-requirements.txt)")
    out = str(out)
    spec = {"tool": tool, "out": out, "labels": list(labels), "items": items,
            "workdir": out + "-server", "project": project}
    spec_file = out + "-spec.json"
    with open(spec_file, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    done = subprocess.run([LABELING_PYTHON, SCRIPT, spec_file], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    if tool == CVAT:
        subsets = sorted({i.get("subset", "default") for i in items})
        annotation_files = [os.path.join(out, "annotations", f"instances_{s}.json")
                            for s in subsets]
    else:
        annotation_files = [os.path.join(out, "result.json")]
    written = {}
    for path in annotation_files:
        with open(path, encoding="utf-8") as f:
            written[os.path.relpath(path, out)] = json.load(f)
    return out, (next(iter(written.values())) if len(written) == 1 else written)
