"""The storage class each rendered claim names or needs, and Azure Files premium shares asked for
below their minimum size.

A claim binds only when its storage class exists in the cluster (or the cluster has a default
class, for a claim that names none), and nothing in a job's output creates the class: the azure
component names `tfcompile-azurefile-nfs`, which `overlays/azure/storage-class.yaml` defines
once per cluster. So `validate` notes, per claim, the class it needs and where that class comes
from, judged after the components (which choose it).

Azure Files premium shares (NFS shares are premium only) hold 100 GiB at least (PremiumV2: 32
GiB). The Azure Files CSI driver raises a smaller request to that size (`minimumPremiumShareSize`
in its controller) rather than fail, so a claim of 10Gi binds to a share of 100 GiB, billed as
such: the job works, hence a warning with the minimum rather than an error. A class is known to
be premium when the output renders it (`skuName` or `storageAccountType` Premium…), or by name:
the azure component's own class and AKS's built-in premium classes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tfcompile.compiler.objects.labels import SHARED_STORAGE_LABEL
from tfcompile.compiler.rendering.manifests import KubernetesObject, name_of, object_reference
from tfcompile.compiler.rendering.quantities import parse_quantity

from .report import quoted
from .storage_protocols import AZURE_FILES_PROVISIONERS

AZURE_COMPONENT_CLASS = "tfcompile-azurefile-nfs"
"""The azure component's class (overlays/azure/storage-class.yaml): Premium_LRS, over NFS."""

AKS_BUILT_IN_CLASSES = {
    "default": None, "managed": None, "managed-csi": None, "managed-premium": None,
    "managed-csi-premium": None, "azurefile": "Standard_LRS", "azurefile-csi": "Standard_LRS",
    "azurefile-premium": "Premium_LRS", "azurefile-csi-premium": "Premium_LRS",
}
"""AKS's built-in storage classes (Azure Disks, then Azure Files with their SKU)."""

GIBIBYTE = 2**30
PREMIUM_MINIMUM_GIB = 100
PREMIUM_V2_MINIMUM_GIB = 32


@dataclass(frozen=True)
class _Claim:
    owner: str  # "PersistentVolumeClaim/mnist-shared", or the StatefulSet of a claim template
    name: str
    storage_class: str | None
    size: str | None
    read_write_many: bool
    shared: bool  # the job's shared claim (storage.shared)


def _claim(owner: str, claim: Mapping[str, Any], shared: bool) -> _Claim:
    spec = claim.get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    storage_class = spec.get("storageClassName")
    return _Claim(
        owner=owner,
        name=str((claim.get("metadata") or {}).get("name", "")),
        storage_class=None if storage_class is None else str(storage_class),
        size=None if size is None else str(size),
        read_write_many="ReadWriteMany" in (spec.get("accessModes") or []),
        shared=shared,
    )


def _claims(objects: Sequence[KubernetesObject]) -> Iterator[_Claim]:
    """The claims the output creates: PersistentVolumeClaims, and StatefulSets' templates."""
    for item in objects:
        if item.get("kind") == "PersistentVolumeClaim":
            labels = (item.get("metadata") or {}).get("labels") or {}
            yield _claim(object_reference(item), item, SHARED_STORAGE_LABEL in labels)
        elif item.get("kind") == "StatefulSet":
            for template in (item.get("spec") or {}).get("volumeClaimTemplates") or []:
                yield _claim(object_reference(item), template, False)


def _rendered_classes(objects: Sequence[KubernetesObject]) -> dict[str, KubernetesObject]:
    return {name_of(item): item for item in objects if item.get("kind") == "StorageClass"}


def storage_class_notes(objects: Sequence[KubernetesObject]) -> list[str]:
    """One note per claim: the storage class it needs, and whether the cluster must have it."""
    rendered = _rendered_classes(objects)
    notes: list[str] = []
    for claim in _claims(objects):
        where = (claim.owner if claim.owner.endswith(f"/{claim.name}") else
                 f"{claim.owner}: claim template {quoted(claim.name)}")
        storage_class = claim.storage_class
        if storage_class is None:
            needs = ("names no storage class: the cluster's default StorageClass provisions it "
                     "(kubectl get storageclass shows which is the default)"
                     + (", and it must make ReadWriteMany volumes" if claim.read_write_many
                        else ""))
        elif storage_class == "":
            needs = ('asks for no storage class (storageClassName: ""): it binds only to an '
                     "existing PersistentVolume without one")
        elif storage_class in rendered:
            needs = f"needs StorageClass {quoted(storage_class)}, which the output creates"
        elif storage_class == AZURE_COMPONENT_CLASS:
            needs = (f"needs StorageClass {storage_class}, which must exist in the cluster: "
                     "overlays/azure/storage-class.yaml defines it (apply it once per cluster)")
        elif storage_class in AKS_BUILT_IN_CLASSES:
            needs = (f"needs StorageClass {storage_class}, one of AKS's built-in classes (on "
                     "another cluster it must be created)")
        else:
            needs = (f"needs StorageClass {quoted(storage_class)}, which must exist in the "
                     "cluster (kubectl get storageclass)")
        notes.append(f"{where} {needs}")
    return notes


def _premium_minimum(storage_class: str, rendered: Mapping[str, KubernetesObject]) -> int | None:
    """The least share, in GiB, of an Azure Files premium class; None for any other class."""
    if storage_class in rendered:
        item = rendered[storage_class]
        if item.get("provisioner") not in AZURE_FILES_PROVISIONERS:
            return None
        parameters = item.get("parameters") or {}
        sku = str(parameters.get("skuName") or parameters.get("storageAccountType") or "")
    elif storage_class == AZURE_COMPONENT_CLASS:
        sku = "Premium_LRS"
    else:
        sku = AKS_BUILT_IN_CLASSES.get(storage_class) or ""
    if sku.lower().startswith("premiumv2"):
        return PREMIUM_V2_MINIMUM_GIB
    return PREMIUM_MINIMUM_GIB if sku.lower().startswith("premium") else None


def azure_share_size_warnings(objects: Sequence[KubernetesObject]) -> list[str]:
    """One warning per claim on an Azure Files premium class asking for less than its
    minimum."""
    rendered = _rendered_classes(objects)
    warnings: list[str] = []
    for claim in _claims(objects):
        if not claim.storage_class or claim.size is None:
            continue
        minimum = _premium_minimum(claim.storage_class, rendered)
        try:
            size = parse_quantity(claim.size)
        except ValueError:
            continue  # the schema check reports it
        if minimum is None or size >= Fraction(minimum * GIBIBYTE):
            continue
        field = " (storage.shared.size in the job's spec)" if claim.shared else ""
        warnings.append(
            f"{claim.owner}: asks for {quoted(claim.size)} of StorageClass "
            f"{quoted(claim.storage_class)}, an Azure Files premium share, which holds "
            f"{minimum}Gi at least: the Azure Files CSI driver makes the share {minimum}Gi, "
            f"billed as such; ask for {minimum}Gi or more{field}")
    return warnings
