"""Changes Kubernetes refuses to apply: immutable StatefulSet fields in the committed output.

Kubernetes rejects an update to a StatefulSet's selector, serviceName, podManagementPolicy or
volumeClaimTemplates. Argo CD would retry such a sync forever, so `build` compares the new output
with the committed one and stops before the change reaches git, saying what to do instead.

Only files whose text changes are parsed (a file written again byte for byte cannot change a
field), so a rebuild of a large repository parses nothing; ruamel's C parser reads the rest when
it is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from .output_tree import Plan

IMMUTABLE_FIELDS = ("selector", "serviceName", "podManagementPolicy", "volumeClaimTemplates")


@dataclass(frozen=True)
class ImmutableChange:
    """A StatefulSet whose immutable fields the new output changes."""

    path: str
    name: str
    namespace: str | None
    fields: list[str]

    def explain(self) -> str:
        namespace = f" -n {self.namespace}" if self.namespace else ""
        return (
            f"{self.path}: changes {', '.join('spec.' + f for f in self.fields)} of StatefulSet "
            f"{self.name}, which Kubernetes does not allow to change. Argo CD would fail this "
            "sync again and again (\"updates to statefulset spec for fields other than ... are "
            "forbidden\"). Instead: delete the StatefulSet and keep its pods until the new one "
            f"takes over (`kubectl delete statefulset {self.name}{namespace} --cascade=orphan`, "
            "or the Argo CD sync option Replace=true for one sync), or give the job a new name; "
            "then build again with --allow-recreate."
        )


def _load(text: str) -> dict[str, Any] | None:
    try:
        document = YAML(typ="safe").load(text)
    except YAMLError:
        return None
    return document if isinstance(document, dict) else None


def immutable_changes(changes: Plan) -> list[ImmutableChange]:
    """StatefulSets present before and after whose immutable fields differ."""
    found = []
    for path in changes.changed:
        text = changes.writes.get(path)
        committed = changes.current(path) if text is not None else None
        if text is None or committed is None:
            continue  # removed, or new: nothing to update in place
        new = _load(text)
        if new is None or new.get("kind") != "StatefulSet":
            continue
        old = _load(committed)
        if old is None or old.get("kind") != "StatefulSet":
            continue
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        fields = [f for f in IMMUTABLE_FIELDS if old_spec.get(f) != new_spec.get(f)]
        if fields:
            metadata = new.get("metadata") or {}
            found.append(ImmutableChange(path=str(changes.output / path),
                                         name=str(metadata.get("name")),
                                         namespace=metadata.get("namespace"), fields=fields))
    return found
