"""Every list in the docs that claims to be all of something is that something, read from the code
or the tree: the virtual environments the Makefile builds, `make test`'s processes, the notebooks,
the constructs the deployment stack composes, each package's modules, the settings, the test
folders, the docs. And no build/ folder enters the training image's build context.

What `cdk destroy` keeps is read from the synthesized templates instead:
tests/infra/test_kept_on_destroy.py.
"""

import ast
import fnmatch
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from maskrcnn_local import emulated_hosts
from tests import dockerfile
from tests.paths import REPO

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
JOB = REPO / "training_code" / "maskrcnn_job"
LAUNCHER = REPO / "notebooks" / "maskrcnn_launcher"
CONTRACT = REPO / "contract" / "maskrcnn_contract"


def _text(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8")


def _section(path: str, heading: str) -> str:
    """The text under a Markdown heading, to the next heading of its level or above (code blocks'
    `#` lines are not headings)."""
    lines, level = _text(path).splitlines(), len(heading) - len(heading.lstrip("#"))
    start = lines.index(heading) + 1
    fenced = False
    for end in range(start, len(lines)):
        fenced ^= lines[end].startswith("```")
        if not fenced and re.match(rf"#{{1,{level}}} ", lines[end]):
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def _rows(markdown: str, header: str) -> list:
    """The rows (lists of cells) of every table whose header row starts with `| header |`."""
    rows, inside = [], False
    for line in markdown.splitlines():
        if line.startswith(f"| {header} |"):
            inside = True
        elif inside and not line.startswith("|"):
            inside = False
        elif inside and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    assert rows, f"no table headed {header!r}"
    return rows


def _first_column(markdown: str, header: str) -> set:
    """Everything named in backticks in the table's first column."""
    return {name for row in _rows(markdown, header) for name in re.findall(r"`([^`]+)`", row[0])}


def _modules(package, depth=None) -> set:
    """The package's modules as paths relative to it (`training/trainer.py`), __init__ and
    __main__ left out; `depth`: only those that many folders down."""
    found = set()
    for path in package.rglob("*.py"):
        relative = path.relative_to(package)
        if relative.name.startswith("__") or "__pycache__" in relative.parts or \
                (depth is not None and len(relative.parts) != depth + 1):
            continue
        found.add(relative.as_posix())
    return found


def _subpackages(package) -> set:
    return {path.parent.name for path in package.glob("*/__init__.py")}


def _tracked() -> list:
    return subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.split()


def _named(text: str, name: str) -> bool:
    """`name` in `text` as a whole name (`data/` is not `metadata/`, `run_tests.py` not
    `run_tests.pyc`)."""
    return re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w-])", text) is not None


# --- The virtual environments -----------------------------------------------------------------

def _makefile_venvs() -> set:
    return set(re.findall(r"^\w*VENV := (\S+)$", _text("Makefile"), re.M))


def _layout() -> dict:
    """README.md's Layout block: {first column: the rest}. An entry starts on a line whose first
    column is filled and goes on over the lines whose first column is empty, or continues a name
    that ended with a comma (`Makefile, package.json,` then `package-lock.json`)."""
    block = _section("README.md", "## Layout").split("```")[1]
    entries, name = {}, None
    for line in block.strip("\n").splitlines():
        if line[:1].isspace():
            entries[name] += " " + line.strip()
            continue
        first, rest = re.match(r"(\S.*?)(?:\s{2,}(.*))?$", line).groups()
        if name and name.endswith(","):
            entries[f"{name} {first}"] = entries.pop(name) + " " + (rest or "")
            name = f"{name} {first}"
        else:
            name, entries[first] = first, rest or ""
    return entries


def _layout_entry(start: str) -> str:
    return next(rest for name, rest in _layout().items() if name.startswith(start))


VENV_LISTS = {
    "README.md, Two commands": lambda: _section(
        "README.md", "## Two commands (fresh Debian machine, as root)"),
    "README.md, Layout (Makefile)": lambda: _layout_entry("Makefile"),
    "docs/image.md, The local environments": lambda: _section(
        "docs/image.md", "## The local environments"),
    ".gitignore": lambda: _text(".gitignore"),
}


@pytest.mark.parametrize("where", VENV_LISTS)
def test_every_list_of_virtual_environments_is_the_makefiles(where):
    named = set(re.findall(r"\.venv(?:-[a-z]+)?", VENV_LISTS[where]()))
    assert named == _makefile_venvs(), f"{where} names {sorted(named)}"


# --- make test's processes, the notebooks, the test folders -----------------------------------

def test_the_makefile_counts_make_tests_processes_as_run_tests_starts_them():
    from scripts.run_tests import BESIDE

    comment = re.search(r"^# (\w+) pytest processes side by side", _text("Makefile"), re.M)
    # BESIDE's processes and the one for everything else; the moto one comes after it.
    assert NUMBERS[comment.group(1).lower()] == len(BESIDE) + 1


def test_the_makefile_counts_make_checks_processes_as_run_tests_starts_them():
    from scripts.run_tests import CHECK_BESIDE

    comment = re.search(r"^# in (\w+) pytest processes \(scripts/run_tests.py --check\)",
                        _text("Makefile"), re.M)
    assert NUMBERS[comment.group(1).lower()] == len(CHECK_BESIDE) + 1


def test_the_notebook_table_and_the_count_in_testing_md_are_the_notebooks_folders():
    notebooks = {path.name for path in (REPO / "notebooks").glob("*.ipynb")}
    assert _first_column(_text("notebooks/README.md"), "notebook") == notebooks
    launcher_tests = re.search(r"^- `tests/launcher`:.*?(?=^- )", _text("docs/testing.md"),
                               re.M | re.S).group(0)
    count = re.search(r"the (\w+) notebooks", launcher_tests).group(1)
    assert NUMBERS[count] == len(notebooks), launcher_tests


def test_testing_md_has_a_paragraph_per_test_folder():
    folders = {path.parent.name for path in (REPO / "tests").glob("*/__init__.py")}
    described = set(re.findall(r"^- `tests/(\w+)`", _text("docs/testing.md"), re.M))
    assert described == folders


# --- README.md: the constructs, the layout, the docs ------------------------------------------

def _composed_constructs() -> set:
    """(name, file) of what DeploymentStack composes: a construct's class, or for a function
    (`deployment_key`) the construct id it gives; its module relative to stacks/ (a package's
    module as its folder, `storage/`)."""
    tree = ast.parse(_text("stacks/deployment.py"))
    modules = {alias.name: node.module for node in tree.body if isinstance(node, ast.ImportFrom)
               and node.module.startswith("stacks.") for alias in node.names}
    stack = next(node for node in tree.body
                 if isinstance(node, ast.ClassDef) and node.name == "DeploymentStack")
    composed = set()
    for call in ast.walk(stack):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and len(call.args) >= 2 \
                and isinstance(call.args[0], ast.Name) and call.args[0].id == "self" \
                and isinstance(call.args[1], ast.Constant):
            callee = call.func.id
            parts = modules[callee].split(".")[1:]
            file = parts[0] + "/" if len(parts) > 1 else parts[0] + ".py"
            composed.add((callee if callee[0].isupper() else call.args[1].value, file))
    return composed


def test_the_construct_table_is_what_the_deployment_stack_composes():
    rows = _rows(_text("README.md"), "construct")
    listed = {tuple(re.findall(r"`([^`]+)`", row[0])[:2]) for row in rows}
    assert listed == _composed_constructs()


# (Layout entry, folder, its folders only): what the folder tracks is named in the entry.
LAYOUT_FOLDERS = [("stacks/", "stacks", False), ("training_code/", "training_code", False),
                  ("training_code/", "training_code/maskrcnn_job", True),
                  ("benchmarks/", "benchmarks", False), ("scripts/", "scripts", False),
                  ("tests/", "tests", True)]
NOT_LISTED = {"__init__.py", "README.md", ".gitignore"}


@pytest.mark.parametrize("entry, folder, folders_only", LAYOUT_FOLDERS)
def test_the_layout_names_what_a_folder_holds(entry, folder, folders_only):
    children = set()
    for path in _tracked():
        if path.startswith(folder + "/"):
            rest = path[len(folder) + 1:].split("/")
            if len(rest) > 1 or not folders_only:
                children.add(rest[0] + "/" if len(rest) > 1 else rest[0])
    text = _layout_entry(entry)
    assert not [child for child in children - NOT_LISTED if not _named(text, child)]


def test_the_layout_names_every_top_level_path_and_no_other():
    top = {path.split("/")[0] + ("/" if "/" in path else "") for path in _tracked()}
    named = {name for entry in _layout() for name in re.split(r"[,\s]+", entry) if name}
    assert named == top - NOT_LISTED


def test_the_documentation_table_links_every_doc():
    rows = _rows(_text("README.md"), "page")
    linked = {link for row in rows for link in re.findall(r"\]\((docs/[\w.-]+\.md)\)", row[0])}
    assert linked == {f"docs/{path.name}" for path in (REPO / "docs").glob("*.md")}


# --- The module tables ------------------------------------------------------------------------

def test_training_code_readme_has_a_row_per_module():
    listed = {name for name in _first_column(_text("training_code/README.md"), "file")
              if name.endswith(".py")}
    expected = {f"maskrcnn_job/{module}" for module in _modules(JOB)} | {
        f"maskrcnn_local/{module}" for module in _modules(JOB.parent / "maskrcnn_local")} | {
        path.name for path in JOB.parent.glob("*.py")}
    assert listed == expected


def _contract_modules_imported(folder) -> set:
    """The contract's modules that the code under `folder` imports."""
    contract = {path.stem for path in CONTRACT.glob("*.py")}
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "maskrcnn_contract":
                found |= {alias.name for alias in node.names if alias.name in contract}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "maskrcnn_contract."):
                found.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                found |= {alias.name.split(".")[1] for alias in node.names
                          if alias.name.startswith("maskrcnn_contract.")}
    return found


def test_training_code_readme_names_the_contract_modules_the_job_imports():
    row = next(row for row in _rows(_text("training_code/README.md"), "file")
               if row[0] == "`../contract/maskrcnn_contract/`")
    named = set(re.findall(r"`(\w+)\.py`", row[1]))
    assert named == _contract_modules_imported(JOB.parent)


def test_notebooks_readme_has_a_row_per_launcher_module_in_the_flows_order():
    rows = _rows(_text("notebooks/README.md"), "module")
    listed = [name for row in rows for name in re.findall(r"`([\w/]+\.py)`", row[0])]
    assert set(listed) == _modules(LAUNCHER, depth=1)
    # "each imports only the folders above it in this table": the order the structure test holds.
    flows = ast.literal_eval(re.search(r"^FLOWS = (\(.*?\))$", _text(
        "tests/launcher/test_package_structure.py"), re.M | re.S).group(1))
    assert list(dict.fromkeys(name.split("/")[0] for name in listed)) == list(flows)


def _imports_of(path) -> set:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
            for alias in node.names} | {
        node.module.split(".")[0] for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and not node.level}


def test_notebooks_readme_names_the_modules_that_import_the_sagemaker_sdk():
    sentence = re.search(r"the training flow's (.*?) alone import the SageMaker SDK",
                         _text("notebooks/README.md"), re.S).group(1)
    named = {f"training/{name}.py" for name in re.findall(r"`(\w+)`", sentence)}
    assert named == {module for module in _modules(LAUNCHER)
                     if "sagemaker" in _imports_of(LAUNCHER / module)}


def test_architecture_md_names_every_package_folder_and_contract_module():
    text = _text("docs/architecture.md")
    assert _first_column(text, "contract module") == {path.name for path in CONTRACT.glob("*.py")
                                                      if path.name != "__init__.py"}
    folders = _first_column(text, "folder")
    assert folders == {f"maskrcnn_job/{name}/" for name in _subpackages(JOB)} | {
        f"maskrcnn_launcher/{name}/" for name in _subpackages(LAUNCHER)}


# --- The package docstrings -------------------------------------------------------------------

def _docstring(path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _names_in(package) -> set:
    """The package's modules (stems) and subpackages, one folder down."""
    return {Path(module).stem for module in _modules(package, depth=0)} | _subpackages(package)


def _launcher_folder_entry(folder: str) -> str:
    """The text of `folder/`'s entry in the launcher package's list of folders ("" if none)."""
    entries = dict(re.findall(r"^  (\w+)/ +(.*?)(?=^  \w+/|^\S|\Z)",
                              _docstring(LAUNCHER / "__init__.py"), re.M | re.S))
    return entries.get(folder, "")


def _benchmarks_using_results() -> set:
    return {path.stem for path in (REPO / "benchmarks").glob("*.py")
            if path.stem != "results" and "results" in _imports_of(path) | {
                alias.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.ImportFrom) and node.module == "benchmarks"
                for alias in node.names}}


PACKAGES = [CONTRACT, JOB, *sorted(JOB / name for name in _subpackages(JOB)),
            JOB.parent / "maskrcnn_local", LAUNCHER,
            *sorted(LAUNCHER / name for name in _subpackages(LAUNCHER)),
            REPO / "stacks" / "storage"]
# (text, the names it claims all of), read when the test runs.
DOCSTRING_INVENTORIES = {
    **{f"{package.relative_to(REPO).as_posix()}/__init__.py": (
        lambda package=package: (_docstring(package / "__init__.py"), _names_in(package)))
       for package in PACKAGES},
    **{f"maskrcnn_launcher/__init__.py, {name}/": (
        lambda name=name: (_launcher_folder_entry(name), _names_in(LAUNCHER / name)))
       for name in sorted(_subpackages(LAUNCHER))},
    "stacks/deployment.py": lambda: (_docstring(REPO / "stacks" / "deployment.py"),
                                     {name for name, _ in _composed_constructs()}),
    "benchmarks/results.py": lambda: (_docstring(REPO / "benchmarks" / "results.py"),
                                      _benchmarks_using_results()),
}


@pytest.mark.parametrize("where", DOCSTRING_INVENTORIES)
def test_each_package_docstring_names_every_module_its_folder_holds(where):
    """A package's docstring names each of its modules and subpackages; the launcher's list of
    folders names each folder's modules; the deployment stack's names each construct it composes;
    benchmarks/results.py's each script that records through it. Named: the name as a whole word
    (`init_from` is not in `init_from_checkpoint`), in backticks, parentheses or a list alike."""
    text, names = DOCSTRING_INVENTORIES[where]()
    assert names, where
    unnamed = sorted(name for name in names
                     if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text))
    assert not unnamed, f"{where} does not name {unnamed}"


# --- The settings, the image's installs -------------------------------------------------------

def test_the_settings_table_names_every_setting():
    from stacks.config import DeploymentConfig

    first = _first_column(_text("docs/settings.md"), "key")
    table = "\n".join(" | ".join(row) for row in _rows(_text("docs/settings.md"), "key"))
    settings = set(DeploymentConfig.model_fields)
    assert not [name for name in first if not fnmatch.filter(settings, name)]
    assert not [name for name in settings if f"`{name}`" not in table]


def test_image_md_counts_the_dockerfiles_pip_installs():
    count = re.search(r"The (\w+) installs add", _text("docs/image.md")).group(1)
    assert NUMBERS[count.lower()] == len(dockerfile.pip_installs())


# --- The image's build context ----------------------------------------------------------------

def test_no_build_folder_enters_the_images_build_context(tmp_path):
    """A stale contract/build/lib (what a local `pip install ./contract` leaves) and any other
    build/ folder stay out of what the image's build copies, as the emulated hosts stage it."""
    repo, staged = tmp_path / "repo", tmp_path / "staged"
    repo.mkdir()
    shutil.copy(REPO / ".dockerignore", repo / ".dockerignore")
    planted = ["contract/build/lib/maskrcnn_contract/x.py", "training_code/build/x.py",
               "training_code/maskrcnn_job/build/x.py", "build/x.py"]
    kept = ["contract/maskrcnn_contract/x.py", "horovod/build_wheel.sh", "training_code/train.py"]
    for relative in planted + kept:
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_text("")
    emulated_hosts.stage_code(str(repo), str(repo), str(staged))
    copied = {path.relative_to(staged).as_posix() for path in staged.rglob("*") if path.is_file()}
    assert copied == set(kept)


def test_the_layout_names_what_the_build_context_holds():
    included = re.findall(r"^!(\S+)$", _text(".dockerignore"), re.M)
    text = _layout_entry(".dockerignore")
    assert not [name for name in included if not _named(text, name + "/")]
    assert _named(text, "build/")
