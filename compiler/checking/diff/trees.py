"""One output tree as objects per job, from the text of its files, wherever they were read.

Both sides of a diff go through here, so BASE and the working tree are read by one set of
rules: a job is a directory of `output/` holding `kustomization.yaml`; its objects are the
files that kustomization lists, in its order (what Argo CD and Flux apply), each one YAML
object with a kind and a name; its components are what `components:` names. What tfcompile
never writes is refused with one line naming the file, never guessed at: a resource outside
the job directory, a file that is not UTF-8, YAML that does not parse, a document that is not
an object.

A job is read in two steps, so that each side can check sizes before reading: `read_listing`
takes the kustomization and says which files it lists (no more than `bounds` allows), then
`job_output` reads those and nothing else.

The files at BASE and in a pull request are input like any other. Before a file is parsed, its
tokens are checked as a job spec's are (`spec.yaml_limits`): nesting that would crash the
parser, numbers too long to convert, more values than a file should hold. After, a document
that shares a value between two places (a YAML alias, which tfcompile never writes) is refused:
comparing it could take exponential time, or never end when it holds itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfcompile.compiler.printable import printable
from tfcompile.compiler.yaml_input import YamlInputError, read_document, read_generated_document
from tfcompile.spec.yaml_limits import check_tokens

from .bounds import JobBudget, TreeBudget, check_file, check_listing
from .errors import DiffInputError

__all__ = ["KUSTOMIZATION", "DiffInputError", "JobOutput", "Listing", "OutputTree",
           "job_output", "read_job", "read_listing"]

KUSTOMIZATION = "kustomization.yaml"


@dataclass(frozen=True)
class JobOutput:
    """A compiled job as its kustomization lists it: its objects in order and its components."""

    objects: tuple[dict[str, Any], ...]
    components: tuple[str, ...]

    def of_kind(self, kind: str) -> dict[str, dict[str, Any]]:
        """The objects of one kind by name."""
        return {item["metadata"]["name"]: item for item in self.objects if item["kind"] == kind}


OutputTree = Mapping[str, JobOutput]
"""Jobs by directory name."""


@dataclass(frozen=True)
class Listing:
    """What a job's kustomization names: the files of its objects, in order, and its
    components."""

    resources: tuple[str, ...]
    components: tuple[str, ...]

_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]*")
"""A Kubernetes kind's name (printed as it is, so checked here)."""
_POSITION = re.compile(r"line (\d+), column (\d+)")


def _yaml_problem(error: YamlInputError) -> str:
    positions = _POSITION.findall(str(error))
    if positions:
        line, column = positions[-1]
        return f"is not valid YAML (line {line}, column {column})"
    return "is not valid YAML"


def _text(data: bytes | None, shown: str) -> str:
    if data is None:
        raise DiffInputError(f"{shown}: is missing")
    check_file(len(data), shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DiffInputError(f"{shown}: is not UTF-8 text") from None


def _names(value: Any, field: str, shown: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DiffInputError(f"{shown}: {field} is not a list of paths")
    return tuple(value)


def _check_limits(text: str, shown: str) -> None:
    try:
        problems = check_tokens(text, shown, explicit_tags=False)  # the parser decides on tags
    except Exception:  # the YAML library's error for text that is not YAML: parsing says where
        return
    if problems:
        location, message = problems[0].location, problems[0].message
        raise DiffInputError(f"{shown}: line {location.line}, column {location.column}: "
                             f"{message.split('; a job spec')[0]}")


def _count_values(document: Any) -> int | None:
    """How many values the document holds, keys included; None when a list or mapping appears
    twice in it (an alias, or a cycle)."""
    seen: set[int] = set()
    pending = [document]
    count = 0
    while pending:
        value = pending.pop()
        count += 1
        if isinstance(value, (dict, list)):
            if id(value) in seen:
                return None
            seen.add(id(value))
            count += len(value) if isinstance(value, dict) else 0
            pending.extend(value.values() if isinstance(value, dict) else value)
    return count


def _parsed(text: str, shown: str, read: Callable[[str], Any]) -> tuple[Any, int]:
    """The document of a file and how many values it holds."""
    _check_limits(text, shown)
    try:
        document = read(text)
    except YamlInputError as error:
        raise DiffInputError(f"{shown}: {_yaml_problem(error)}") from None
    count = _count_values(document)
    if count is None:
        raise DiffInputError(f"{shown}: uses YAML aliases, which tfcompile never writes")
    return document, count


def _resource_object(text: str, shown: str, budget: JobBudget) -> dict[str, Any]:
    document, count = _parsed(text, shown, read_generated_document)
    budget.add_values(count)
    metadata = document.get("metadata") if isinstance(document, dict) else None
    kind = document.get("kind") if isinstance(document, dict) else None
    if (not isinstance(kind, str) or not _KIND.fullmatch(kind)
            or not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str)):
        raise DiffInputError(f"{shown}: is not one Kubernetes object with a kind and a name")
    assert isinstance(document, dict)
    return document


def read_listing(data: bytes | None, shown_kustomization: str) -> Listing:
    """The files and components a job's kustomization (its bytes, None when missing) names;
    refuses a file outside the job directory and more files than `bounds` reads."""
    kustomization, _ = _parsed(_text(data, shown_kustomization), shown_kustomization,
                               read_document)
    if not isinstance(kustomization, dict):
        raise DiffInputError(f"{shown_kustomization}: is not a kustomization")
    resources = _names(kustomization.get("resources"), "resources", shown_kustomization)
    components = _names(kustomization.get("components"), "components", shown_kustomization)
    check_listing(len(resources), shown_kustomization)
    for resource in resources:
        if "/" in resource or resource in ("", ".", ".."):
            raise DiffInputError(f"{shown_kustomization}: resource {printable(resource)} is "
                                 "not a file of the job directory, which tfcompile never writes")
    return Listing(resources=resources, components=components)


def job_output(listing: Listing, read: Callable[[str], bytes | None],
               shown: Callable[[str], str], budget: JobBudget) -> JobOutput:
    """A job from the files its listing names: `read(name)` gives a file's bytes (None when
    missing) and `shown(name)` how to name it in a message (already printable); the values of
    its files are held to the job's `budget`."""
    objects = [_resource_object(_text(read(resource), shown(resource)), shown(resource), budget)
               for resource in listing.resources]
    return JobOutput(objects=tuple(objects), components=listing.components)


def read_job(read: Callable[[str], bytes | None], shown: Callable[[str], str],
             shown_job: str) -> JobOutput:
    """A job from its directory, both steps at once, held to `bounds` as if it were the only
    job of its tree (for files already in memory)."""
    listing = read_listing(read(KUSTOMIZATION), shown(KUSTOMIZATION))
    sizes = {name: len(read(name) or b"") for name in (KUSTOMIZATION, *listing.resources)}
    budget = TreeBudget(shown_job).add_job(sizes, shown, shown_job)
    return job_output(listing, read, shown, budget)
