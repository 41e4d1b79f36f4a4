"""References that cannot rot: every repository path, document section and AWS rule that the
code's comments and the docs cite exists, and every test docs/aws-rules.md names is defined.

A citation is a path with a folder (`stacks/network.py`, `maskrcnn_job/data/layout.py`,
`../docs/settings.md`), a section after a Markdown path (`docs/operations.md, "Deploying"`,
`[x](batch-norm.md), "The cost"`, `README.md#anchor`), or a rule id after aws-rules.md
(`docs/aws-rules.md SM-13`). Paths are resolved as their readers would: relative to the citing
Markdown file, the repository root, or the folder a package lives in (`maskrcnn_job/...` is under
training_code/). A path whose first folder is not one of this repository's is someone else's
(`official/vision/...`, `sagemaker_training/params.py`) and is not checked.
"""

import re
import subprocess
from pathlib import Path

import pytest
from tests.paths import REPO

# Where a package's own paths start, as comments write them.
PACKAGE_HOMES = {"maskrcnn_job": "training_code", "maskrcnn_local": "training_code",
                 "maskrcnn_contract": "contract", "maskrcnn_launcher": "notebooks"}
TEXT_SUFFIXES = {".py", ".md", ".sh", ".ipynb", ".txt", ".toml", ".cfg", ".ini"}
TEXT_NAMES = {"Dockerfile", "Makefile", ".dockerignore", "run", "cdk.json"}
DLC_FILES = "aws/deep-learning-containers' build and documentation files (aws-rules.md DLC-1 to DLC-3)"
LABEL_STUDIO_DOCS = "HumanSignal/label-studio's documentation (docs/labeling.md, Pre-annotations)"
# Citations that look like this repository's and are not, by citing file: other projects'
# paths that start with a folder name this repository also has, and test data.
EXTERNAL = {
    ("docs/aws-rules.md", "docs/src/data/tensorflow-training/2.21-gpu-sagemaker.yml"):
        DLC_FILES,
    ("docs/aws-rules.md", "docs/src/legacy/legacy_support.yml"):
        DLC_FILES,
    ("docs/aws-rules.md", "scripts/docker/tensorflow/entrypoint.sh"):
        DLC_FILES,
    ("docs/aws-rules.md", "docs/reference/region_availability.md"):
        DLC_FILES,
    ("docs/image.md", "docs/src/data/tensorflow-training/2.21-gpu-sagemaker.yml"):
        DLC_FILES,
    ("docs/image.md", "docs/src/legacy/legacy_support.yml"):
        DLC_FILES,
    ("docs/image.md", "scripts/docker/tensorflow/entrypoint.sh"):
        DLC_FILES,
    ("docs/serving.md", "scripts/docker/tensorflow/inference/sagemaker/python_service.py"):
        DLC_FILES,
    ("stacks/dlc.py", "docs/reference/region_availability.md"):
        DLC_FILES,
    ("stacks/dlc.py", "docs/src/legacy/legacy_support.yml"):
        DLC_FILES,
    ("tests/infra/test_aws_rules.py", "docs/reference/region_availability.md"):
        DLC_FILES,
    ("docs/aws-rules.md", "README.md"):
        "aws/sagemaker-tensorflow-serving-container's README, \"Pre/Post-Processing\" (EP-2)",
    **{(citing, cited): LABEL_STUDIO_DOCS
       for citing in ("docs/labeling.md", "notebooks/maskrcnn_launcher/labeling/pre_annotations.py",
                      "tests/launcher/labeling_readback.py")
       for cited in ("docs/source/guide/predictions.md", "docs/source/guide/storage.md")},
    ("tests/training/test_horovod_patch.py", "horovod/tensorflow/CMakeLists.txt"):
        "a file of Horovod's sdist, which horovod/build_wheel.sh patches",
    ("tests/training/test_emulated_hosts.py", "notebooks/x.ipynb"):
        "a made-up path the .dockerignore matcher is tested on",
}

PATH = re.compile(r"(?<![\w/.:~@-])((?:\.\./)*(?:[\w.-]+/)+(?:[\w.-]+\.(?:py|md|sh|txt|toml|json|"
                  r"ipynb|yml|yaml)|Dockerfile|Makefile))(?![\w/-])")
SECTION = re.compile(r"((?:\.\./)*[\w./-]*(?:\.md|README))(?![\"'])(#[\w-]+)?`?\)?\]?(?:\([^)\s]*\))?"
                     r"`?(?:,|:)?\s*\(?\s*\\?[\"“]([^\"”\\\n]{2,80})\\?[\"”]")
ANCHOR = re.compile(r"((?:\.\./)*[\w./-]+\.md)#([\w-]+)")
RULE = re.compile(r"aws-rules\.md`?\)?,?\s+(?:rule\s+)?([A-Z]+-\d+)")


def _tracked_texts():
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in names:
        path = REPO / name
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES) \
                and not name.startswith("tests/docs/"):
            yield path, path.read_text(encoding="utf-8", errors="replace")


TEXTS = list(_tracked_texts())
# This repository's own first folders: what git tracks (not build/ or .venv/, which runs write).
TOP_LEVEL = {path.relative_to(REPO).parts[0] for path, _ in TEXTS} | set(PACKAGE_HOMES)


def _resolve(citing: Path, cited: str):
    """The file a citation means, or None if it is not this repository's; raises AssertionError
    if it is this repository's and does not exist."""
    first = cited.lstrip("./").split("/")[0]
    if (str(citing.relative_to(REPO)), cited) in EXTERNAL or (
            not cited.startswith("../") and first not in TOP_LEVEL):
        return None
    candidates = [citing.parent / cited, REPO / cited]
    if first in PACKAGE_HOMES:
        candidates.append(REPO / PACKAGE_HOMES[first] / cited)
    for candidate in candidates:
        if candidate.exists():
            return candidate.resolve()
    raise AssertionError(f"{citing.relative_to(REPO)} cites {cited}, which does not exist")


def _headings(markdown: Path):
    return {line.lstrip("#").strip() for line in markdown.read_text().splitlines()
            if re.match(r"^#{1,6} ", line)}


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_every_cited_repository_path_exists():
    problems, checked = [], 0
    for path, text in TEXTS:
        for cited in set(PATH.findall(text)):
            try:
                checked += _resolve(path, cited) is not None
            except AssertionError as error:
                problems.append(str(error))
    assert checked > 100, checked  # the pattern still finds the citations
    assert not problems, "\n".join(sorted(problems))


def test_every_cited_section_and_anchor_exists():
    problems, checked = [], 0
    for path, text in TEXTS:
        for cited, anchor, section in SECTION.findall(text):
            if cited == "README" or cited.endswith("/README"):
                continue  # another project's README, cited without a path
            try:
                target = _resolve(path, cited)
            except AssertionError as error:
                problems.append(str(error))
                continue
            if target is None or target.suffix != ".md":
                continue
            checked += 1
            if section.strip() not in _headings(target):
                problems.append(f"{path.relative_to(REPO)} cites {cited}, \"{section}\": "
                                f"no such heading in {target.relative_to(REPO)}")
        for cited, anchor in ANCHOR.findall(text):
            target = _resolve(path, cited)
            if target is not None and anchor not in {_slug(h) for h in _headings(target)}:
                problems.append(f"{path.relative_to(REPO)} cites {cited}#{anchor}: no such "
                                "heading")
    assert checked > 10, checked
    assert not problems, "\n".join(sorted(problems))


def _rule_rows():
    return [line for line in (REPO / "docs" / "aws-rules.md").read_text().splitlines()
            if re.match(r"^\| [A-Z]+-\d+ \|", line)]


def test_every_cited_aws_rule_exists():
    rules = {row.split("|")[1].strip() for row in _rule_rows()}
    cited = {(path.relative_to(REPO), rule) for path, text in TEXTS for rule in RULE.findall(text)}
    assert len(cited) > 10
    assert not [c for c in cited if c[1] not in rules], sorted(c for c in cited
                                                               if c[1] not in rules)


def test_every_rule_in_the_doc_names_tests_that_exist():
    """docs/aws-rules.md: each rule's test column points at real tests."""
    rows = _rule_rows()
    assert len(rows) >= 20
    for row in rows:
        # `::name` is a test of the file named last before it, as a reader takes it.
        references = re.findall(r"`(tests/[\w/]+\.py)?::(\w+)`", row)
        assert references and references[0][0], row
        path = None
        for named, name in references:
            path = named or path
            assert f"def {name}(" in (REPO / path).read_text(), (path, name)


@pytest.mark.parametrize("text, found", [
    ("see stacks/network.py and ../docs/x.md", {"stacks/network.py", "../docs/x.md"}),
    ("the image's /tmp/dlc-constraints.txt, https://a.b/c/d.md", set()),
    ("(maskrcnn_job/data/layout.py)", {"maskrcnn_job/data/layout.py"}),
])
def test_the_path_pattern_finds_citations_and_leaves_urls_and_absolute_paths(text, found):
    assert set(PATH.findall(text)) == found
