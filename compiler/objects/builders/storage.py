"""The shared ReadWriteMany claim every role mounts for checkpoints and logs, and the existing
claims (`storage.volumes`) some or all roles mount beside it.

The existing claims are only referenced by the pods, never emitted: they are not tfcompile's, so
no GitOps controller pruning a job's objects can delete them or the data on them. The shared
claim tfcompile creates outlives its job by default (`whenDeleted: Retain`), as a StatefulSet's
claims do: its annotations tell Argo CD (`Prune=false` when it leaves git, `Delete=false` when
its Application is deleted) and Flux (`prune: disabled`) to leave it."""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import ClaimRetention, RoleName, TrainingJob

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
    metadata = object_metadata(job, shared_claim_name(job.metadata.name), labels)
    if shared.retention is ClaimRetention.RETAIN:
        metadata["annotations"] = retained(metadata.get("annotations", {}))
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": spec,
    }


ARGO_CD_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
KEEP_OPTIONS = ("Prune=false", "Delete=false")
"""Argo CD's sync options that keep an object when it leaves git and when its Application is
deleted (the ApplicationSet deletes a job's Application when its directory goes)."""


def retained(annotations: dict[str, str]) -> dict[str, str]:
    """`annotations` with those that keep a claim from Argo CD's and Flux's prune; sync options
    the job's own annotations give are kept, and a Prune or Delete option of theirs replaced."""
    given = [option.strip() for option in annotations.get(ARGO_CD_SYNC_OPTIONS, "").split(",")
             if option.strip()]
    options = [option for option in given
               if option.split("=", 1)[0] not in ("Prune", "Delete")] + list(KEEP_OPTIONS)
    merged = {**annotations, ARGO_CD_SYNC_OPTIONS: ",".join(options), FLUX_PRUNE: "disabled"}
    return dict(sorted(merged.items()))


def claim_name(job: TrainingJob) -> str | None:
    """The claim pods mount as shared storage, if any."""
    shared = job.spec.storage.shared
    if shared is None:
        return None
    return shared.existing_claim or shared_claim_name(job.metadata.name)


def existing_claims(
    job: TrainingJob, role: RoleName
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volume mounts, volumes) of the existing claims the pods of `role` mount, in the order
    the spec lists them. A read-only mount is read-only in the volume too, so no container of
    the pod (a sidecar included) can write the claim."""
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    for volume in job.spec.storage.volumes:
        if volume.roles is not None and role not in volume.roles:
            continue
        mount: dict[str, Any] = {"name": volume.name, "mountPath": volume.mount_path}
        if volume.sub_path is not None:
            mount["subPath"] = volume.sub_path
        source: dict[str, Any] = {"claimName": volume.claim_name}
        if volume.read_only:
            mount["readOnly"] = True
            source["readOnly"] = True
        mounts.append(mount)
        volumes.append({"name": volume.name, "persistentVolumeClaim": source})
    return mounts, volumes
