"""Object metadata shared by every builder: name, namespace, labels, annotations."""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import TrainingJob


def object_metadata(job: TrainingJob, name: str, labels: dict[str, str]) -> dict[str, Any]:
    """`metadata` of a top-level object; the namespace only when the spec gives one."""
    metadata: dict[str, Any] = {"name": name}
    if job.metadata.namespace is not None:
        metadata["namespace"] = job.metadata.namespace
    metadata["labels"] = labels
    if job.metadata.annotations:
        metadata["annotations"] = dict(sorted(job.metadata.annotations.items()))
    return metadata


def template_metadata(
    job: TrainingJob, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    """`metadata` of a pod template: the object's labels, user and tfcompile annotations."""
    merged = dict(sorted(job.metadata.annotations.items()))
    merged.update(annotations)
    metadata: dict[str, Any] = {"labels": labels}
    if merged:
        metadata["annotations"] = merged
    return metadata
