"""Addresses, link names and the hosts file that make the pods of a local run find each other.

Every run uses the private range 10.244.0.0/16 (the pod network of a default flannel cluster):
pod number `i` of the run (in the order given) gets 10.244.0.0 + 2 + i. The range lives only inside
the run's own network namespaces (the pods' and the bridge's), which have no route anywhere else,
so it never meets the host's networks and two runs at once can both use it.

Names of links carry the run's identifier (six hexadecimal digits) and stay within the kernel's
15 characters: bridge `tfc<run>br`, bridge side of pod `i`'s veth `tfc<run>p<i>`, pod side `eth0`.

The hosts file answers every pod's DNS names as cluster DNS would for a pod of a headless
Service: `pod.service`, `pod.service.namespace`, `pod.service.namespace.svc` and
`pod.service.namespace.svc.<cluster domain>` (namespace `default` when the pod has none), plus the
pod's own hostname, laid out like the kubelet's managed hosts file. A run that gives its pods a
Service (the local node gives them the API server) adds its names.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from tfcompile.compiler.rendering.pods import Pod

NETWORK = ipaddress.IPv4Network("10.244.0.0/16")
# The first address is the bridge's own when the run gives its pods a way to a service (the
# local node's way to the API server); pods start at the second.
GATEWAY = NETWORK.network_address + 1
FIRST_HOST_OFFSET = 2
MAXIMUM_PODS = NETWORK.num_addresses - FIRST_HOST_OFFSET - 1
MAXIMUM_LINK_NAME = 15
POD_INTERFACE = "eth0"
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


def plan_addresses(pods: Sequence[Pod]) -> list[PodAddress]:
    """One address per pod, in order; raises ValueError beyond the range's capacity."""
    if len(pods) > MAXIMUM_PODS:
        raise ValueError(f"a local run holds at most {MAXIMUM_PODS} pods, not {len(pods)}")
    return [
        PodAddress(pod, position, NETWORK.network_address + FIRST_HOST_OFFSET + position)
        for position, pod in enumerate(pods)
    ]


def bridge_name(run_identifier: str) -> str:
    return _checked_link_name(f"tfc{run_identifier}br")


def bridge_side_link_name(run_identifier: str, position: int) -> str:
    return _checked_link_name(f"tfc{run_identifier}p{position}")


def _checked_link_name(name: str) -> str:
    if len(name) > MAXIMUM_LINK_NAME:
        raise ValueError(f"link name {name!r} is longer than {MAXIMUM_LINK_NAME} characters")
    return name


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


def hosts_file(own: PodAddress, everyone: Sequence[PodAddress], cluster_domain: str,
               services: Sequence[tuple[str, Sequence[str]]] = ()) -> str:
    """The /etc/hosts that pod `own` sees; `services` adds an address and its names each."""
    lines = [
        "# Hosts file of a tfcompile local run: the kubelet's, plus every pod's DNS names.",
        "127.0.0.1\tlocalhost",
        "::1\tlocalhost ip6-localhost ip6-loopback",
        "fe00::0\tip6-localnet",
        "fe00::0\tip6-mcastprefix",
        "fe00::1\tip6-allnodes",
        "fe00::2\tip6-allrouters",
    ]
    for entry in everyone:
        names = dns_names(entry.pod, cluster_domain)
        if entry.pod.name == own.pod.name and own.hostname not in names:
            names.append(own.hostname)
        if names:
            lines.append(f"{entry.address}\t" + " ".join(names))
    lines += [f"{address}\t" + " ".join(names) for address, names in services if names]
    return "\n".join(lines) + "\n"
