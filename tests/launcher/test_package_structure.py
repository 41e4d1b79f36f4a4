"""The launcher package's shape, read from its source: one folder per flow, which module imports
which, and where the toolkit's hyperparameter names come from."""

import ast
import re
from typing import Dict, List, Set

from tests.launcher.conftest import NOTEBOOKS

PACKAGE = "maskrcnn_launcher"
ROOT = NOTEBOOKS / PACKAGE
# The flows, each importing only those before it (maskrcnn_launcher/__init__.py): the deployment
# is read by all; runs are looked up by training (fine-tuning), data (staging runs a job built as a
# launch is) and serving; labeling predicts with what serving serves; the CLI assembles them all.
FLOWS = ("deployment", "runs", "training", "data", "serving", "labeling", "cli")
# Modules by dotted name below the package ("training.jobs"); the package's own __init__ and
# __main__ are "" and "__main__".
SOURCES = {".".join(path.relative_to(ROOT).with_suffix("").parts).replace(".__init__", "")
           .replace("__init__", ""): path for path in sorted(ROOT.rglob("*.py"))}


def _tree(module: str) -> ast.Module:
    return ast.parse(SOURCES[module].read_text(), filename=str(SOURCES[module]))


def _imported(module: str) -> Set[str]:
    """Every name `module` imports (`a.b` for `from a import b`), wherever the import stands: at
    the top, in a function, under TYPE_CHECKING (a circle only typing sees is still one)."""
    names = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _imports(module: str) -> Set[str]:
    """The package's modules `module` imports (`from maskrcnn_launcher.training import jobs` is
    training.jobs; importing a folder's __init__ alone names the folder)."""
    found = set()
    for name in _imported(module):
        if name.startswith(f"{PACKAGE}."):
            dotted = name[len(PACKAGE) + 1:]
            while dotted and dotted not in SOURCES:
                dotted = dotted.rpartition(".")[0]
            if dotted:
                found.add(dotted)
    return found - {module}


def _graph() -> Dict[str, Set[str]]:
    return {module: _imports(module) for module in SOURCES}


def _flow(module: str) -> str:
    return module.split(".")[0]


def _circle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import circle of the graph as the modules along it, or []."""
    done: Set[str] = set()

    def visit(module: str, path: List[str]) -> List[str]:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return []
        for imported in sorted(graph[module]):
            circle = visit(imported, path + [module])
            if circle:
                return circle
        done.add(module)
        return []

    for module in sorted(graph):
        circle = visit(module, [])
        if circle:
            return circle
    return []


def test_the_package_is_one_folder_per_flow():
    assert {module for module in SOURCES if "." not in module} == set(FLOWS) | {"", "__main__"}


def _upward(graph: Dict[str, Set[str]]) -> List[str]:
    """Each import of a module of a later flow, as "<module> imports <module>"."""
    return sorted(f"{module} imports {imported}" for module, imports in graph.items()
                  if _flow(module) in FLOWS for imported in imports
                  if _flow(imported) in FLOWS
                  and FLOWS.index(_flow(imported)) > FLOWS.index(_flow(module)))


def test_each_flow_imports_only_the_flows_before_it():
    assert _upward(_graph()) == []


def test_the_flow_check_finds_an_upward_import():
    assert _upward({"runs.lookup": {"serving.endpoints"}, "serving.endpoints": {"runs.lookup"}}) \
        == ["runs.lookup imports serving.endpoints"]


def test_jobs_and_submit_meet_only_in_session_and_the_package_has_no_import_circle():
    graph = _graph()
    assert "training.submit" not in graph["training.jobs"]
    assert "training.jobs" not in graph["training.submit"]
    assert "training.session" in graph["training.jobs"]
    assert "training.session" in graph["training.submit"]
    assert _circle(graph) == []


def test_the_circle_finder_finds_one():
    assert _circle({"jobs": {"submit"}, "submit": {"session", "jobs"}, "session": set()}) == \
        ["jobs", "submit", "jobs"]


def test_the_plan_is_resolved_without_the_sdk():
    """Only the modules that build and send the request import the SageMaker SDK (~2 s); the
    plan and what it reads do not."""
    graph = _graph()
    reached, todo = set(), ["training.plan"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    sdk_users = {module for module in SOURCES
                 if any(name.split(".")[0] == "sagemaker" for name in _imported(module))}
    assert sdk_users == {"training.jobs", "training.session"}
    assert not reached & (sdk_users | {"training.submit"}), reached


def _docstrings(tree: ast.Module) -> Set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def test_the_toolkits_hyperparameter_names_come_from_the_contract():
    """job_io spells the toolkit's `sagemaker_*` names once; a literal in the launcher would be a
    second spelling. (Tests keep literals on purpose: they check the wire format.)"""
    literals = []
    for module in SOURCES:
        tree = _tree(module)
        skip = _docstrings(tree)
        literals += [f"{SOURCES[module]}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     and id(node) not in skip and re.search(r"\bsagemaker_[a-z]", node.value)]
    assert literals == []
