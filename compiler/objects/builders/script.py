"""The ConfigMap that ships the training script, named by a hash of its content.

A new name for new content makes the pod templates change, so editing the script rolls the pods
(and Argo CD prunes the old ConfigMap).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tfcompile.spec.models import TrainingJob
from tfcompile.spec.shipped_script import Script

from ..labels import JOB_LABEL, object_labels
from ..names import script_config_map_name
from .metadata import object_metadata


def content_digest(script: Script) -> str:
    """Ten hex digits of SHA-256 over the file name and text; for a folder, over every file's
    key, path and text."""
    hasher = hashlib.sha256()
    if script.directory:
        hasher.update(b"directory\0")
        hasher.update(json.dumps([[item.key, item.path, item.text] for item in script.files],
                                 ensure_ascii=False, separators=(",", ":")).encode())
    else:
        hasher.update(script.file_name.encode())
        hasher.update(b"\0")
        hasher.update(script.files[0].text.encode())
    return hasher.hexdigest()[:10]


def script_name(job: TrainingJob, script: Script) -> str:
    return script_config_map_name(job.metadata.name, content_digest(script))


def script_config_map(job: TrainingJob, script: Script) -> dict[str, Any]:
    labels = object_labels(job, "script", {JOB_LABEL: job.metadata.name})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_metadata(job, script_name(job, script), labels),
        "data": {item.key: item.text for item in script.files},
    }


def script_volume_source(script: Script, config_map: str) -> dict[str, Any]:
    """The `configMap` of the script volume: a folder's files keep their nested paths through
    `items` (a key holds no `/`)."""
    source: dict[str, Any] = {"name": config_map}
    if script.directory:
        source["items"] = [{"key": item.key, "path": item.path} for item in script.files]
    return source
