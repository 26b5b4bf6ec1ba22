"""Load `job.yaml` files into `TrainingJob` models, keeping where every value came from.

ruamel.yaml is used (not PyYAML) because its round-trip nodes carry line and column numbers
(parsed by libyaml where it gives the same documents, `yaml_documents.py`); the document is
copied into plain data with a map from field path to position (`plain_data.py`), so that
pydantic's errors and the rules' problems can all be reported as `file:line:col: field:
message`. Every input is treated as hostile: the file is size-checked before it is read, its
YAML tokens are checked before a document is built (`yaml_limits.py`; an explicit tag is
refused there, at its field: `yaml_tags.py`), literal credentials are looked for in every value
and in the script's files (`secrets.py`), and the script is confined to the job's repository
(`scripts.py`).
"""

from __future__ import annotations

import hashlib
import os
import stat
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from .discovery import discover, is_job_file
from .loaded_job import LoadedJob
from .models import KIND, TrainingJob
from .plain_data import MAXIMUM_TEXT_CHARACTERS, PlainCopier, TooManyValues, node_position
from .positions import Locations
from .problems import (
    LocatedProblem,
    Location,
    Problem,
    SpecError,
    UnreadableInput,
    hide_keys,
)
from .rules import check_rules
from .scripts import directory_command_problem, read_script
from .secrets import find_literal_secrets, find_script_credentials
from .shipped_script import Script
from .shown_paths import display_path
from .sweep import trial_count
from .yaml_documents import documents
from .yaml_limits import (
    MAXIMUM_DOCUMENTS,
    MAXIMUM_FILE_BYTES,
    MAXIMUM_VALUES,
    check_tokens,
    describe_yaml_error,
)
from .yaml_tags import with_tag_fields

__all__ = ["LoadedJob", "discover", "display_path", "is_job_file", "load_jobs",
           "read_plain_documents"]


def _read_text(path: Path, shown: str) -> str:
    """The text of a job file: a regular file of at most `MAXIMUM_FILE_BYTES`, checked before
    and after opening, read with a bounded read."""

    def refuse(message: str) -> NoReturn:
        raise SpecError([LocatedProblem(Location(shown, 1, 1), (), message)])

    try:
        before = os.stat(path)
        if not stat.S_ISREG(before.st_mode):
            refuse("not a regular file (a folder, device, FIFO or socket); give a job file")
        if before.st_size > MAXIMUM_FILE_BYTES:
            refuse(f"the file is {before.st_size} bytes; a job file may have at most "
                   f"{MAXIMUM_FILE_BYTES}")
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                refuse("not a regular file (a folder, device, FIFO or socket); give a job file")
            content = handle.read(MAXIMUM_FILE_BYTES + 1)
    except OSError as error:
        raise UnreadableInput("cannot read the job file", shown, error) from None
    if len(content) > MAXIMUM_FILE_BYTES:
        refuse(f"the file has more than {MAXIMUM_FILE_BYTES} bytes; a job file may have at "
               f"most {MAXIMUM_FILE_BYTES}")
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        refuse(f"not UTF-8 text (byte {error.start + 1}: {error.reason})")


def _read_documents(path: Path, shown: str) -> tuple[str, list[Any]]:
    """The SHA-256 of the file's bytes, and its documents."""
    text = _read_text(path, shown)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    try:
        problems = check_tokens(text, shown)
        if problems:
            raise SpecError(with_tag_fields(problems, text))
        with warnings.catch_warnings():
            # ruamel warns about a reused anchor (which YAML allows) by printing the lines
            # that hold it: input must not reach the terminal.
            warnings.simplefilter("ignore")
            return digest, documents(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        _raise_yaml(shown, line, column, describe_yaml_error(error))
    except YAMLError:
        _raise_yaml(shown, 1, 1, "not valid YAML")


def _raise_yaml(shown: str, line: int, column: int, reason: str) -> NoReturn:
    raise SpecError([LocatedProblem(Location(shown, line, column), (), f"invalid YAML: {reason}")])


def load_jobs(path: Path) -> list[LoadedJob]:
    """Every `TrainingJob` document of one file; raises `SpecError` with all problems found."""
    shown = display_path(path)
    problems: list[LocatedProblem] = []
    loaded: list[LoadedJob] = []
    digest, documents = _read_documents(path, shown)
    if not documents:
        raise SpecError([LocatedProblem(Location(shown, 1, 1), (), "the file has no document")])
    if len(documents) > MAXIMUM_DOCUMENTS:
        line, column = node_position(documents[MAXIMUM_DOCUMENTS])
        raise SpecError([LocatedProblem(
            Location(shown, line + 1, column + 1), (),
            f"the file has {len(documents)} documents; a file may define at most "
            f"{MAXIMUM_DOCUMENTS} jobs: put the others in further files")])
    for document in documents:
        try:
            loaded.append(_load_document(document, path, shown, digest))
        except SpecError as error:
            problems.extend(error.problems)
    if problems:
        raise SpecError(problems)
    _check_trials(loaded)
    return loaded


def read_plain_documents(path: Path) -> list[tuple[Any, Locations]]:
    """Every document of a YAML file written for another tool (a Kubeflow TFJob that `tfcompile
    convert` reads), under the limits of a job file (size, tokens, depth, values, tags, strings
    the API server refuses), as plain data with the position of each value. Raises `SpecError`
    with every problem, located; never returns part of a file."""
    shown = display_path(path)
    _, documents = _read_documents(path, shown)
    if not documents:
        raise SpecError([LocatedProblem(Location(shown, 1, 1), (), "the file has no document")])
    if len(documents) > MAXIMUM_DOCUMENTS:
        line, column = node_position(documents[MAXIMUM_DOCUMENTS])
        raise SpecError([LocatedProblem(Location(shown, line + 1, column + 1), (),
                                        f"the file has more than {MAXIMUM_DOCUMENTS} documents")])
    read: list[tuple[Any, Locations]] = []
    problems: list[LocatedProblem] = []
    for document in documents:
        locations, copier = _copier(document, shown)
        try:
            data = copier.copy(document, ())
        except TooManyValues:
            problems.append(LocatedProblem(locations.locate(()), (), _TOO_MANY_VALUES))
            continue
        problems.extend(LocatedProblem(locations.locate(problem.path, key=problem.key),
                                       problem.path, problem.message)
                        for problem in copier.problems)
        read.append((data, locations))
    if problems:
        raise SpecError(problems)
    return read


def _check_trials(loaded: list[LoadedJob]) -> None:
    """A file defines at most `MAXIMUM_DOCUMENTS` jobs, each trial of a sweep counted: every
    job costs a build its compiling and a dozen files."""
    count = 0
    for job in loaded:
        sweep = job.job.spec.sweep
        count += 1 if sweep is None else trial_count(sweep)
        if count > MAXIMUM_DOCUMENTS:
            where = ("spec", "sweep", "parameters") if sweep is not None else ("metadata", "name")
            raise job.fail([Problem(where, f"the file defines {count} jobs up to here, a "
                                    "sweep's trials counted; a file may define at most "
                                    f"{MAXIMUM_DOCUMENTS} jobs: put the others in further "
                                    "files")])


_TOO_MANY_VALUES = (f"the document holds more than {MAXIMUM_VALUES} values or "
                    f"{MAXIMUM_TEXT_CHARACTERS} characters of text (keys included) once its "
                    "YAML aliases are expanded")


def _copier(document: Any, shown: str) -> tuple[Locations, PlainCopier]:
    """The positions of a parsed document, and the copier that turns it into plain data."""
    locations = Locations(shown)
    locations.record((), node_position(document), None)
    return locations, PlainCopier(locations)


def _load_document(document: Any, path: Path, shown: str, digest: str) -> LoadedJob:
    locations, copier = _copier(document, shown)
    try:
        data = copier.copy(document, ())
    except TooManyValues:
        raise SpecError([LocatedProblem(
            locations.locate(()), (),
            f"{_TOO_MANY_VALUES}, or an alias refers to a list or mapping that holds it; a "
            "job spec needs far fewer")]) from None

    problems = [*copier.problems, *find_literal_secrets(data)]
    hidden = {problem.path for problem in problems if problem.hidden_key}

    def fail(problems: Iterable[Problem]) -> SpecError:
        return SpecError([
            LocatedProblem(locations.locate(problem.path, key=problem.key),
                           hide_keys(problem.path, hidden), problem.message)
            for problem in problems
        ])

    if copier.problems:
        raise fail(problems)
    if not isinstance(data, dict):
        raise SpecError(
            [LocatedProblem(locations.locate(()), (), f"expected a mapping with kind: {KIND}")]
        )
    try:
        job = TrainingJob.model_validate(data)
    except ValidationError as error:
        from .messages import describe_validation_error  # only a spec with errors needs it

        located = fail(problems).problems
        located.extend(
            LocatedProblem(locations.locate(path_, key=on_key), hide_keys(path_, hidden),
                           message)
            for path_, message, on_key in describe_validation_error(error, data)
        )
        raise SpecError(located) from None
    problems.extend(check_rules(job))
    script: Script | None = None
    if job.spec.script is not None:
        script, script_problems = read_script(job.spec.script, path, shown)
        problems.extend(script_problems)
        if script is not None:
            problems.extend(find_script_credentials(script, ("spec", "script")))
            command_problem = directory_command_problem(
                script, job.spec.command is not None,
                [name.value for name, role in job.spec.roles.defined() if role.command is None])
            if command_problem is not None:
                problems.append(command_problem)
    if problems:
        raise fail(problems)
    return LoadedJob(job=job, source=str(path), script=script, locations=locations,
                     source_digest=digest)
