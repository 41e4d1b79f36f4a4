"""The launcher package's shape, read from its source: which module imports which, and where the
toolkit's hyperparameter names come from."""

import ast
import re
from pathlib import Path
from typing import Dict, List, Set

from tests.launcher.conftest import NOTEBOOKS

PACKAGE = "maskrcnn_launcher"
SOURCES = {path.stem: path for path in sorted((NOTEBOOKS / PACKAGE).glob("*.py"))}


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
    """The package's modules `module` imports."""
    found = {name.split(".")[1] for name in _imported(module)
             if name.startswith(f"{PACKAGE}.") and name.split(".")[1] in SOURCES}
    return found - {module}


def _graph() -> Dict[str, Set[str]]:
    return {module: _imports(module) for module in SOURCES}


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


def test_jobs_and_submit_meet_only_in_session_and_the_package_has_no_import_circle():
    graph = _graph()
    assert "submit" not in graph["jobs"] and "jobs" not in graph["submit"]
    assert "session" in graph["jobs"] and "session" in graph["submit"]
    assert _circle(graph) == []


def test_the_circle_finder_finds_one():
    assert _circle({"jobs": {"submit"}, "submit": {"session", "jobs"}, "session": set()}) == \
        ["jobs", "submit", "jobs"]


def test_the_plan_is_resolved_without_the_sdk():
    """Only the modules that build and send the request import the SageMaker SDK (~2 s); the
    plan and what it reads do not."""
    graph = _graph()
    reached, todo = set(), ["plan"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    sdk_users = {module for module in SOURCES
                 if any(name.split(".")[0] == "sagemaker" for name in _imported(module))}
    assert sdk_users == {"jobs", "session"}
    assert not reached & (sdk_users | {"submit"}), reached


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
        literals += [f"{module}.py:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     and id(node) not in skip and re.search(r"\bsagemaker_[a-z]", node.value)]
    assert literals == []
