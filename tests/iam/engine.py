"""The Python side of the IAM policy evaluation engine: one `node tests/iam/simulate.mjs` process
per pytest process, asked one JSON line per request, its answers cached.

The engine is @cloud-copilot/iam-simulate (package.json, a devDependency): AGPL-3.0-or-later,
used by the tests only and never shipped.
"""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from tests import cpu_time

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).resolve().parent / "simulate.mjs"
PACKAGE = ROOT / "node_modules" / "@cloud-copilot" / "iam-simulate"


class EngineError(RuntimeError):
    """The engine refused a request: an unknown action, a resource of a type the action does not
    take, a context key the action does not know, an invalid policy."""


@dataclass(frozen=True)
class Decision:
    result: str                 # Allowed, ImplicitlyDenied, ExplicitlyDenied
    decisive: Tuple[str, ...]   # the statements that decided it
    near_misses: Tuple[str, ...]  # statements naming the action and resource whose conditions failed
    resource_result: Optional[str] = None

    @property
    def allowed(self) -> bool:
        return self.result == "Allowed"


class Engine:
    def __init__(self):
        if not PACKAGE.is_dir():
            raise EngineError(f"{PACKAGE.relative_to(ROOT)} is missing: run `npm ci` (make setup "
                              "does) to install the IAM policy evaluation engine")
        node = shutil.which("node")
        if node is None:
            raise EngineError("node is not on PATH: the IAM evaluation needs Node.js")
        self._process = subprocess.Popen([node, str(RUNNER)], cwd=ROOT, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, bufsize=1)
        self._lock = threading.Lock()
        self._next_id = 0
        self._cache: Dict[str, Decision] = {}
        self._cpu_seconds = 0.0
        atexit.register(self.close)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait(timeout=10)

    def evaluate(self, simulation: dict) -> Decision:
        """The decision on one request (a `runSimulation` input), cached by its whole input."""
        key = json.dumps(simulation, sort_keys=True)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
            self._next_id += 1
            self._process.stdin.write(json.dumps({"id": self._next_id, "simulation": simulation})
                                      + "\n")
            line = self._process.stdout.readline()
            if not line:
                raise EngineError(f"{RUNNER.name} exited with {self._process.poll()}")
            answer = json.loads(line)
            # The engine is waited for only at the end: its CPU counts for the test that asked.
            cpu_time.add_waited(answer["cpuSeconds"] - self._cpu_seconds)
            self._cpu_seconds = answer["cpuSeconds"]
            if "error" in answer:
                raise EngineError(json.dumps(answer["error"]))
            decision = Decision(answer["result"], tuple(answer.get("decisive", ())),
                                tuple(answer.get("nearMisses", ())),
                                answer.get("resourceResult"))
            self._cache[key] = decision
            return decision


_engine: Optional[Engine] = None


def engine() -> Engine:
    global _engine
    if _engine is None:
        _engine = Engine()
    return _engine


def simulation(principal: str, action: str, resource: str, account: str, context: dict,
               identity_policies: List[dict], resource_policy: Optional[dict] = None) -> dict:
    """A `runSimulation` input: no organization policies (the deployment sets none)."""
    value = {
        "request": {"principal": principal, "action": action,
                    "resource": {"resource": resource, "accountId": account},
                    "contextVariables": context},
        "identityPolicies": identity_policies,
        "serviceControlPolicies": [],
        "resourceControlPolicies": [],
    }
    if resource_policy is not None:
        value["resourcePolicy"] = resource_policy
    return value
