"""The field of each explicit YAML tag in a job file, for its problem.

An explicit tag is refused before any document is built (`yaml_limits.check_tokens`): the YAML
library would construct the value as the tag says, and fail in ways no message locates
(`!!int x`, `!!bool maybe`) or make a value no field holds. Tokens know where a tag is but not
the field it stands in; the parser's events do (a key, then its value; the items of a list),
and constructing nothing, they cannot fail on a tag. So, only for a file with tags, its events
are walked once, the path of every node recorded, and each tag's problem gets the field of the
node that starts where it is. An alias is one event, so the walk is linear in the file however
its aliases expand. A key shaped like a credential is shown as `(hidden key)`, as the secret
scan shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    DocumentStartEvent,
    MappingStartEvent,
    NodeEvent,
    ScalarEvent,
)

from .credential_shapes import VALUE_DETECTORS
from .problems import FieldPath, LocatedProblem
from .yaml_limits import EXPLICIT_TAG

HIDDEN_KEY = "(hidden key)"


@dataclass
class _Collection:
    """A list or mapping being walked: its path, and where the next node goes in it."""

    path: FieldPath
    mapping: bool
    items: int = 0
    key: str | None = field(default=None)
    """In a mapping, the key whose value comes next; None when a key comes next."""

    def child(self, event: Any) -> FieldPath:
        """The path of the node `event` starts, which is in this collection."""
        if not self.mapping:
            return (*self.path, self.items)
        if self.key is None:  # the node is a key: the path of the field it names
            return (*self.path, self._name(event))
        return (*self.path, self.key)

    def _name(self, event: Any) -> str:
        if isinstance(event, ScalarEvent):
            name = str(event.value)
            return HIDDEN_KEY if any(detector.found(name) for detector in VALUE_DETECTORS) \
                else name
        return f"(key {self.items + 1})"

    def passed(self, event: Any) -> None:
        """The node `event` started has ended."""
        if not self.mapping:
            self.items += 1
        elif self.key is None:
            self.key = self._name(event)
        else:
            self.key = None
            self.items += 1


def _events(text: str) -> Iterator[Any]:
    """libyaml's events where it parses the text, else the pure-Python parser's."""
    try:
        from _ruamel_yaml import CParser  # type: ignore[import-not-found]
    except ImportError:
        yield from YAML(typ="rt").parse(text)
        return
    parser = CParser(text)
    try:
        events = []
        while (event := parser.get_event()) is not None:
            events.append(event)
    except (YAMLError, ValueError, TypeError):
        events = list(YAML(typ="rt").parse(text))
    finally:
        parser.dispose()
    yield from events


def tagged_fields(text: str) -> dict[tuple[int, int], FieldPath]:
    """The field path of every node with an explicit tag, by the line and column (from 0)
    where the node starts; in a file of several documents, each path is its document's."""
    found: dict[tuple[int, int], FieldPath] = {}
    open_collections: list[_Collection] = []
    for event in _events(text):
        if isinstance(event, DocumentStartEvent):
            open_collections = []
        elif isinstance(event, NodeEvent):
            parent = open_collections[-1] if open_collections else None
            path = parent.child(event) if parent is not None else ()
            if getattr(event, "tag", None) is not None:  # an alias has none
                found.setdefault((event.start_mark.line, event.start_mark.column), path)
            if isinstance(event, ScalarEvent | AliasEvent):
                if parent is not None:
                    parent.passed(event)
            else:
                open_collections.append(
                    _Collection(path, isinstance(event, MappingStartEvent)))
        elif isinstance(event, CollectionEndEvent) and open_collections:
            open_collections.pop()
            if open_collections:
                open_collections[-1].passed(event)
    return found


def with_tag_fields(problems: list[LocatedProblem], text: str) -> list[LocatedProblem]:
    """`problems` with each explicit tag's problem given the field it stands in (when the
    parser reads the file at all; else it keeps the document's place)."""
    if not any(problem.message == EXPLICIT_TAG for problem in problems):
        return problems
    try:
        fields = tagged_fields(text)
    except (YAMLError, AssertionError):  # ruamel asserts on a %YAML version it does not know
        return problems
    located = []
    for problem in problems:
        where = (problem.location.line - 1, problem.location.column - 1)
        if problem.message == EXPLICIT_TAG and where in fields:
            problem = replace(problem, path=fields[where])
        located.append(problem)
    return located
