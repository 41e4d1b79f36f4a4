"""Put first on PYTHONPATH of a test's subprocesses (notebook kernels, the CLI) and of the processes
on a played job's emulated hosts (tests/iam/plugin.py, PlayedJob): records their AWS calls into
the file MASKRCNN_IAM_RECORD names (tests/iam/recorder.py). Does nothing without it.

The recorder is installed when the process first imports botocore (botocore.session imports
botocore.handlers before any session exists): a process that never does (a training rank) neither
imports botocore nor pays for it, and one without botocore is left alone. A sitecustomize further
on sys.path, which this one hides from `site`, is run after it."""

import os
import sys


def _chain() -> None:
    """Runs the sitecustomize this one shadows, if any, as `site` would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get("MASKRCNN_IAM_RECORD"):
    import importlib.abc
    import importlib.util

    _RECORDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "recorder.py")

    def _install() -> None:
        spec = importlib.util.spec_from_file_location("maskrcnn_iam_recorder", _RECORDER)
        module = importlib.util.module_from_spec(spec)
        sys.modules["maskrcnn_iam_recorder"] = module
        spec.loader.exec_module(module)
        module.install(os.environ["MASKRCNN_IAM_RECORD"])

    class _ThenInstall(importlib.abc.Loader):
        """botocore.handlers' own loader, then the recorder's handlers added to its list."""

        def __init__(self, loader):
            self.loader = loader

        def create_module(self, spec):
            return self.loader.create_module(spec)

        def exec_module(self, module):
            module.__loader__ = module.__spec__.loader = self.loader
            self.loader.exec_module(module)
            _install()

    class _WhenBotocoreLoads(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "botocore.handlers":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.loader is not None:
                spec.loader = _ThenInstall(spec.loader)
            return spec

    sys.meta_path.insert(0, _WhenBotocoreLoads())

_chain()
