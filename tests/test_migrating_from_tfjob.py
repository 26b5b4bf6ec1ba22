"""docs/migrating-from-tfjob.md cannot drift: it maps every field of a TFJob v1, every field of a
TrainingJob it names is one the JSON Schema has (with the value written, where the field has a
fixed set), and its side-by-side example builds."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import OVERLAYS, REPOSITORY, Result
from tfcompile.spec.misplaced_fields import RUN_POLICY_FIELDS, TFJOB_FIELDS

GUIDE = REPOSITORY / "docs" / "migrating-from-tfjob.md"
SCHEMA = json.loads((REPOSITORY / "spec" / "trainingjob.schema.json").read_text())

TFJOB_V1_FIELDS = [
    "apiVersion", "kind", "metadata.name", "metadata.namespace", "metadata.labels",
    "metadata.annotations", "status",
    # TFJobSpec
    "spec.tfReplicaSpecs", "spec.runPolicy", "spec.successPolicy", "spec.enableDynamicWorker",
    # RunPolicy
    "spec.runPolicy.cleanPodPolicy", "spec.runPolicy.ttlSecondsAfterFinished",
    "spec.runPolicy.activeDeadlineSeconds", "spec.runPolicy.backoffLimit",
    "spec.runPolicy.schedulingPolicy", "spec.runPolicy.suspend", "spec.runPolicy.managedBy",
    # SchedulingPolicy
    "spec.runPolicy.schedulingPolicy.minAvailable", "spec.runPolicy.schedulingPolicy.queue",
    "spec.runPolicy.schedulingPolicy.minResources",
    "spec.runPolicy.schedulingPolicy.priorityClass",
    "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
    # The replica types, and ReplicaSpec
    "spec.tfReplicaSpecs.Chief", "spec.tfReplicaSpecs.Master", "spec.tfReplicaSpecs.Worker",
    "spec.tfReplicaSpecs.PS", "spec.tfReplicaSpecs.Evaluator",
    "spec.tfReplicaSpecs.<type>.replicas", "spec.tfReplicaSpecs.<type>.restartPolicy",
    "spec.tfReplicaSpecs.<type>.template",
    # The template's parts a TFJob gives meaning to
    "spec.tfReplicaSpecs.<type>.template.metadata.labels",
    "spec.tfReplicaSpecs.<type>.template.metadata.annotations",
    *(f"spec.tfReplicaSpecs.<type>.template.spec.containers[tensorflow].{field}"
      for field in ("image", "command", "args", "env", "envFrom", "resources", "ports",
                    "volumeMounts")),
    "spec.tfReplicaSpecs.<type>.template.spec.containers[tensorflow]",
    "spec.tfReplicaSpecs.<type>.template.spec.containers",
    "spec.tfReplicaSpecs.<type>.template.spec.volumes",
    "spec.tfReplicaSpecs.<type>.template.spec.nodeSelector",
    "spec.tfReplicaSpecs.<type>.template.spec.restartPolicy",
    "spec.tfReplicaSpecs.<type>.template.spec.schedulerName",
    "spec.tfReplicaSpecs.<type>.template.spec.activeDeadlineSeconds",
]
"""The fields of a TFJob of kubeflow.org/v1 (training-operator 1.9: TFJob, TFJobSpec, RunPolicy,
SchedulingPolicy, ReplicaSpec), and the parts of a replica's pod template it gives a meaning."""

TRAINING_JOB_ROOTS = ("apiVersion", "kind", "metadata.", "spec.")


def _sections() -> dict[str, str]:
    text = GUIDE.read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    return {part.split("\n", 1)[0]: part for part in parts[1:]}


def _rows() -> Iterator[list[str]]:
    """The rows of the field-by-field tables, each as its cells."""
    for line in _sections()["Field by field"].splitlines():
        if line.startswith("| `"):
            yield [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def _spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _named_fields() -> list[tuple[str, str]]:
    """(the TFJob fields of a row, a TrainingJob field or `field: value`) for every field of a
    TrainingJob the tables name, in the tfcompile and the notes columns."""
    named: list[tuple[str, str]] = []
    for cells in _rows():
        for cell in cells[1:]:
            named.extend((cells[0], span) for span in _spans(cell)
                         if span.startswith(TRAINING_JOB_ROOTS))
    return named


def _resolved(node: dict[str, Any]) -> dict[str, Any]:
    """`node` with references followed and an optional value's `null` dropped."""
    while True:
        if "$ref" in node:
            node = SCHEMA["$defs"][node["$ref"].removeprefix("#/$defs/")]
        elif "anyOf" in node and len([o for o in node["anyOf"] if o.get("type") != "null"]) == 1:
            node = next(o for o in node["anyOf"] if o.get("type") != "null")
        else:
            return node


def _child(node: dict[str, Any], part: str) -> dict[str, Any] | None:
    node = _resolved(node)
    for option in node.get("anyOf", [node]):
        option = _resolved(option)
        properties = option.get("properties", {})
        if part == "<role>" and "worker" in properties:
            return dict(properties["worker"])
        if part in properties:
            return dict(properties[part])
        entries = [option.get("additionalProperties"),
                   *option.get("patternProperties", {}).values()]
        free = [entry for entry in entries if isinstance(entry, dict)]
        if part.startswith("<") and free:
            return dict(free[0])
    return None


def schema_node(path: str) -> dict[str, Any] | None:
    """The schema of the field at `path` (`spec.roles.<role>.podTemplate.spec.containers[x]`
    walks into the list's items), or None when the schema has no such field."""
    node: dict[str, Any] | None = SCHEMA
    for part in path.split("."):
        name, _, item = part.partition("[")
        assert node is not None
        node = _child(node, name)
        if node is None:
            return None
        if item:
            node = _resolved(node).get("items")
            if node is None:
                return None
    return node


def _allows(node: dict[str, Any], value: str) -> bool:
    """Whether a field of a fixed set of values (an enum or a constant) allows `value`; any
    value of a field of another kind."""
    node = _resolved(node)
    if "enum" in node:
        return value in node["enum"]
    if "const" in node:
        return bool(value == node["const"])
    return True


def test_the_guide_maps_every_field_of_a_tfjob() -> None:
    mapped = {span for cells in _rows() for span in _spans(cells[0])}
    assert [field for field in TFJOB_V1_FIELDS if field not in mapped] == []


def test_every_field_of_a_training_job_the_guide_names_is_in_the_schema() -> None:
    named = _named_fields()
    assert len(named) > 40  # the tables were read
    missing = []
    for tfjob, span in named:
        field, _, value = span.partition(": ")
        node = schema_node(field)
        if node is None or (value and value[0] not in "[{" and not _allows(node, value)):
            missing.append((tfjob, span))
    assert missing == []


@pytest.mark.parametrize("field", [
    "spec.failurePolicy.maxRestarts", "spec.roles.<role>.podTemplate.spec.priorityClassName",
    "spec.roles.<role>.podTemplate.spec.containers[tensorflow].volumeMounts", "spec.env.<name>",
])
def test_the_schema_walk_finds_fields_the_schema_has(field: str) -> None:
    assert schema_node(field) is not None


@pytest.mark.parametrize("field", ["spec.activeDeadlineSeconds", "spec.runPolicy",
                                   "spec.roles.master", "spec.roles.<role>.restartPolicy"])
def test_the_schema_walk_finds_no_field_the_schema_lacks(field: str) -> None:
    assert schema_node(field) is None


def test_the_messages_and_the_guide_know_the_same_tfjob_fields() -> None:
    """Every TFJob field the build's messages explain is in the guide's first column."""
    mapped = " ".join(span for cells in _rows() for span in _spans(cells[0]))
    explained = {field for field in RUN_POLICY_FIELDS} | {
        hint.place[-1] for hint in TFJOB_FIELDS if hint.place[:2] == ("spec", "roles")
        and len(hint.place) == 4}
    assert [field for field in sorted(explained) if field not in mapped] == []


def _example(language_title: str) -> str:
    """The YAML of one column of the side-by-side example."""
    section = _sections()["A whole job, side by side"]
    blocks = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    return str(next(block for block in blocks if f"kind: {language_title}\n" in block))


def test_the_guides_example_builds(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(_example("TrainingJob"), encoding="utf-8")
    result = run_cli("build", str(job), "-o", str(tmp_path / "output"), "--overlays",
                     str(OVERLAYS))
    assert result.status == 0, result.stderr
    assert (tmp_path / "output" / "census" / "statefulset-census-worker.yaml").exists()


def test_the_guides_tfjob_is_refused_with_its_fields_explained(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """The TFJob of the example, built as it is: refused at its apiVersion and kind, each
    saying what it is."""
    job = tmp_path / "job.yaml"
    job.write_text(_example("TFJob"), encoding="utf-8")
    result = run_cli("build", str(job), "-o", str(tmp_path / "output"))
    assert result.status == 2
    assert "apiVersion: must be 'tfcompile.dev/v1alpha1': this is a Kubeflow TFJob's" in (
        result.stderr)
    assert "kind: must be 'TrainingJob': this is a Kubeflow TFJob's kind" in result.stderr
