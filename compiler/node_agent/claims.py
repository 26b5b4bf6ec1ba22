"""Storage for claims: one directory per claim on this node, bound through a PersistentVolume.

There is no storage provisioner on a local control plane, so a PersistentVolumeClaim would stay
Pending and the scheduler would never place its pods. For every pending claim without a storage
class (or with the class named below), the node's provisioner creates a `hostPath`
PersistentVolume whose path is `<claims>/<namespace>/<claim>` and whose `claimRef` names the
claim; the PersistentVolume controller then binds the two, as for a pre-bound volume. Pods mount
the directory (`local_run.volumes` keys claims by name inside the namespace's directory), which
belongs to the pods' root (the host ID their user namespace maps root to). When the claim is
deleted the volume is Released: the provisioner deletes it and its directory, as a
`Delete` reclaim policy would.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tfcompile.compiler.local_run.user_namespace import IdRange
from tfcompile.compiler.local_run.volumes import give_to_container_root

from .api import ApiClient, ApiError

PROVISIONER_LABEL = "tfcompile.dev/local-node"
STORAGE_CLASS = "tfcompile-local"


def _volume_name(claim: dict[str, Any]) -> str:
    return f"tfcompile-local-{claim['metadata']['uid']}"


def _wants_volume(claim: dict[str, Any]) -> bool:
    spec = claim.get("spec") or {}
    return (not spec.get("volumeName") and (claim.get("status") or {}).get("phase") == "Pending"
            and spec.get("storageClassName") in (None, "", STORAGE_CLASS)
            and not claim["metadata"].get("deletionTimestamp"))


def volume_for(claim: dict[str, Any], directory: Path, node_name: str) -> dict[str, Any]:
    metadata, spec = claim["metadata"], claim.get("spec") or {}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": _volume_name(claim), "labels": {PROVISIONER_LABEL: node_name}},
        "spec": {
            "capacity": {"storage": storage},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": spec.get("storageClassName") or "",
            "hostPath": {"path": str(directory), "type": "DirectoryOrCreate"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": metadata["namespace"], "name": metadata["name"],
                         "uid": metadata["uid"]},
        },
    }


class ClaimProvisioner:
    """Creates a volume for each pending claim and deletes released ones with their data."""

    def __init__(self, client: ApiClient, claims_directory: Path, node_name: str,
                 ids: IdRange) -> None:
        self.client = client
        self.claims_directory = claims_directory
        self.node_name = node_name
        self.ids = ids

    def pass_once(self) -> list[str]:
        """One reconciliation; returns what it did, for the log."""
        done: list[str] = []
        claims = self.client.get("/api/v1/persistentvolumeclaims")["items"]
        for claim in claims:
            if not _wants_volume(claim):
                continue
            metadata = claim["metadata"]
            directory = self.claims_directory / metadata["namespace"] / metadata["name"]
            if not directory.exists():
                directory.mkdir(parents=True)
                give_to_container_root(directory, self.ids)
            try:
                self.client.create("/api/v1/persistentvolumes",
                                   volume_for(claim, directory, self.node_name))
            except ApiError as error:
                if error.status != 409:
                    raise
                continue
            done.append(f"made volume {_volume_name(claim)} for claim "
                        f"{metadata['namespace']}/{metadata['name']}")
        volumes = self.client.get("/api/v1/persistentvolumes",
                                  {"labelSelector": f"{PROVISIONER_LABEL}={self.node_name}"})
        for volume in volumes["items"]:
            if (volume.get("status") or {}).get("phase") != "Released":
                continue
            path = Path(volume["spec"]["hostPath"]["path"])
            self.client.delete(f"/api/v1/persistentvolumes/{volume['metadata']['name']}")
            if path.parent.parent == self.claims_directory and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            done.append(f"deleted released volume {volume['metadata']['name']} and its directory")
        return done
