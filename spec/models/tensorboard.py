"""The optional TensorBoard beside the job, its own part of the spec.
"""


from pydantic import (
    Field,
)

from .base import AbsolutePath, NonEmptyText, SpecModel, _no_items
from .roles import PodTemplate, ServiceType


class TensorBoard(SpecModel):
    """A TensorBoard Deployment and Service reading logs from the shared volume."""

    log_dir: AbsolutePath
    service_type: ServiceType = ServiceType.CLUSTER_IP
    image: NonEmptyText | None = None
    load_balancer_source_ranges: list[NonEmptyText] = Field(
        default_factory=_no_items,
        description="With serviceType LoadBalancer: the client CIDRs allowed (the Service's "
        "loadBalancerSourceRanges).",
    )
    pod_template: PodTemplate | None = Field(
        default=None,
        description="A pod template fragment for the TensorBoard pod (resources, nodeSelector, "
        "tolerations, volumes, sidecars, …), merged as a role's podTemplate is. The container "
        "named `tensorboard` is tfcompile's.",
    )
