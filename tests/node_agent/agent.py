"""The node agent's loop: the pods bound to this node, run as processes, reported back.

Every pass (about once a second): renew the node's heartbeat; give pending claims a volume; list
the pods whose `spec.nodeName` is this node; set up the new ones, step the running ones (exits,
restarts with back-off), stop the deleted ones (SIGTERM, grace period, SIGKILL, then delete the
pod object with grace 0 as the kubelet confirms) and patch each pod's status when it changed.
Every pod gets its own network and UTS namespaces on one bridge of the agent's, with an address
from 10.244.0.0/16 that stays the same for a pod name while the agent runs (a recreated
StatefulSet pod comes back at its old address), and a hosts file answering the DNS names of every
pod of its namespace on this node (`<pod>.<service>`...), rewritten in place as pods come and go,
and those of the `kubernetes` Service, which the agent relays to the API server (`api_service`).

On SIGTERM or SIGINT the agent stops every pod it runs, frees their namespaces and deletes their
files; the bridge namespace is held only by the agent, so it goes when the agent ends.
"""

from __future__ import annotations

import ipaddress
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from tfcompile.compiler.local_run import addressing
from tfcompile.compiler.local_run.addressing import PodAddress
from tfcompile.compiler.local_run.network import NetworkSetupError

from .api import ApiError
from .claims import ClaimProvisioner
from .node import NodeRegistration
from .pod_runtime import NodeContext, PodRuntime
from .pod_status import pod_status
from .sources import NotReadyYet

PASS_SECONDS = 1.0
SHUTDOWN_GRACE_SECONDS = 10.0
MAXIMUM_LINKS = 99999


@dataclass
class AddressBook:
    """Stable addresses per pod name, and fresh link positions per pod instance."""

    addresses: dict[str, ipaddress.IPv4Address]
    next_position: int = 0

    def entry_for(self, runtime: PodRuntime, pod: Any) -> PodAddress:
        if runtime.key not in self.addresses:
            offset = addressing.FIRST_HOST_OFFSET + len(self.addresses)
            if offset > addressing.MAXIMUM_PODS:
                raise NotReadyYet("the node's pod network is full")
            self.addresses[runtime.key] = addressing.NETWORK.network_address + offset
        position = self.next_position
        self.next_position = (self.next_position + 1) % MAXIMUM_LINKS
        return PodAddress(pod, position, self.addresses[runtime.key])


class NodeAgent:
    def __init__(self, node: NodeContext, registration: NodeRegistration,
                 provisioner: ClaimProvisioner) -> None:
        self.node = node
        self.registration = registration
        self.provisioner = provisioner
        self.runtimes: dict[str, PodRuntime] = {}
        self.addresses = AddressBook({})
        self.stop_requested = threading.Event()
        self._hosts_written: dict[str, str] = {}

    def log(self, message: str) -> None:
        self.node.console.plain(f"node-agent: {message}")

    # The loop --------------------------------------------------------------------------------

    def run(self) -> None:
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, self._on_signal)
        self.registration.register()
        self.log(f"node {self.node.node_name} registered")
        try:
            while not self.stop_requested.is_set():
                started = time.monotonic()
                try:
                    self.pass_once()
                except ApiError as error:
                    self.log(f"API server: {error}")
                except Exception:  # a node keeps its pods running through its own bugs
                    self.log("internal error (the pass is retried):")
                    for line in traceback.format_exc().splitlines():
                        self.log(line)
                self.stop_requested.wait(max(0.0, PASS_SECONDS - (time.monotonic() - started)))
        finally:
            self.shutdown()

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        self.stop_requested.set()

    def pass_once(self) -> None:
        self.registration.heartbeat()
        for line in self.provisioner.pass_once():
            self.log(line)
        listed = self.node.client.get("/api/v1/pods", {
            "fieldSelector": f"spec.nodeName={self.node.node_name}"})["items"]
        present = {str(item["metadata"]["uid"]): item for item in listed}
        for uid, api_pod in present.items():
            runtime = self.runtimes.get(uid)
            if runtime is None:
                runtime = self.runtimes[uid] = PodRuntime(api_pod)
                self.log(f"pod {runtime.key} bound here")
            runtime.api_pod = api_pod
            if api_pod["metadata"].get("deletionTimestamp"):
                self._delete(runtime)
            elif runtime.supervisor is None and runtime.ending is None:
                self._set_up(runtime)
        for uid in [uid for uid in self.runtimes if uid not in present]:
            runtime = self.runtimes[uid]
            runtime.begin_stop(0.0)
            if runtime.stopped:
                self._forget(runtime)
        # Before the steps start new containers: a new pod's names resolve from its first start.
        self._write_hosts_files()
        for runtime in list(self.runtimes.values()):
            runtime.step()
        for runtime in list(self.runtimes.values()):
            if runtime.uid in present and runtime.stopper is None:
                self._report(runtime)

    # Pods --------------------------------------------------------------------------------------

    def _set_up(self, runtime: PodRuntime) -> None:
        try:
            entry = self.addresses.entry_for(runtime, None)
            runtime.set_up(self.node, entry)
        except NotReadyYet as reason:
            if str(reason) != runtime.waiting_message:
                self.log(f"pod {runtime.key} waits: {reason}")
            runtime.waiting_message = str(reason)
            return
        except (NetworkSetupError, OSError) as error:
            runtime.waiting_reason = "CreateContainerError"
            runtime.waiting_message = str(error)
            self.log(f"pod {runtime.key} could not be set up: {error}")
            return
        address = runtime.address.address if runtime.address else ""
        self.log(f"pod {runtime.key} starts at {address}")

    def _delete(self, runtime: PodRuntime) -> None:
        metadata = runtime.api_pod["metadata"]
        if runtime.stopper is None:
            grace = metadata.get("deletionGracePeriodSeconds")
            if grace is None:
                grace = runtime.api_pod["spec"].get("terminationGracePeriodSeconds", 30)
            self.log(f"pod {runtime.key} deleted: stopping it (grace {grace} s)")
            runtime.begin_stop(float(grace))
        if not runtime.stopped:
            return
        try:
            self.node.client.delete(
                f"/api/v1/namespaces/{runtime.namespace}/pods/{runtime.name}",
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                 "preconditions": {"uid": runtime.uid}})
        except ApiError as error:
            if error.status not in (404, 409):
                raise
        self.log(f"pod {runtime.key} stopped and removed")
        self._forget(runtime)

    def _forget(self, runtime: PodRuntime) -> None:
        for failure in runtime.release():
            self.log(f"warning: could not delete {failure}")
        self.runtimes.pop(runtime.uid, None)
        self._hosts_written.pop(runtime.uid, None)

    def _report(self, runtime: PodRuntime) -> None:
        status = pod_status(runtime, self.node.host_address)
        if status == runtime.reported:
            return
        try:
            self.node.client.patch(
                f"/api/v1/namespaces/{runtime.namespace}/pods/{runtime.name}/status",
                {"metadata": {"uid": runtime.uid}, "status": status})
        except ApiError as error:
            if error.status in (404, 409):
                return
            raise
        runtime.reported = status

    def _write_hosts_files(self) -> None:
        running = [r for r in self.runtimes.values()
                   if r.address is not None and r.workspace is not None and r.stopper is None]
        for runtime in running:
            assert runtime.address is not None and runtime.workspace is not None
            everyone = [other.address for other in running
                        if other.namespace == runtime.namespace and other.address is not None]
            domain = self.node.options.cluster_domain
            service = self.node.api_service
            services = [] if service is None else [
                (service.cluster_ip, service.host_names(runtime.namespace, domain))]
            text = addressing.hosts_file(runtime.address, everyone, domain, services)
            if self._hosts_written.get(runtime.uid) != text:
                # In place, not by rename: the file is bind-mounted into the pod's containers.
                runtime.workspace.hosts_file(runtime.name).write_text(text, encoding="utf-8")
                self._hosts_written[runtime.uid] = text

    # Shutting down -----------------------------------------------------------------------------

    def shutdown(self) -> None:
        self.log("stopping every pod of the node")
        for runtime in self.runtimes.values():
            runtime.begin_stop(SHUTDOWN_GRACE_SECONDS)
        for runtime in self.runtimes.values():
            if runtime.stopper is not None:
                runtime.stopper.join()
        for runtime in list(self.runtimes.values()):
            self._forget(runtime)
        self.log("stopped")


def node_directories(run_directory: Path) -> tuple[Path, Path]:
    """Where pods' files and claims' directories live inside the node's run directory."""
    return run_directory / "pods", run_directory / "claims"
