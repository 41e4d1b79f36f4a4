"""A request held to every constraint of botocore's service model, as AWS holds it.

botocore checks a request's types, required members and minimums before sending it, but not its
maximums, patterns or enums; moto checks few of them. The fake SageMaker refuses what this finds,
so that a request the real service would refuse for a name pattern or a length does not pass the
launcher's tests (docs/aws-rules.md TUN-1, TUN-2). Patterns are applied to the whole value, as the
API reference's "Pattern" constraints are.
"""

import re
from typing import List

import botocore.session

_MODELS = {}


def _model(service: str):
    if service not in _MODELS:
        _MODELS[service] = botocore.session.get_session().get_service_model(service)
    return _MODELS[service]


def problems(service: str, operation: str, params) -> List[str]:
    """Every constraint of `operation`'s input that `params` breaks, each with its path."""
    shape = _model(service).operation_model(operation).input_shape
    found: List[str] = []
    _check(shape, params, operation, found)
    return found


def _pattern(text):
    """The compiled pattern; None for one of Unicode classes (\\p{L}: tag keys and values), which
    Python's re lacks: those are not checked (the launcher sends no tags)."""
    if not text:
        return None
    try:
        return re.compile(text)
    except re.error:
        return None


def _bounds(shape, size, path: str, what: str, found: List[str]) -> None:
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    if low is not None and size < low:
        found.append(f"{path}: {what} {size} is below the minimum {low}")
    if high is not None and size > high:
        found.append(f"{path}: {what} {size} is above the maximum {high}")


def _check(shape, value, path: str, found: List[str]) -> None:
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            found.append(f"{path}: expected a structure")
            return
        for name in shape.required_members:
            if name not in value:
                found.append(f"{path}.{name}: required")
        for name, member in value.items():
            if name not in shape.members:
                found.append(f"{path}.{name}: not a member of {shape.name}")
            else:
                _check(shape.members[name], member, f"{path}.{name}", found)
    elif kind == "list":
        _bounds(shape, len(value), path, "length", found)
        for index, item in enumerate(value):
            _check(shape.member, item, f"{path}[{index}]", found)
    elif kind == "map":
        _bounds(shape, len(value), path, "entries", found)
        for key, item in value.items():
            _check(shape.key, key, f"{path} key {key!r}", found)
            _check(shape.value, item, f"{path}[{key!r}]", found)
    elif kind == "string":
        if not isinstance(value, str):
            found.append(f"{path}: expected a string, got {value!r}")
            return
        _bounds(shape, len(value), path, "length", found)
        enum = shape.metadata.get("enum")
        if enum and value not in enum:
            found.append(f"{path}: {value!r} is not one of {enum}")
        pattern = _pattern(shape.metadata.get("pattern"))
        if pattern and not pattern.fullmatch(value):
            found.append(f"{path}: {value!r} does not match {pattern.pattern}")
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            found.append(f"{path}: expected an integer, got {value!r}")
            return
        _bounds(shape, value, path, "value", found)
