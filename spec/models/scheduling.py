"""Where and how the pods are scheduled: the gang scheduler (Volcano or Kueue) and the
topology a gang keeps to, apart from the roles because they concern the job's placement only.
"""

from enum import StrEnum
from typing import Annotated

from pydantic import (
    Field,
    StringConstraints,
    model_validator,
)

from .base import QUALIFIED_NAME_PATTERN, ObjectName, SpecModel


class GangScheduler(StrEnum):
    """Who schedules a job's pods all at once (a gang), so a partly placed job holds nothing."""

    VOLCANO = "volcano"
    COSCHEDULING = "coscheduling"
    KUEUE = "kueue"


NodeLabelKey = Annotated[
    str, StringConstraints(strict=True, pattern=QUALIFIED_NAME_PATTERN, max_length=63)
]
"""A node label's key that names a topology level (Kueue's Workload keeps at most 63
characters of it)."""


class Topology(SpecModel):
    """Kueue's topology-aware scheduling: the node label of a level of the data centre (a rack,
    a block) within one of whose domains the job's pods are placed."""

    required: NodeLabelKey | None = Field(
        default=None,
        description="Place the pods within one domain of this level, or not at all "
        "(Kueue's kueue.x-k8s.io/podset-required-topology).",
    )
    preferred: NodeLabelKey | None = Field(
        default=None,
        description="Place the pods within one domain of this level if they fit, else of the "
        "levels above it (Kueue's kueue.x-k8s.io/podset-preferred-topology).",
    )

    @model_validator(mode="after")
    def _exactly_one_level(self) -> "Topology":
        if (self.required is None) == (self.preferred is None):
            raise ValueError("give exactly one of required or preferred (a node label naming "
                             "a topology level, such as cloud.provider.com/topology-rack)")
        return self

    def annotation(self) -> tuple[str, str]:
        """(Kueue's annotation, the level's node label)."""
        if self.required is not None:
            return "kueue.x-k8s.io/podset-required-topology", self.required
        assert self.preferred is not None
        return "kueue.x-k8s.io/podset-preferred-topology", self.preferred


class Scheduling(SpecModel):
    """Gang scheduling: every pod of the job is placed together, or none is."""

    gang: GangScheduler | None = Field(
        default=None,
        description="volcano (a PodGroup), coscheduling (scheduler-plugins' PodGroup) or kueue "
        "(one pod group across all roles).",
    )
    queue: ObjectName | None = Field(
        default=None,
        description="Volcano: the Queue; Kueue: the LocalQueue of the job's namespace.",
    )
    topology: Topology | None = Field(
        default=None,
        description="With gang: kueue, Kueue's topology-aware scheduling: every pod of the "
        "job within one domain of a node-label level (required or preferred).",
    )
