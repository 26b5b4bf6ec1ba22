"""One output tree as objects per job, from the text of its files, wherever they were read.

Both sides of a diff go through here, so BASE and the working tree are read by one set of
rules: a job is a directory of `output/` holding `kustomization.yaml`; its objects are the
files that kustomization lists, in its order (what Argo CD and Flux apply), each one YAML
object with a kind and a name; its components are what `components:` names. What tfcompile
never writes is refused with one line naming the file, never guessed at: a resource outside
the job directory, a file that is not UTF-8, YAML that does not parse, a document that is not
an object.

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

from .errors import DiffInputError

__all__ = ["KUSTOMIZATION", "DiffInputError", "JobOutput", "OutputTree", "read_job"]

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
        problems = check_tokens(text, shown)
    except Exception:  # the YAML library's error for text that is not YAML: parsing says where
        return
    if problems:
        location, message = problems[0].location, problems[0].message
        raise DiffInputError(f"{shown}: line {location.line}, column {location.column}: "
                             f"{message.split('; a job spec')[0]}")


def _shares_values(document: Any) -> bool:
    """Whether a list or mapping appears twice in the document (an alias, or a cycle)."""
    seen: set[int] = set()
    pending = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, (dict, list)):
            if id(value) in seen:
                return True
            seen.add(id(value))
            pending.extend(value.values() if isinstance(value, dict) else value)
    return False


def _parsed(text: str, shown: str, read: Callable[[str], Any]) -> Any:
    _check_limits(text, shown)
    try:
        document = read(text)
    except YamlInputError as error:
        raise DiffInputError(f"{shown}: {_yaml_problem(error)}") from None
    if _shares_values(document):
        raise DiffInputError(f"{shown}: uses YAML aliases, which tfcompile never writes")
    return document


def _resource_object(text: str, shown: str) -> dict[str, Any]:
    document = _parsed(text, shown, read_generated_document)
    metadata = document.get("metadata") if isinstance(document, dict) else None
    kind = document.get("kind") if isinstance(document, dict) else None
    if (not isinstance(kind, str) or not _KIND.fullmatch(kind)
            or not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str)):
        raise DiffInputError(f"{shown}: is not one Kubernetes object with a kind and a name")
    assert isinstance(document, dict)
    return document


def read_job(read: Callable[[str], bytes | None], shown: Callable[[str], str]) -> JobOutput:
    """A job from its directory: `read(name)` gives a file's bytes (None when missing) and
    `shown(name)` how to name it in a message (already printable)."""
    kustomization_text = _text(read(KUSTOMIZATION), shown(KUSTOMIZATION))
    kustomization = _parsed(kustomization_text, shown(KUSTOMIZATION), read_document)
    if not isinstance(kustomization, dict):
        raise DiffInputError(f"{shown(KUSTOMIZATION)}: is not a kustomization")
    resources = _names(kustomization.get("resources"), "resources", shown(KUSTOMIZATION))
    components = _names(kustomization.get("components"), "components", shown(KUSTOMIZATION))
    objects = []
    for resource in resources:
        if "/" in resource or resource in ("", ".", ".."):
            raise DiffInputError(f"{shown(KUSTOMIZATION)}: resource {printable(resource)} is "
                                 "not a file of the job directory, which tfcompile never writes")
        objects.append(_resource_object(_text(read(resource), shown(resource)),
                                        shown(resource)))
    return JobOutput(objects=tuple(objects), components=components)
