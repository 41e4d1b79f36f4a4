"""Records the AWS calls a test's code makes, at the botocore level.

Two handlers go into botocore's BUILTIN_HANDLERS, the list every botocore session registers when
it is created (moto's `mock_aws` hooks botocore the same way): `before-parameter-build` keeps the
request's parameters as the caller gave them, `after-call` records the call with the HTTP status
of its answer (the status matters: an S3 404 on a missing key is itself a permission question).

In the pytest process only the code under test counts: a call whose first frame outside the
libraries (and this module) is a test file (the tests' own set-up and assertions, FakeAws playing
a job) is not recorded; a call from the launcher, the job or the contract is, and so is a call
from a thread with no such frame (s3transfer's upload workers, started by the code under test).
In a subprocess (a notebook kernel, the CLI) and in every process on the emulated hosts of a
played job (the staging job, the training jobs: tests/iam/plugin.py, PlayedJob, which puts the file
in the play's work directory, seen by the hosts at the same path) `site/sitecustomize.py` installs
the recorder, once the process imports botocore, with every call counted, appending JSON lines to
the file RECORD_ENV names; the test reads that file once the processes are gone.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import sysconfig
import threading
from pathlib import Path
from typing import List, Optional

RECORD_ENV = "MASKRCNN_IAM_RECORD"
SITE_DIR = Path(__file__).resolve().parent / "site"
_TESTS = str(Path(__file__).resolve().parents[1]) + os.sep
_HERE = str(Path(__file__).resolve())
_LIBRARIES = tuple({p for p in (sysconfig.get_paths().get(k) for k in
                                ("stdlib", "platstdlib", "purelib", "platlib")) if p})
_CONTEXT_KEY = "maskrcnn_iam_params"

_lock = threading.Lock()
_calls: Optional[List[dict]] = None   # in-process recording, while a test records
_file: Optional[str] = None            # subprocess recording: the JSON-lines file
_installed = False


def install(record_file: Optional[str] = None) -> None:
    """Adds the handlers to botocore's built-in list (sessions created afterwards get them).
    With `record_file`, every call is appended to it (a subprocess); without, calls are kept in
    memory between `start` and `stop` (the pytest process), the tests' own calls left out."""
    global _installed, _file
    _file = record_file
    if _installed:
        return
    from botocore import handlers

    handlers.BUILTIN_HANDLERS.append(("before-parameter-build", _keep_params))
    handlers.BUILTIN_HANDLERS.append(("after-call", _record))
    _installed = True


def start() -> None:
    global _calls
    with _lock:
        _calls = []


def stop() -> List[dict]:
    """The calls recorded since `start`."""
    global _calls
    with _lock:
        calls, _calls = _calls or [], None
    return calls


def read_file(path: str) -> List[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def _keep_params(params, model, context, **_):
    if _file is not None or _calls is not None:
        context[_CONTEXT_KEY] = _plain(params)


def _record(http_response, parsed, model, context, **_):
    if _file is None and _calls is None:
        return
    if _file is None and _made_by_a_test():
        return
    service = model.service_model
    error = (parsed or {}).get("Error", {}) if isinstance(parsed, dict) else {}
    call = {
        "service": service.signing_name or service.endpoint_prefix,
        "service_name": service.service_name,
        "operation": model.name,
        "region": context.get("client_region"),
        "params": context.get(_CONTEXT_KEY, {}),
        "status": http_response.status_code,
        "error_code": error.get("Code"),
        # What a Create call made, for the rules that follow it to later calls (a model package
        # version's ARN is SageMaker's: tests/iam/implied.py registers_a_model_package).
        "created_arn": (parsed or {}).get("ModelPackageArn") if isinstance(parsed, dict) else None,
        "pid": os.getpid(),
    }
    if _file is not None:
        line = json.dumps(call, default=str) + "\n"
        with _lock, open(_file, "a", encoding="utf-8") as f:
            f.write(line)
        return
    with _lock:
        if _calls is not None:
            _calls.append(call)


def _made_by_a_test() -> bool:
    """Whether the first frame outside the libraries (and this module) is a test module's."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if not (path.startswith(_LIBRARIES) or path.startswith("<frozen")
                or "site-packages" in path or path == _HERE):
            return path.startswith(_TESTS)
        frame = frame.f_back
    return False


def _plain(value):
    """The parameters as JSON can hold them: bytes and streams by their size or kind only."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": len(value)}
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return {"__object__": type(value).__name__}

