"""What `tfcompile validate` found: problems to fix, objects the cluster must already have.

Kept apart from the checks so the CLI (and CI output) can print a report without knowing how it
was made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompile.compiler.printable import printable


def quoted(value: object) -> str:
    """A name or value from the user's files as a message shows it: as it is when printable,
    else quoted and JSON-escaped (no control character reaches a terminal; `to_text` escapes
    what is left with `printable`)."""
    text = str(value)
    return text if text.isprintable() else json.dumps(text)


@dataclass(frozen=True, order=True)
class ObjectProblem:
    """A rendered object that would fail in a cluster: which object, what broke, what to do."""

    object_reference: str  # "StatefulSet/mnist-worker"
    message: str

    def __str__(self) -> str:
        return f"{self.object_reference}: {self.message}"


@dataclass(frozen=True, order=True)
class Prerequisite:
    """An object the job uses but does not create; it must exist before the pods can start.

    `optional` is true when every reference to it is marked optional. `keys` are the keys the
    job reads from it (empty for a whole Secret/ConfigMap, a volume or a claim).
    """

    kind: str
    name: str
    namespace: str | None
    used_by: tuple[str, ...]
    keys: tuple[str, ...] = ()
    optional: bool = False

    def __str__(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        keys = f" (keys: {', '.join(self.keys)})" if self.keys else ""
        optional = ", optional" if self.optional else ""
        return f"{self.kind}/{self.name}{where}{keys}: used by {', '.join(self.used_by)}{optional}"


@dataclass(frozen=True)
class ValidationReport:
    """The result of validating one rendered directory against one Kubernetes version.

    `objects` are what Kustomize renders, as a GitOps controller would apply them; `notes` are
    things worth knowing that are not wrong (kinds without a schema, skipped keys); `warnings`
    are what is allowed but likely to fail a training (checkpoints on an SMB share).
    """

    directory: Path
    kubernetes_version: str
    objects: list[dict[str, Any]] = field(repr=False)
    problems: list[ObjectProblem]
    prerequisites: list[Prerequisite]
    notes: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_text(self) -> str:
        """A plain-text summary: problems, warnings, prerequisites, then notes; each escaped
        (`printable`), since names and messages may come from the cluster or hostile input."""
        lines = [
            f"{printable(str(self.directory))}: {len(self.objects)} objects rendered, checked "
            f"against Kubernetes {self.kubernetes_version}: "
            + (
                "no problems"
                if self.ok
                else f"{len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"
            )
        ]
        lines.extend(f"  error: {printable(str(problem))}" for problem in self.problems)
        lines.extend(f"  warning: {printable(warning)}" for warning in self.warnings)
        lines.extend(f"  requires: {printable(str(prerequisite))}"
                     for prerequisite in self.prerequisites)
        lines.extend(f"  note: {printable(note)}" for note in self.notes)
        return "\n".join(lines) + "\n"
