"""The shared ReadWriteMany claim every role mounts for checkpoints and logs."""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import TrainingJob

from ..labels import JOB_LABEL, SHARED_STORAGE_LABEL, object_labels
from ..names import shared_claim_name
from .metadata import object_metadata


def shared_claim(job: TrainingJob) -> dict[str, Any] | None:
    """PVC `J-shared`, unless the spec names an existing claim. Marked for storage overlays."""
    shared = job.spec.storage.shared
    if shared is None or shared.existing_claim is not None:
        return None
    labels = object_labels(job, "storage", {JOB_LABEL: job.metadata.name})
    labels[SHARED_STORAGE_LABEL] = "true"
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": shared.size}},
    }
    if shared.storage_class_name is not None:
        spec["storageClassName"] = shared.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": object_metadata(job, shared_claim_name(job.metadata.name), labels),
        "spec": spec,
    }


def claim_name(job: TrainingJob) -> str | None:
    """The claim pods mount as shared storage, if any."""
    shared = job.spec.storage.shared
    if shared is None:
        return None
    return shared.existing_claim or shared_claim_name(job.metadata.name)
