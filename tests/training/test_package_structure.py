"""The job package's boundaries: what ships in the image needs nothing that does not, and the
converter runs without TensorFlow."""

import ast
import subprocess
import sys
from pathlib import Path

CODE = Path(__file__).resolve().parents[2] / "training_code"


def _imports(path: Path) -> set:
    """Every module a file imports, at any depth (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_nothing_that_ships_imports_the_local_tools():
    shipped = [CODE / "train.py", CODE / "stage_dataset.py", *(CODE / "maskrcnn_job").rglob("*.py")]
    offenders = {str(path.relative_to(CODE)): sorted(m for m in _imports(path)
                                                     if m.split(".")[0] == "maskrcnn_local")
                 for path in shipped}
    assert not {path: modules for path, modules in offenders.items() if modules}


def test_the_data_package_never_imports_tensorflow():
    """The converter's processes start in a fraction of a second because nothing in data/ imports
    TensorFlow, not even inside a function (benchmarks/converter_speed.py measures it)."""
    for path in (CODE / "maskrcnn_job" / "data").glob("*.py"):
        heavy = sorted(m for m in _imports(path) if m.split(".")[0] in ("tensorflow", "official",
                                                                        "tf_keras"))
        assert not heavy, (path.name, heavy)
    # And nothing it imports does so on its behalf.
    check = ("import sys, maskrcnn_job.data.coco_to_tfrecord, maskrcnn_job.data.layout; "
             "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
             "('tensorflow', 'official', 'tf_keras')); assert not loaded, loaded")
    subprocess.run([sys.executable, "-c", check], check=True, timeout=120)
