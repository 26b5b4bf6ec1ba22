"""Turn pydantic's validation errors into messages that say what is wrong and what is allowed.

Pydantic reports union members and regular expressions; a user needs the field, the rule in words
and, for an unknown field, the field to use instead (`misplaced_fields.py`: a Kubeflow TFJob's
fields, a pod's field beside a role's) or else the fields allowed there. A misspelt field name or
enum value also gets the allowed one clearly closest to it (`suggestions.py`: "did you mean
'release'?"), and a required field such a suggestion names is not reported missing as well.
Input values are never echoed, so an error cannot leak a secret that was typed into the wrong
field: a suggestion is always one of the allowed names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from . import models
from .misplaced_fields import unknown_field_hints, value_advice
from .problems import FieldPath
from .suggestions import closest, did_you_mean

PATTERN_DESCRIPTIONS = {
    models.DNS_1035_LABEL_PATTERN: (
        "must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter and "
        "ending with a letter or digit"
    ),
    models.DNS_LABEL_PATTERN: (
        "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter "
        "or digit"
    ),
    models.DNS_SUBDOMAIN_PATTERN: (
        "must be a Kubernetes object name: lowercase letters, digits, '-' and '.', starting and "
        "ending with a letter or digit"
    ),
    models.QUALIFIED_NAME_PATTERN: (
        "must be a qualified name such as 'team' or 'example.com/team': letters, digits, '-', '_' "
        "and '.', at most 63 characters after an optional DNS prefix and '/'"
    ),
    models.LABEL_VALUE_PATTERN: (
        "must be a label value: at most 63 letters, digits, '-', '_' and '.', starting and ending "
        "with a letter or digit (or empty)"
    ),
    models.ENVIRONMENT_NAME_PATTERN: (
        "must be an environment variable name: letters, digits, '_', '-' and '.', not starting "
        "with a digit"
    ),
    models.METRIC_NAME_PATTERN: (
        "must be a metric name of the result: at most 63 letters, digits, '_', '-' and '.', "
        "starting with a letter or '_'"
    ),
    models.CONFIG_KEY_PATTERN: (
        "must be a key of a Secret or ConfigMap: letters, digits, '-', '_' and '.'"
    ),
    models.QUANTITY_PATTERN: "must be a Kubernetes quantity such as 500m, 4, 1.5 or 16Gi",
    models.ABSOLUTE_PATH_PATTERN: "must be an absolute path such as /mnt/shared",
    models.DURATION_PATTERN: (
        "must be a duration in hours, minutes and seconds, in that order, such as 48h, 90m, "
        "1h30m or 45s"
    ),
    models.OVERLAY_NAME_PATTERN: (
        "must be the name of a directory under overlays/: lowercase letters, digits, '-' and '_'"
    ),
}

TYPE_MESSAGES = {
    "string_type": "must be a string (quote numbers and booleans)",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
}


def _strip_union_tags(location: tuple[Any, ...], data: Any) -> tuple[FieldPath, bool]:
    """Drop the union-member and `[key]` tags pydantic adds, keeping only real data keys."""
    path: list[str | int] = []
    current = data
    on_key = False
    for part in location:
        if part == "[key]":
            on_key = True
            continue
        in_mapping = isinstance(current, dict) and isinstance(part, str) and part in current
        in_list = (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        )
        if in_mapping or in_list:
            path.append(part)
            current = current[part]
        elif isinstance(part, str) and not isinstance(current, dict | list):
            continue  # a union member tag after a scalar
        elif isinstance(current, dict) and isinstance(part, str):
            path.append(part)  # a missing field, or an extra one
            current = None
        else:
            continue
    return tuple(path), on_key


def _model_at(path: FieldPath) -> type[BaseModel] | None:
    """The spec model that describes the mapping at `path`, to list its allowed fields: the
    fields of models are followed by name, and items of lists and values of mappings
    (`storage.volumes[0]`, `env.NAME`) by the type of their items."""
    model: Any = models.TrainingJob
    for part in path:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = next(
                (f for name, f in model.model_fields.items() if (f.alias or name) == part), None
            )
            if field is None:
                return None
            model = field.annotation
        else:
            model = _item_type(model, part)
        model = _unwrap(model)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _item_type(annotation: Any, part: str | int) -> Any:
    """The type of the item `part` of a list (an index) or a mapping (a key), or None."""
    origin = get_origin(annotation)
    arguments = get_args(annotation)
    if origin is list and isinstance(part, int) and arguments:
        return arguments[0]
    if origin is dict and isinstance(part, str) and len(arguments) == 2:
        return arguments[1]
    return None


def _unwrap(annotation: Any) -> Any:
    """The model in an optional or union type (`Storage | None`), else a list or mapping type
    (its `Annotated` metadata dropped), else the annotation itself."""
    if get_origin(annotation) is Annotated:
        return _unwrap(get_args(annotation)[0])
    if get_origin(annotation) not in {Union, UnionType}:
        return annotation
    members = [_unwrap(member) for member in get_args(annotation)]
    return next((member for member in members
                 if isinstance(member, type) and issubclass(member, BaseModel)),
                next((member for member in members if get_origin(member) in {list, dict}),
                     annotation))


def allowed_fields(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _value_at(data: Any, path: FieldPath) -> Any:
    for part in path:
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if not in_list and not (isinstance(data, dict) and part in data):
            return None
        data = data[part]
    return data


def _fields_beside(path: FieldPath) -> list[str]:
    """The fields allowed in the mapping that holds the field at `path` (none when no model
    describes it)."""
    parent = _model_at(path[:-1])
    return allowed_fields(parent) if parent is not None else []


def _suggested_field(path: FieldPath) -> FieldPath | None:
    """The path of the allowed field clearly closest to the unknown one at `path`, or None."""
    found = closest(str(path[-1]), _fields_beside(path)) if path else None
    return None if found is None else (*path[:-1], found)


def _expected_values(expected: str) -> list[str]:
    """The values pydantic's `expected` lists (`'idle' or 'release'`): the spec's enum values
    and literals hold no quote."""
    return re.findall(r"'([^']*)'", expected)


def _message(error: Any, path: FieldPath, value: Any = None) -> str:
    kind = error["type"]
    context = error.get("ctx") or {}
    if kind == "literal_error" and (advice := value_advice(path, value)) is not None:
        return f"must be {context.get('expected')}: this is {advice}"
    if kind == "extra_forbidden":
        allowed = _fields_beside(path)
        if not allowed:
            return "unknown field"
        return (f"unknown field; allowed here: {', '.join(allowed)}"
                + did_you_mean(path[-1], allowed))
    if kind == "missing":
        return "required field is missing"
    if kind == "string_pattern_mismatch":
        pattern = context.get("pattern", "")
        return PATTERN_DESCRIPTIONS.get(pattern, "has a form that is not allowed")
    if kind in {"literal_error", "enum"}:
        expected = str(context.get("expected", ""))
        stem = "must be" if kind == "literal_error" else "must be one of"
        return f"{stem} {expected}" + did_you_mean(value, _expected_values(expected))
    if kind in {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}:
        bound = {
            "greater_than_equal": "at least",
            "less_than_equal": "at most",
            "greater_than": "more than",
            "less_than": "less than",
        }[kind]
        limit = next(iter(context.values()), "?")
        return f"must be {bound} {limit}"
    if kind == "string_too_long":
        return f"must be at most {context.get('max_length')} characters"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "value_error":
        return str(context.get("error", "is not allowed here"))
    return TYPE_MESSAGES.get(kind, "has a type or form that is not allowed here")


def describe_validation_error(
    error: ValidationError, data: Any
) -> Iterator[tuple[FieldPath, str, bool]]:
    """(field path, message, whether it is about the key) for each distinct problem."""
    items = [(item, *_strip_union_tags(tuple(item["loc"]), data))
             for item in error.errors(include_input=False, include_url=False)]
    advised = {path: list(unknown_field_hints(path, _value_at(data, path)))
               for item, path, _ in items if item["type"] == "extra_forbidden"}
    suggested = {_suggested_field(path) for path, hints in advised.items() if not hints}
    seen: set[FieldPath] = set()
    for item, path, on_key in items:
        if path in seen:
            continue  # the other members of a union say the same thing less clearly
        seen.add(path)
        if item["type"] == "missing" and path in suggested:
            continue  # the unknown field beside it says "did you mean" this one
        if item["type"] == "extra_forbidden":
            hints = advised[path]
            for hinted, advice in hints:
                yield hinted, f"unknown field; {advice}", True
            if hints:
                continue
            on_key = True
        yield path, _message(item, path, _value_at(data, path)), on_key
