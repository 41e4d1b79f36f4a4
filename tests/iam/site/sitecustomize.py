"""Put first on PYTHONPATH of a test's subprocesses (notebook kernels, the CLI): records their AWS
calls into the file MASKRCNN_IAM_RECORD names (tests/iam/recorder.py). Does nothing without it,
or where botocore is not installed."""

import os

if os.environ.get("MASKRCNN_IAM_RECORD"):
    try:
        import importlib.util
        import sys

        _path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "recorder.py")
        _spec = importlib.util.spec_from_file_location("maskrcnn_iam_recorder", _path)
        _module = importlib.util.module_from_spec(_spec)
        sys.modules["maskrcnn_iam_recorder"] = _module
        _spec.loader.exec_module(_module)
        _module.install(os.environ["MASKRCNN_IAM_RECORD"])
    except ImportError:
        pass
