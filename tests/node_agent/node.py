"""The Node object of this machine and its heartbeats.

The agent registers a Node with the Ready condition, an InternalIP on loopback and a capacity it
is told (the pods share this machine, so the capacity is what the scheduler may place, not what
the hardware has), then renews its Lease in `kube-node-lease` every few seconds and refreshes the
status now and then, as the kubelet does; the node lifecycle controller marks a node whose Lease
lapses NotReady and evicts its pods.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from typing import Any

from .api import ApiClient, ApiError
from .pod_runtime import timestamp

LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
RENEW_SECONDS = 10.0
STATUS_SECONDS = 60.0


@dataclass(frozen=True)
class NodeShape:
    name: str
    address: str
    cpu: str
    memory: str
    pods: int


def _micro_time() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def node_status(shape: NodeShape) -> dict[str, Any]:
    now = timestamp()
    resources = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods)}
    conditions = [
        {"type": kind, "status": "False", "reason": reason, "message": message,
         "lastHeartbeatTime": now, "lastTransitionTime": now}
        for kind, reason, message in (
            ("MemoryPressure", "NodeHasSufficientMemory", "not measured on a local node"),
            ("DiskPressure", "NodeHasNoDiskPressure", "not measured on a local node"),
            ("PIDPressure", "NodeHasSufficientPID", "not measured on a local node"),
        )
    ]
    conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "message": "the tfcompile node agent is running",
                       "lastHeartbeatTime": now, "lastTransitionTime": now})
    return {
        "capacity": resources,
        "allocatable": resources,
        "conditions": conditions,
        "addresses": [{"type": "InternalIP", "address": shape.address},
                      {"type": "Hostname", "address": shape.name}],
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": platform.release(), "osImage": "tfcompile local node",
            "containerRuntimeVersion": "tfcompile-local://0", "kubeletVersion": "",
            "kubeProxyVersion": "", "operatingSystem": "linux",
            "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                platform.machine(), platform.machine()),
        },
    }


class NodeRegistration:
    """Creates the Node and its Lease, and keeps both fresh."""

    def __init__(self, client: ApiClient, shape: NodeShape) -> None:
        self.client = client
        self.shape = shape
        self._renewed = 0.0
        self._status_sent = 0.0

    def register(self) -> None:
        name = self.shape.name
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": node_status(self.shape)["nodeInfo"]["architecture"]}},
            "spec": {},
        }
        try:
            self.client.create("/api/v1/nodes", node)
        except ApiError as error:
            if error.status != 409:
                raise
        self.send_status()
        self.renew()

    def send_status(self) -> None:
        self.client.patch(f"/api/v1/nodes/{self.shape.name}/status",
                          {"status": node_status(self.shape)})
        self._status_sent = time.monotonic()

    def renew(self) -> None:
        name = self.shape.name
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}"
        spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": _micro_time()}
        try:
            self.client.patch(path, {"spec": spec})
        except ApiError as error:
            if error.status != 404:
                raise
            node = self.client.get(f"/api/v1/nodes/{name}")
            self.client.create(
                f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases",
                {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": name, "ownerReferences": [{
                     "apiVersion": "v1", "kind": "Node", "name": name,
                     "uid": node["metadata"]["uid"]}]},
                 "spec": spec})
        self._renewed = time.monotonic()

    def heartbeat(self) -> None:
        now = time.monotonic()
        if now - self._renewed >= RENEW_SECONDS:
            self.renew()
        if now - self._status_sent >= STATUS_SECONDS:
            self.send_status()


def default_memory() -> str:
    """This machine's memory, as a quantity."""
    pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return f"{pages * size // 2**20}Mi"
