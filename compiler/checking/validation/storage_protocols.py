"""Checkpoints on an SMB share: a warning, since TensorFlow's checkpoint writes fail there.

TensorFlow writes a checkpoint to a temporary file and renames it over the previous one; Azure
Files over SMB refuses that rename while the file is open, and a training fails at its first
checkpoint, or at a later one (tensorflow#19440). NFS keeps POSIX rename. The claim's protocol is
judged from what Kustomize rendered: the storage class the claim names, when it is one of AKS's
built-in SMB classes or a rendered Azure Files class without `protocol: nfs`. A claim the job
only references (an existing claim) has a class `validate` cannot see, so it is not judged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tfcompile.compiler.objects.labels import ROLE_LABEL
from tfcompile.compiler.rendering.manifests import (
    KubernetesObject,
    name_of,
    namespace_of,
    object_reference,
)

AZURE_FILES_PROVISIONERS = ("file.csi.azure.com", "kubernetes.io/azure-file")
SMB_STORAGE_CLASSES = ("azurefile", "azurefile-csi", "azurefile-premium", "azurefile-csi-premium")
"""AKS's built-in Azure Files classes, all of them SMB."""

TRAINING_CONTAINER = "tensorflow"


def _smb_classes(objects: Sequence[KubernetesObject]) -> set[str]:
    """Storage classes that make SMB shares: AKS's built-in ones, unless the rendered output
    defines a class of that name itself, and rendered Azure Files classes not asking NFS."""
    classes = set(SMB_STORAGE_CLASSES)
    for item in objects:
        if item.get("kind") != "StorageClass":
            continue
        name = name_of(item)
        parameters = item.get("parameters") or {}
        protocol = str(parameters.get("protocol", "smb")).lower()
        if item.get("provisioner") in AZURE_FILES_PROVISIONERS and protocol != "nfs":
            classes.add(name)
        else:
            classes.discard(name)
    return classes


def _written_claims(item: KubernetesObject) -> Iterator[tuple[str, str]]:
    """(claim, mount path) of each claim a TensorFlow container of a role mounts read-write."""
    template = (item.get("spec") or {}).get("template") or {}
    if ROLE_LABEL not in ((template.get("metadata") or {}).get("labels") or {}):
        return
    pod_spec: Mapping[str, Any] = template.get("spec") or {}
    claims = {}
    for volume in pod_spec.get("volumes") or []:
        source = volume.get("persistentVolumeClaim")
        if source is not None and not source.get("readOnly"):
            claims[volume.get("name")] = str(source.get("claimName", ""))
    for container in pod_spec.get("containers") or []:
        if container.get("name") != TRAINING_CONTAINER:
            continue
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") in claims and not mount.get("readOnly"):
                yield claims[mount["name"]], str(mount.get("mountPath", ""))


def smb_checkpoint_warnings(objects: Sequence[KubernetesObject]) -> list[str]:
    """One warning per claim on an SMB share that a role's training container may write."""
    smb = _smb_classes(objects)
    claim_classes = {
        (namespace_of(item), name_of(item)): str((item.get("spec") or {}).get(
            "storageClassName", ""))
        for item in objects if item.get("kind") == "PersistentVolumeClaim"
    }
    warnings: list[str] = []
    for item in objects:
        if item.get("kind") != "StatefulSet":
            continue
        for claim, mount_path in _written_claims(item):
            storage_class = claim_classes.get((namespace_of(item), claim))
            if storage_class not in smb:
                continue
            warning = (
                f"{object_reference(item)}: the training writes to PersistentVolumeClaim/{claim} "
                f"(at {mount_path}), an Azure Files share over SMB (storage class "
                f"{storage_class}), where TensorFlow's checkpoint writes (a temporary file "
                "renamed over the last checkpoint) fail (tensorflow#19440): use the azure "
                "component (Azure Files over NFS) instead of azure-smb, or write checkpoints "
                "elsewhere"
            )
            warnings.append(warning)
    return warnings
