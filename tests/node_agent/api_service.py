"""The API server as the local node's pods see it: the `kubernetes` Service, as on a real node.

On a real node the kubelet gives every container the variables of the `kubernetes` Service of
namespace `default` (`KUBERNETES_SERVICE_HOST`, `KUBERNETES_PORT_443_TCP`, ..., whatever
`enableServiceLinks` says), cluster DNS answers `kubernetes.default.svc` with its cluster IP, and
kube-proxy sends what reaches that IP on to the API server. The local node does the same inside
its own namespaces: the Service's cluster IP goes on the node's bridge, every pod gets a route to
it and the Service's names in its hosts file, and `forwarder` relays the connections to the API
server on the host's loopback (the address in the node's kubeconfig), TLS untouched. The API
server's certificate names the Service (see `scripts/control-plane.sh`), so a pod verifies it with
the CA of its service-account volume, as in any cluster.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfcompile.compiler.local_run.network import NetworkPrograms, add_service_addresses
from tfcompile.compiler.rendering.environment import service_link_variables

from .api import ApiClient, ApiError
from .forwarder import Forwarder, loopback_target

SERVICE_PATH = "/api/v1/namespaces/default/services/kubernetes"
FIND_SECONDS = 60.0
HTTPS_PORT = 443


@dataclass(frozen=True)
class ApiService:
    """The `kubernetes` Service: its cluster IP, TCP ports and the variables it gives pods."""

    cluster_ip: str
    ports: tuple[int, ...]
    environment: Mapping[str, str]

    @classmethod
    def from_service(cls, service: Mapping[str, Any]) -> ApiService | None:
        spec = service.get("spec") or {}
        address = str(spec.get("clusterIP") or "")
        ports = tuple(int(port["port"]) for port in spec.get("ports") or []
                      if str(port.get("protocol") or "TCP") == "TCP")
        if address in ("", "None") or ":" in address or not ports:
            return None
        return cls(address, ports, service_link_variables(service))

    def host_names(self, namespace: str, cluster_domain: str) -> list[str]:
        """The names cluster DNS answers with the cluster IP for a pod of `namespace` (through
        its search path; the bare `kubernetes` only in namespace `default`)."""
        names = [f"kubernetes.default.svc.{cluster_domain}", "kubernetes.default.svc",
                 "kubernetes.default"]
        if namespace == "default":
            names.append("kubernetes")
        return names


def find_api_service(client: ApiClient, timeout: float = FIND_SECONDS) -> ApiService | None:
    """The `kubernetes` Service (the API server makes it soon after it starts), or None."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = client.get_or_none(SERVICE_PATH)
        except ApiError:
            found = None
        if found is not None:
            return ApiService.from_service(found)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.5)


def api_server_target(server: str) -> tuple[str, int]:
    """Host and port of the API server URL `server`, which must be on loopback."""
    parsed = urllib.parse.urlsplit(server)
    return loopback_target(parsed.hostname or "", parsed.port or HTTPS_PORT)


@dataclass
class ApiServiceAccess:
    """The Service's addresses on the bridge and the relay behind them; `close` ends the relay."""

    service: ApiService
    forwarder: Forwarder

    def close(self) -> None:
        self.forwarder.close()


def provide_api_service(client: ApiClient, service: ApiService, bridge: int,
                        run_identifier: str, programs: NetworkPrograms) -> ApiServiceAccess:
    """Put the Service's cluster IP on the bridge and relay its ports to the API server."""
    target = api_server_target(client.server)
    add_service_addresses(bridge, run_identifier, [service.cluster_ip], programs)
    forwarder = Forwarder.open(bridge, [(service.cluster_ip, port) for port in service.ports],
                               target)
    forwarder.start()
    return ApiServiceAccess(service, forwarder)
