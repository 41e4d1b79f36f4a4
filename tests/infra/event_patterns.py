"""EventBridge's event-pattern matching, for exactly the syntax this project's rules use.

The CDK pipeline's synth step runs tests/infra in a virtual environment made from
requirements-infra.txt alone (no moto, no botocore), so the rules' patterns are evaluated here
rather than with moto's matcher. tests/infra/test_monitoring.py holds this evaluator to the
EventBridge user guide's rules and examples everywhere and, where moto is installed
(requirements-dev.txt), to moto's matcher on the same cases and on the rules' own patterns.

What it implements, as the EventBridge user guide describes it ("Amazon EventBridge event
patterns", "Content filtering in Amazon EventBridge event patterns"):
- a pattern is a JSON object; every field it names must be in the event at the same nesting (the
  fields are ANDed); a nested object is matched against the event's object at that field;
- a leaf is a non-empty array of filters, any one of which may match (OR): a string matches an
  equal string, exactly and case-sensitively; `{"prefix": "<s>"}` matches a string that starts
  with `<s>`;
- an event value that is an array matches if one of its elements does ("Matching on arrays").
Anything else (a number or null filter, suffix, wildcard, anything-but, exists, equals-ignore-case,
`$or`, ...) raises UnsupportedPattern: a rule that starts using it needs this evaluator and its
tests extended first, rather than a wrong answer.
"""

from __future__ import annotations

_MISSING = object()


class UnsupportedPattern(ValueError):
    """The pattern uses syntax this evaluator does not implement."""


def matches(pattern: dict, event: dict) -> bool:
    """Whether EventBridge would deliver `event` to a rule of `pattern`."""
    check(pattern)
    return _object_matches(pattern, event)


def check(pattern, path: str = "") -> None:
    """Raises UnsupportedPattern unless the pattern uses only nesting, exact strings and prefix."""
    if not isinstance(pattern, dict) or not pattern:
        raise UnsupportedPattern(f"{path or 'the pattern'}: {pattern!r} is not an object of fields")
    for key, value in pattern.items():
        where = f"{path}.{key}" if path else key
        if key.startswith("$"):
            raise UnsupportedPattern(f"{where}: the operator {key} is not implemented")
        if isinstance(value, dict):
            check(value, where)
        elif isinstance(value, list) and value:
            for item in value:
                if not (isinstance(item, str) or (isinstance(item, dict) and set(item) == {"prefix"}
                                                   and isinstance(item["prefix"], str))):
                    raise UnsupportedPattern(f"{where}: the filter {item!r} is not implemented "
                                             "(exact strings and {'prefix': <string>} are)")
        else:
            raise UnsupportedPattern(f"{where}: {value!r} is neither an object nor a non-empty array")


def _object_matches(pattern: dict, event) -> bool:
    if not isinstance(event, dict):
        return False
    for key, value in pattern.items():
        field = event.get(key, _MISSING)
        if isinstance(value, dict):
            if not _object_matches(value, field):
                return False
        elif not _leaf_matches(value, field):
            return False
    return True


def _leaf_matches(filters: list, value) -> bool:
    values = value if isinstance(value, list) else [value]
    return any(_filter_matches(f, v) for f in filters for v in values)


def _filter_matches(pattern_filter, value) -> bool:
    if not isinstance(value, str):  # a missing field, a number, null, an object
        return False
    if isinstance(pattern_filter, str):
        return value == pattern_filter
    return value.startswith(pattern_filter["prefix"])
