"""Addresses and names that make the pods of a local run find each other.

Each run has a podman network of its own; podman chooses its subnet among those free on this
machine. Pod number `i` of the run (in the order given) gets the subnet's address 2 + i (the
first is the network's gateway).

Each pod's hosts file answers every pod's DNS names as cluster DNS would for a pod of a headless
Service: `pod.service`, `pod.service.namespace`, `pod.service.namespace.svc` and
`pod.service.namespace.svc.<cluster domain>` (namespace `default` when the pod has none), plus the
pod's own hostname; podman writes it from `--add-host` entries (`container_runtime`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from tfcompile.compiler.rendering.pods import Pod

FIRST_HOST_OFFSET = 2
DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class PodAddress:
    """Where one pod of the run lives on the run's bridge."""

    pod: Pod
    position: int
    address: ipaddress.IPv4Address

    @property
    def hostname(self) -> str:
        return pod_hostname(self.pod)


def pod_hostname(pod: Pod) -> str:
    """The hostname the kubelet gives the pod (and puts in `HOSTNAME`)."""
    return pod.hostname or pod.name


def capacity(network: ipaddress.IPv4Network) -> int:
    """How many pods fit on `network` (its gateway and broadcast addresses aside)."""
    return max(network.num_addresses - FIRST_HOST_OFFSET - 1, 0)


def plan_addresses(pods: Sequence[Pod], network: ipaddress.IPv4Network) -> list[PodAddress]:
    """One address per pod, in order; raises ValueError beyond the network's capacity."""
    if len(pods) > capacity(network):
        raise ValueError(f"the run's network {network} holds at most {capacity(network)} pods, "
                         f"not {len(pods)}")
    return [
        PodAddress(pod, position, network.network_address + FIRST_HOST_OFFSET + position)
        for position, pod in enumerate(pods)
    ]


def dns_names(pod: Pod, cluster_domain: str) -> list[str]:
    """The pod's names in cluster DNS, the fully qualified one first; none without a subdomain."""
    if not pod.subdomain:
        return []
    namespace = pod.namespace or DEFAULT_NAMESPACE
    short = f"{pod_hostname(pod)}.{pod.subdomain}"
    return [
        f"{short}.{namespace}.svc.{cluster_domain}",
        f"{short}.{namespace}.svc",
        f"{short}.{namespace}",
        short,
    ]


def host_entries(own: PodAddress, everyone: Sequence[PodAddress],
                 cluster_domain: str) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The names pod `own`'s hosts file answers, each with its address: every pod's DNS names,
    and its own hostname."""
    entries: list[tuple[str, ipaddress.IPv4Address]] = []
    for entry in everyone:
        names = dns_names(entry.pod, cluster_domain)
        if entry.pod.name == own.pod.name and own.hostname not in names:
            names.append(own.hostname)
        entries += [(name, entry.address) for name in names]
    return entries
