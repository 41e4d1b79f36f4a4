"""What the training image's Dockerfile installs, read from its RUN lines as the shell runs them.

Every installer is recognized under the names a RUN line may give it (pip, pip3, python -m pip,
python3 -m pip, uv pip; dnf, yum, microdnf, apt-get, apt), each command of a line on its own
(`&&`, `||`, `;`, `|`); a RUN line that holds the word "install" anywhere else, or that cannot be
read as a shell line, fails naming it: a check of what the image installs must not pass an
install it did not see (tests/training/test_image_rehearsal.py, tests/infra/test_training.py).
"""

import dataclasses
import json
import os
import re
import shlex
from pathlib import Path
from typing import List, Tuple

from tests.paths import TRAINING_CODE

DOCKERFILE = TRAINING_CODE / "Dockerfile"
PIP, SYSTEM = "pip", "system"
# An installer's words up to its `install`, with pip3, python3.12 and a program's path made plain.
INSTALLERS = {("pip", "install"): PIP, ("python", "-m", "pip", "install"): PIP,
              ("uv", "pip", "install"): PIP,
              ("dnf", "install"): SYSTEM, ("yum", "install"): SYSTEM,
              ("microdnf", "install"): SYSTEM, ("apt-get", "install"): SYSTEM,
              ("apt", "install"): SYSTEM}
_OPERATORS = re.compile(r"[;&|()]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class UnreadableInstall(AssertionError):
    """A RUN line that says "install" where no recognized installer does."""


@dataclasses.dataclass(frozen=True)
class Install:
    kind: str               # PIP or SYSTEM
    installer: str          # as the line gives it, e.g. "pip3 install"
    arguments: List[str]    # the words after `install`
    line: str               # the RUN line, continuations joined


def run_lines(path: Path = DOCKERFILE) -> List[str]:
    """The RUN instructions of `path`, each on one line: comment lines dropped (as Docker drops
    them, inside a continuation too), continuations joined."""
    kept = [line for line in Path(path).read_text().splitlines()
            if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\[ \t]*\n", " ", "\n".join(kept))
    return [line.strip() for line in joined.splitlines() if re.match(r"\s*RUN\s", line, re.I)]


def _commands(line: str) -> List[List[str]]:
    """The simple commands of a RUN line, as words (shell form, or the exec form's JSON array)."""
    body = re.sub(r"^\s*RUN\s+", "", line, flags=re.I)
    while body.startswith("--"):  # RUN's own flags: --mount=..., --network=...
        body = body.split(None, 1)[1] if " " in body else ""
    if body.startswith("["):
        return [json.loads(body)]
    if "<<" in body:
        raise UnreadableInstall(f"a here-document is not read here: {line}")
    lexer = shlex.shlex(body, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands = [[]]
    for token in lexer:  # raises ValueError on an unclosed quote
        if _OPERATORS.fullmatch(token):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _plain(word: str) -> str:
    name = os.path.basename(word)
    return re.sub(r"^(pip|python)3?(\.\d+)?$", r"\1", name)


def _install(words: List[str], line: str):
    while words and _ASSIGNMENT.match(words[0]):  # VAR=value before the program
        words = words[1:]
    for prefix, kind in INSTALLERS.items():
        if tuple(_plain(w) if k < len(prefix) - 1 else w
                 for k, w in enumerate(words[:len(prefix)])) == prefix:
            return Install(kind, " ".join(words[:len(prefix)]), words[len(prefix):], line)
    return None


def installs(path: Path = DOCKERFILE) -> List[Install]:
    """Every install of `path`'s RUN lines, in order; UnreadableInstall naming a line that says
    "install" where no recognized installer does."""
    found = []
    for line in run_lines(path):
        try:
            commands = _commands(line)
        except ValueError as error:
            if "install" in line:
                raise UnreadableInstall(f"{error}: {line}") from None
            continue
        for words in commands:
            install = _install(words, line)
            if install is not None:
                found.append(install)
            elif any("install" in word for word in words):
                raise UnreadableInstall(
                    f"a command says install, but no installer this test knows runs it "
                    f"({', '.join(' '.join(p) for p in INSTALLERS)}): {' '.join(words)!r} "
                    f"in {line}")
    return found


def pip_installs(path: Path = DOCKERFILE) -> List[List[str]]:
    """The arguments of each pip install of `path`, in order."""
    return [i.arguments for i in installs(path) if i.kind == PIP]


def system_installs(path: Path = DOCKERFILE) -> List[Tuple[str, List[str]]]:
    return [(i.installer, i.arguments) for i in installs(path) if i.kind == SYSTEM]
