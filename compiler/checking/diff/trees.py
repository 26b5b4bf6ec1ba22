"""One output tree as objects per job, from the text of its files, wherever they were read.

Both sides of a diff go through here, so BASE and the working tree are read by one set of
rules: a job is a directory of `output/` holding `kustomization.yaml`; its objects are the
files that kustomization lists, in its order (what Argo CD and Flux apply), each one YAML
object with a kind and a name; its components are what `components:` names. What tfcompile
never writes is refused with one line naming the file, never guessed at: a resource outside
the job directory, a file that is not UTF-8, YAML that does not parse, a document that is not
an object.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfcompile.compiler.printable import printable
from tfcompile.compiler.yaml_input import YamlInputError, read_document, read_generated_document

KUSTOMIZATION = "kustomization.yaml"


class DiffInputError(Exception):
    """An output tree that cannot be read; the message is one line saying where and why."""


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


def _resource_object(text: str, shown: str) -> dict[str, Any]:
    try:
        document = read_generated_document(text)
    except YamlInputError as error:
        raise DiffInputError(f"{shown}: {_yaml_problem(error)}") from None
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
    try:
        kustomization = read_document(kustomization_text)
    except YamlInputError as error:
        raise DiffInputError(f"{shown(KUSTOMIZATION)}: {_yaml_problem(error)}") from None
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
