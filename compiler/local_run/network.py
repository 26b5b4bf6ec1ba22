"""The network of a local run: a bridge in its own namespace and one namespace per pod.

Nothing is added to the host's network: the bridge lives in a namespace of the run, each veth pair
is created inside that namespace with its peer placed directly in the pod's namespace, and no
namespace gets a route beyond the run's range (see `addressing`), except to addresses the run puts
on its own bridge (`add_service_addresses`: the local node's way to the API server). All
namespaces are anonymous and held only by open file descriptors of the runner (and later by the
pods' processes), so closing `RunNetwork` and ending the pods frees every namespace, link and
address at once.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import addressing
from .addressing import PodAddress
from .namespace_holder import NETWORK

HOLDER_MODULE = f"{__package__}.namespace_holder"
HOLDER_START_SECONDS = 20.0


class NetworkSetupError(RuntimeError):
    """The run's network could not be built; the message says which step failed."""


@dataclass(frozen=True)
class PodNamespaces:
    """Open descriptors of one pod's network and UTS namespaces."""

    network: int
    uts: int


@dataclass
class RunNetwork:
    """The namespaces of a run: the bridge's, and each pod's by name; `close` releases them."""

    bridge: int | None = None
    pods: dict[str, PodNamespaces] = field(default_factory=dict)

    def close(self) -> None:
        descriptors = [] if self.bridge is None else [self.bridge]
        for namespaces in self.pods.values():
            descriptors += [namespaces.network, namespaces.uts]
        for descriptor in descriptors:
            with contextlib.suppress(OSError):
                os.close(descriptor)
        self.bridge = None
        self.pods.clear()


@dataclass(frozen=True)
class NetworkPrograms:
    """Absolute paths of the programs used to configure namespaces."""

    ip: str
    nsenter: str


def start_holder(kind: str, hostname: str | None = None) -> subprocess.Popen[str]:
    """Start a `namespace_holder` making namespaces of `kind` (its NETWORK or USER); the
    namespaces exist once `wait_ready` returns, and until `release_holder`."""
    arguments = [sys.executable, "-P", "-m", HOLDER_MODULE, str(os.getpid()), kind]
    if hostname is not None:
        arguments.append(hostname)
    return subprocess.Popen(
        arguments,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={},
        start_new_session=True,
    )


def wait_ready(holder: subprocess.Popen[str], what: str = "a network namespace") -> None:
    """Wait until the holder's namespaces exist; NetworkSetupError says why they do not."""
    assert holder.stdout is not None
    line = holder.stdout.readline()
    if line.strip() != "ready":
        holder.kill()
        _, error = holder.communicate(timeout=HOLDER_START_SECONDS)
        raise NetworkSetupError(f"could not create {what}: {error.strip()}")


def release_holder(holder: subprocess.Popen[str]) -> None:
    """End a holder (closing its standard input ends it) and reap it."""
    for stream in (holder.stdin, holder.stdout, holder.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        holder.wait(timeout=HOLDER_START_SECONDS)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait()


def _run_batch(programs: NetworkPrograms, holder: subprocess.Popen[str],
               commands: Sequence[str], what: str) -> None:
    result = subprocess.run(
        [programs.nsenter, f"--net=/proc/{holder.pid}/ns/net", "--", programs.ip, "-batch", "-"],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise NetworkSetupError(f"could not configure {what}: {result.stderr.strip()}")


def _pod_namespaces(holder: subprocess.Popen[str]) -> PodNamespaces:
    """Open a pod's network and UTS namespaces through its holder process."""
    network_descriptor = _open_namespace(holder, "net")
    try:
        uts_descriptor = _open_namespace(holder, "uts")
    except OSError:
        os.close(network_descriptor)
        raise
    return PodNamespaces(network_descriptor, uts_descriptor)


def _open_namespace(holder: subprocess.Popen[str], kind: str) -> int:
    return os.open(f"/proc/{holder.pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)


def _bridge_commands(run_identifier: str, plan: Sequence[PodAddress],
                     holders: dict[str, subprocess.Popen[str]]) -> list[str]:
    bridge = addressing.bridge_name(run_identifier)
    commands = ["link set lo up", f"link add {bridge} type bridge", f"link set {bridge} up"]
    for entry in plan:
        link = addressing.bridge_side_link_name(run_identifier, entry.position)
        commands += [
            f"link add {link} type veth peer name {addressing.POD_INTERFACE} "
            f"netns {holders[entry.pod.name].pid}",
            f"link set {link} master {bridge}",
            f"link set {link} up",
        ]
    return commands


def _pod_commands(entry: PodAddress, service_addresses: Sequence[str] = ()) -> list[str]:
    interface = addressing.POD_INTERFACE
    return [
        "link set lo up",
        f"address add {entry.address}/{addressing.NETWORK.prefixlen} dev {interface}",
        f"link set {interface} up",
        *(f"route add {address}/32 via {addressing.GATEWAY} dev {interface}"
          for address in service_addresses),
    ]


def create_network(run_identifier: str, plan: Sequence[PodAddress],
                   programs: NetworkPrograms) -> RunNetwork:
    """Build the bridge namespace and one namespace per pod, wired and addressed."""
    network = RunNetwork()
    holders: dict[str, subprocess.Popen[str]] = {}
    bridge_holder: subprocess.Popen[str] | None = None
    try:
        bridge_holder = start_holder(NETWORK)
        for entry in plan:
            holders[entry.pod.name] = start_holder(NETWORK, entry.hostname)
        wait_ready(bridge_holder)
        for holder in holders.values():
            wait_ready(holder)
        _run_batch(programs, bridge_holder, _bridge_commands(run_identifier, plan, holders),
                   "the run's bridge")
        network.bridge = _open_namespace(bridge_holder, "net")
        for entry in plan:
            holder = holders[entry.pod.name]
            _run_batch(programs, holder, _pod_commands(entry),
                       f"the network of pod {entry.pod.name}")
            network.pods[entry.pod.name] = _pod_namespaces(holder)
    except BaseException:
        network.close()
        raise
    finally:
        for holder in [*holders.values(), *([bridge_holder] if bridge_holder else [])]:
            release_holder(holder)
    return network


# A network that grows and shrinks: the same bridge namespace, pods added while it runs. --------


def create_bridge(run_identifier: str, programs: NetworkPrograms) -> int:
    """A new namespace holding the run's bridge; returns a descriptor of it (close to free)."""
    holder = start_holder(NETWORK)
    try:
        wait_ready(holder)
        bridge = addressing.bridge_name(run_identifier)
        _run_batch(programs, holder, ["link set lo up", f"link add {bridge} type bridge",
                                      f"link set {bridge} up"], "the bridge")
        return _open_namespace(holder, "net")
    finally:
        release_holder(holder)


def _nsenter_batch(programs: NetworkPrograms, namespace: int, commands: Sequence[str],
                   what: str) -> None:
    """Run `ip -batch` inside the network namespace open as descriptor `namespace`."""
    result = subprocess.run(
        [programs.nsenter, f"--net=/proc/{os.getpid()}/fd/{namespace}", "--", programs.ip,
         "-batch", "-"],
        input="\n".join(commands) + "\n", capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        raise NetworkSetupError(f"could not {what}: {result.stderr.strip()}")


def add_service_addresses(bridge: int, run_identifier: str, service_addresses: Sequence[str],
                          programs: NetworkPrograms) -> None:
    """Give the bridge (in namespace `bridge`) the gateway address and `service_addresses`.

    Something listening on a service address inside the bridge's namespace is then what pods
    reach there (through the route `add_pod_network` gives them); nothing routes further.
    """
    bridge_link = addressing.bridge_name(run_identifier)
    _nsenter_batch(programs, bridge, [
        f"address add {addressing.GATEWAY}/{addressing.NETWORK.prefixlen} dev {bridge_link}",
        *(f"address add {address}/32 dev {bridge_link}" for address in service_addresses),
    ], "give the bridge its addresses")


def add_pod_network(bridge: int, run_identifier: str, entry: PodAddress,
                    programs: NetworkPrograms,
                    service_addresses: Sequence[str] = ()) -> PodNamespaces:
    """New network and UTS namespaces for one pod, wired to the bridge in namespace `bridge`.

    The veth pair is made inside the bridge's namespace with its peer placed in the pod's; when
    the pod's namespace is freed (its descriptors closed, its processes gone) the pair goes too.
    Each of `service_addresses` (see `add_service_addresses`) gets a route through the gateway.
    """
    holder = start_holder(NETWORK, entry.hostname)
    try:
        wait_ready(holder)
        link = addressing.bridge_side_link_name(run_identifier, entry.position)
        _nsenter_batch(programs, bridge, [
            f"link add {link} type veth peer name {addressing.POD_INTERFACE} netns {holder.pid}",
            f"link set {link} master {addressing.bridge_name(run_identifier)}",
            f"link set {link} up",
        ], f"wire pod {entry.pod.name} to the bridge")
        _run_batch(programs, holder, _pod_commands(entry, service_addresses),
                   f"the network of pod {entry.pod.name}")
        return _pod_namespaces(holder)
    finally:
        release_holder(holder)
