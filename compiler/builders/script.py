"""The ConfigMap that ships the training script, named by a hash of its content.

A new name for new content makes the pod templates change, so editing the script rolls the pods
(and Argo CD prunes the old ConfigMap).
"""

from __future__ import annotations

import hashlib
from typing import Any

from tfcompile.spec.models import TrainingJob
from tfcompile.spec.scripts import Script

from ..labels import JOB_LABEL, object_labels
from ..names import script_config_map_name
from .metadata import object_metadata


def content_digest(script: Script) -> str:
    """Ten hex digits of SHA-256 over the file name and text."""
    hasher = hashlib.sha256()
    hasher.update(script.file_name.encode())
    hasher.update(b"\0")
    hasher.update(script.text.encode())
    return hasher.hexdigest()[:10]


def script_name(job: TrainingJob, script: Script) -> str:
    return script_config_map_name(job.metadata.name, content_digest(script))


def script_config_map(job: TrainingJob, script: Script) -> dict[str, Any]:
    labels = object_labels(job, "script", {JOB_LABEL: job.metadata.name})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_metadata(job, script_name(job, script), labels),
        "data": {script.file_name: script.text},
    }
