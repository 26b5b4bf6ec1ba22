"""Copy a parsed YAML document into plain dicts and lists, recording where every value was, and
refuse what Kubernetes would not accept before any model sees it.

ruamel.yaml's round-trip nodes carry line and column numbers; the copy keeps them in a map from
field path to position, so that every later problem is reported as `file:line:col: field`.
While copying, values the API server refuses or that must not reach a terminal are problems
at their place: control characters and lone surrogates in strings, integers beyond 64 bits,
keys that are collections, nesting deeper than `MAXIMUM_DEPTH`, aliases that expand beyond
`MAXIMUM_VALUES` values or `MAXIMUM_TEXT_CHARACTERS` characters (a 'billion laughs' file) or
without end.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from .positions import Locations
from .problems import FieldPath, Problem
from .yaml_limits import MAXIMUM_DEPTH, MAXIMUM_FILE_BYTES, MAXIMUM_VALUES

MAXIMUM_TEXT_CHARACTERS = MAXIMUM_FILE_BYTES
"""The characters of all strings (keys included) a document may hold once its aliases are
expanded. Without aliases a document holds fewer than its file has bytes; an alias repeats a
string without repeating its bytes, and every later step reads each copy again (the secret
scan, the checks of characters, the written output)."""


INT64_RANGE = (-(2**63), 2**63 - 1)

ALLOWED_CONTROL_CHARACTERS = frozenset("\t\n")
"""Tabs and newlines are text (scripts in `args`, multi-line annotations); every other control
character (escape sequences, carriage returns, NUL) is refused."""


class TooManyValues(Exception):
    """The document holds more than `MAXIMUM_VALUES` values or `MAXIMUM_TEXT_CHARACTERS`
    characters (keys included) once its aliases are expanded, or an alias refers to a
    collection that holds it."""


def string_problem(text: str, *, key: bool = False) -> str | None:
    """Why a string cannot go into a Kubernetes object, or None: the API server refuses lone
    surrogates (not UTF-8), and control characters hide text on a terminal or in a review.
    A key (a name) may not hold tabs or newlines either."""
    allowed = frozenset() if key else ALLOWED_CONTROL_CHARACTERS
    for index, character in enumerate(text):
        category = unicodedata.category(character)
        if category == "Cs":
            return (f"contains a lone surrogate (U+{ord(character):04X}) at character "
                    f"{index + 1}, which is not Unicode text; allowed: any Unicode character")
        if category == "Cc" and character not in allowed:
            return (f"contains the control character U+{ord(character):04X} at character "
                    f"{index + 1}; allowed: printable text"
                    + ("" if key else ", tabs and newlines"))
    return None


class PlainCopier:
    """Copies ruamel round-trip data into plain dicts and lists, recording positions and
    collecting problems of values no field may hold."""

    def __init__(self, locations: Locations) -> None:
        self.locations = locations
        self.count = 0
        self.characters = 0
        self.active: set[int] = set()
        self.problems: list[Problem] = []

    def copy(self, node: Any, path: FieldPath) -> Any:
        self.count += 1
        if self.count > MAXIMUM_VALUES:
            raise TooManyValues
        if isinstance(node, CommentedMap | CommentedSeq):
            if len(path) >= MAXIMUM_DEPTH:
                self.problems.append(Problem(
                    path, f"nested more than {MAXIMUM_DEPTH} levels deep (through an alias); "
                    "a job spec needs far fewer"))
                return None
            if id(node) in self.active:
                raise TooManyValues
            self.active.add(id(node))
            try:
                return self._copy_collection(node, path)
            finally:
                self.active.discard(id(node))
        self._check_scalar(node, path, key=False)
        return node

    def _check_scalar(self, value: Any, path: FieldPath, *, key: bool) -> None:
        if isinstance(value, str):
            self.characters += len(value)
            if self.characters > MAXIMUM_TEXT_CHARACTERS:
                raise TooManyValues
            problem = string_problem(value, key=key)
            if problem is not None:
                self.problems.append(Problem(path, ("the key " if key else "") + problem,
                                             key=key))
        elif isinstance(value, int) and not isinstance(value, bool) and not (
            INT64_RANGE[0] <= value <= INT64_RANGE[1]
        ):
            self.problems.append(Problem(
                path, "is beyond the 64-bit integers Kubernetes stores "
                f"({INT64_RANGE[0]} to {INT64_RANGE[1]})", key=key))

    def _copy_collection(self, node: CommentedMap | CommentedSeq, path: FieldPath) -> Any:
        if isinstance(node, CommentedSeq):
            items = []
            for index, item in enumerate(node):
                self.locations.record((*path, index), _item_position(node, index), None,
                                      isinstance(item, CommentedMap | CommentedSeq))
                items.append(self.copy(item, (*path, index)))
            return items
        mapping: dict[Any, Any] = {}
        for key, value in node.items():
            self.count += 1  # the key, counted as the token walk counts it
            key_position = _key_position(node, key)
            value_position = _value_position(node, key, key_position)
            plain_key = isinstance(key, str | int | float | bool) or key is None
            child = (*path, str(key) if plain_key else f"(key {len(mapping) + 1})")
            self.locations.record(child, value_position, key_position,
                                  isinstance(value, CommentedMap | CommentedSeq))
            if not plain_key:
                self.problems.append(Problem(
                    child, "a key must be a plain string, not a list or mapping", key=True))
                continue
            self._check_scalar(key, child, key=True)
            mapping[str(key) if isinstance(key, str) else key] = self.copy(value, child)
        return mapping


def node_position(node: Any) -> tuple[int, int]:
    try:
        return int(node.lc.line), int(node.lc.col)
    except (AttributeError, TypeError):
        return 0, 0


def _key_position(node: CommentedMap, key: Any) -> tuple[int, int]:
    try:
        line, column = node.lc.key(key)
        return int(line), int(column)
    except (KeyError, TypeError, AttributeError):
        return node_position(node)


def _value_position(node: CommentedMap, key: Any, fallback: tuple[int, int]) -> tuple[int, int]:
    try:
        line, column = node.lc.value(key)
        return int(line), int(column)
    except (KeyError, TypeError, AttributeError):
        return fallback


def _item_position(node: CommentedSeq, index: int) -> tuple[int, int]:
    try:
        line, column = node.lc.item(index)
        return int(line), int(column)
    except (KeyError, TypeError, AttributeError, IndexError):
        return node_position(node)
