"""Load `job.yaml` files into `TrainingJob` models, keeping where every value came from.

ruamel.yaml is used (not PyYAML) because its round-trip nodes carry line and column numbers; the
document is copied into plain data with a map from field path to position, so that pydantic's
errors and the rules' problems can all be reported as `file:line:col: field: message`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from .messages import describe_validation_error
from .models import KIND, TrainingJob
from .problems import FieldPath, LocatedProblem, Location, Problem, SpecError
from .rules import check_rules

MAXIMUM_VALUES = 100_000
"""More values than this after expanding aliases is refused (a 'billion laughs' file)."""

MAXIMUM_SCRIPT_BYTES = 900 * 1024
"""A ConfigMap holds at most 1 MiB; leave room for the launcher and metadata."""

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Script:
    """The training script shipped in a ConfigMap."""

    file_name: str
    text: str


class Locations:
    """Positions of the values (and keys) of one YAML document, by field path."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._values: dict[FieldPath, tuple[int, int]] = {}
        self._keys: dict[FieldPath, tuple[int, int]] = {}
        self._collections: set[FieldPath] = set()

    def record(
        self,
        path: FieldPath,
        value: tuple[int, int],
        key: tuple[int, int] | None,
        collection: bool = False,
    ) -> None:
        self._values.setdefault(path, value)
        if key is not None:
            self._keys.setdefault(path, key)
        if collection:
            self._collections.add(path)

    def locate(self, path: FieldPath, *, key: bool = False) -> Location:
        """The position of `path`, or of its nearest parent that the file has. A mapping or
        list is located at its key (`roles:`), a scalar at its value."""
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            on_key = key if end == len(path) else True
            table = self._keys if on_key or prefix in self._collections else self._values
            if prefix in table:
                line, column = table[prefix]
                return Location(self.file, line + 1, column + 1)
            if prefix in self._values:
                line, column = self._values[prefix]
                return Location(self.file, line + 1, column + 1)
        return Location(self.file, 1, 1)


@dataclass(frozen=True)
class LoadedJob:
    """A valid job spec with its source file, script and value positions."""

    job: TrainingJob
    source: Path
    script: Script | None
    locations: Locations

    def locate(self, problem: Problem) -> LocatedProblem:
        location = self.locations.locate(problem.path, key=problem.key)
        return LocatedProblem(location, problem.path, problem.message)

    def fail(self, problems: Iterable[Problem]) -> SpecError:
        return SpecError([self.locate(problem) for problem in problems])


class _TooManyValues(Exception):
    pass


class _PlainCopier:
    """Copies ruamel round-trip data into plain dicts and lists, recording positions."""

    def __init__(self, locations: Locations) -> None:
        self.locations = locations
        self.count = 0
        self.active: set[int] = set()

    def copy(self, node: Any, path: FieldPath, position: tuple[int, int]) -> Any:
        self.count += 1
        if self.count > MAXIMUM_VALUES:
            raise _TooManyValues
        if isinstance(node, CommentedMap | CommentedSeq):
            if id(node) in self.active:
                raise _TooManyValues
            self.active.add(id(node))
            try:
                return self._copy_collection(node, path)
            finally:
                self.active.discard(id(node))
        return node

    def _copy_collection(self, node: CommentedMap | CommentedSeq, path: FieldPath) -> Any:
        if isinstance(node, CommentedSeq):
            items = []
            for index, item in enumerate(node):
                position = _item_position(node, index)
                self.locations.record((*path, index), position, None,
                                      isinstance(item, CommentedMap | CommentedSeq))
                items.append(self.copy(item, (*path, index), position))
            return items
        mapping: dict[Any, Any] = {}
        for key, value in node.items():
            key_position = _key_position(node, key)
            value_position = _value_position(node, key, key_position)
            child = (*path, str(key))
            self.locations.record(child, value_position, key_position,
                                  isinstance(value, CommentedMap | CommentedSeq))
            mapping[str(key) if isinstance(key, str) else key] = self.copy(
                value, child, value_position
            )
        return mapping


def _node_position(node: Any) -> tuple[int, int]:
    try:
        return int(node.lc.line), int(node.lc.col)
    except (AttributeError, TypeError):
        return 0, 0


def _key_position(node: CommentedMap, key: Any) -> tuple[int, int]:
    try:
        line, column = node.lc.key(key)
        return int(line), int(column)
    except (KeyError, TypeError, AttributeError):
        return _node_position(node)


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
        return _node_position(node)


def display_path(path: Path) -> str:
    """A path as the user should read it: relative to the working directory when inside it."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def _read_documents(path: Path, shown: str) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise SpecError(
            [LocatedProblem(Location(shown, 1, 1), (), f"not UTF-8 text ({error.reason})")]
        ) from None
    except OSError as error:
        raise SpecError(
            [LocatedProblem(Location(shown, 1, 1), (), f"cannot read: {error.strerror}")]
        ) from None
    parser = YAML(typ="rt")
    try:
        return [document for document in parser.load_all(text) if document is not None]
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        reason = " ".join(str(part) for part in (error.context, error.problem) if part)
        _raise_yaml(shown, line, column, reason or "invalid YAML")
    except YAMLError as error:
        _raise_yaml(shown, 1, 1, f"invalid YAML: {error}")


def _raise_yaml(shown: str, line: int, column: int, reason: str) -> NoReturn:
    first_line = reason.strip().splitlines()[0] if reason.strip() else "invalid YAML"
    raise SpecError(
        [LocatedProblem(Location(shown, line, column), (), f"invalid YAML: {first_line}")]
    )


def load_jobs(path: Path) -> list[LoadedJob]:
    """Every `TrainingJob` document of one file; raises `SpecError` with all problems found."""
    shown = display_path(path)
    problems: list[LocatedProblem] = []
    loaded: list[LoadedJob] = []
    documents = _read_documents(path, shown)
    if not documents:
        raise SpecError([LocatedProblem(Location(shown, 1, 1), (), "the file has no document")])
    for document in documents:
        try:
            loaded.append(_load_document(document, path, shown))
        except SpecError as error:
            problems.extend(error.problems)
    if problems:
        raise SpecError(problems)
    return loaded


def _load_document(document: Any, path: Path, shown: str) -> LoadedJob:
    locations = Locations(shown)
    locations.record((), _node_position(document), None)
    copier = _PlainCopier(locations)
    try:
        data = copier.copy(document, (), _node_position(document))
    except (_TooManyValues, RecursionError):
        raise SpecError(
            [
                LocatedProblem(
                    locations.locate(()),
                    (),
                    f"the document expands to more than {MAXIMUM_VALUES} values through YAML "
                    "aliases (or an alias refers to itself); write the values out instead",
                )
            ]
        ) from None
    if not isinstance(data, dict):
        raise SpecError(
            [LocatedProblem(locations.locate(()), (), f"expected a mapping with kind: {KIND}")]
        )
    try:
        job = TrainingJob.model_validate(data)
    except ValidationError as error:
        raise SpecError(
            [
                LocatedProblem(locations.locate(path_, key=on_key), path_, message)
                for path_, message, on_key in describe_validation_error(error, data)
            ]
        ) from None
    problems = list(check_rules(job))
    script, script_problems = _read_script(job, path)
    problems.extend(script_problems)
    loaded = LoadedJob(job=job, source=path, script=script, locations=locations)
    if problems:
        raise loaded.fail(problems)
    return loaded


def _read_script(job: TrainingJob, source: Path) -> tuple[Script | None, list[Problem]]:
    if job.spec.script is None:
        return None, []
    where = ("spec", "script")
    script_path = source.parent / job.spec.script
    if not script_path.is_file():
        return None, [
            Problem(where, f"no file {job.spec.script!r} next to {source.name} (the path is "
                    "relative to the job file's directory)")
        ]
    content = script_path.read_bytes()
    if len(content) > MAXIMUM_SCRIPT_BYTES:
        return None, [
            Problem(where, f"the script is {len(content)} bytes; a ConfigMap holds at most "
                    f"{MAXIMUM_SCRIPT_BYTES} here: ship it in the image instead")
        ]
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None, [Problem(where, "the script is not UTF-8 text")]
    return Script(file_name=script_path.name, text=text), []


def is_job_file(path: Path) -> bool:
    """Whether a YAML file holds a TrainingJob (a cheap look, without parsing)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(65536)
    except OSError:
        return False
    return any(
        line.split(":", 1)[0].strip() == "kind" and line.split(":", 1)[1].strip() == KIND
        for line in head.splitlines()
        if ":" in line
    )


def discover(paths: Iterable[Path]) -> Iterator[Path]:
    """Job files among `paths`: files as given, directories searched for `kind: TrainingJob`;
    paths that do not exist are left to the caller to report."""
    for path in paths:
        if path.is_dir():
            for root, directories, files in os.walk(path):
                directories[:] = sorted(d for d in directories if not d.startswith("."))
                for name in sorted(files):
                    candidate = Path(root) / name
                    if name.endswith(YAML_SUFFIXES) and is_job_file(candidate):
                        yield candidate
        elif path.exists():
            yield path
