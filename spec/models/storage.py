"""The job's volumes: shared storage, scratch space and existing claims mounted into every pod.
"""

from enum import StrEnum
from typing import Annotated

from pydantic import (
    Field,
    StrictBool,
    StringConstraints,
)

from .base import DNS_LABEL_PATTERN, AbsolutePath, ObjectName, Quantity, SpecModel, _no_items
from .roles import RoleName


class ClaimRetention(StrEnum):
    """What becomes of the shared claim tfcompile creates when it leaves git (the job deleted,
    or its shared storage removed), as a StatefulSet's `whenDeleted` says of its claims."""

    RETAIN = "Retain"
    """Kept, with its data: Argo CD and Flux are told not to prune or delete it."""
    DELETE = "Delete"
    """Pruned with the job, and the data on it with it (unless the storage class retains it)."""


class SharedStorage(SpecModel):
    """One ReadWriteMany volume mounted by every role (checkpoints, logs)."""

    mount_path: AbsolutePath
    size: Quantity | None = None
    storage_class_name: ObjectName | None = None
    existing_claim: ObjectName | None = None
    when_deleted: ClaimRetention | None = Field(
        default=None, description="What becomes of the claim tfcompile creates when the job "
        "(or its shared storage) leaves git: Retain (the default: kept with its checkpoints; "
        "delete it with kubectl when done) or Delete (pruned with the job).")

    @property
    def retention(self) -> ClaimRetention:
        return self.when_deleted or ClaimRetention.RETAIN


class ScratchStorage(SpecModel):
    """A node-local emptyDir per pod."""

    mount_path: AbsolutePath
    size_limit: Quantity | None = None


class ClaimMount(SpecModel):
    """An existing PersistentVolumeClaim (a dataset, a model store) mounted into the pods of
    every role or of some. tfcompile never creates, changes or deletes it."""

    name: Annotated[
        str, StringConstraints(strict=True, pattern=DNS_LABEL_PATTERN, max_length=63)
    ] = Field(description="The pod volume's name (a DNS label), unique in the job.")
    claim_name: ObjectName = Field(description="The existing claim, in the job's namespace.")
    mount_path: AbsolutePath
    read_only: StrictBool = Field(
        description="true: the pods only read it (a dataset); false: they may write. Required: "
        "a claim tfcompile does not own is never written by surprise.")
    sub_path: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=4096)] | \
        None = Field(default=None, description="A folder of the claim to mount instead of its "
                     "root (relative, no `..`).")
    roles: list[RoleName] | None = Field(
        default=None, description="The roles that mount it (omitted: every role).")


class Storage(SpecModel):
    shared: SharedStorage | None = None
    scratch: ScratchStorage | None = None
    volumes: list[ClaimMount] = Field(
        default_factory=_no_items,
        description="Existing claims mounted read-only or read-write, per role or in every "
        "role; never created or deleted by tfcompile.",
    )
