"""How the local node's pods reach the API server: the `kubernetes` Service's names and the relay
from the node's bridge namespace to loopback, with real namespaces for the relay (needs root)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from tests.node_agent.api_service import ApiService, api_server_target
from tests.node_agent.forwarder import Forwarder, ForwarderError
from tfcompile.compiler.local_run import addressing
from tfcompile.compiler.local_run.network import (
    add_pod_network,
    add_service_addresses,
    create_bridge,
)
from tfcompile.compiler.local_run.preflight import find_programs
from tfcompile.compiler.local_run.workspace import new_run_identifier
from tfcompile.compiler.rendering.pods import Pod

KUBERNETES_SERVICE = {
    "metadata": {"name": "kubernetes", "namespace": "default"},
    "spec": {"clusterIP": "10.0.0.1", "ports": [
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
}


def test_the_service_is_named_as_cluster_dns_answers_a_pod_of_each_namespace() -> None:
    service = ApiService.from_service(KUBERNETES_SERVICE)
    assert service is not None
    assert (service.cluster_ip, service.ports) == ("10.0.0.1", (443,))
    assert service.environment["KUBERNETES_SERVICE_HOST"] == "10.0.0.1"
    assert service.host_names("ml", "cluster.local") == [
        "kubernetes.default.svc.cluster.local", "kubernetes.default.svc", "kubernetes.default"]
    # The bare name resolves only through the search path of namespace default.
    assert service.host_names("default", "cluster.local")[-1] == "kubernetes"
    headless = {"metadata": {"name": "kubernetes"},
                "spec": {"clusterIP": "None", "ports": [{"port": 443}]}}
    assert ApiService.from_service(headless) is None


def test_the_relay_connects_to_loopback_only() -> None:
    assert api_server_target("https://127.0.0.1:6443") == ("127.0.0.1", 6443)
    assert api_server_target("https://localhost:36443/") == ("127.0.0.1", 36443)
    for server in ("https://10.1.2.3:6443", "https://apiserver:6443"):
        with pytest.raises(ForwarderError, match="only connects to loopback"):
            api_server_target(server)


@contextlib.contextmanager
def echo_server() -> Iterator[tuple[int, list[int]]]:
    """A server on the host's loopback that sends back what it receives; yields its port and
    the number of bytes of each connection it served."""
    listener = socket.create_server(("127.0.0.1", 0))
    served: list[int] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(connection,), daemon=True).start()

    def echo(connection: socket.socket) -> None:
        with connection:
            received = 0
            while chunk := connection.recv(65536):
                connection.sendall(chunk)
                received += len(chunk)
            served.append(received)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], served
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join()


CLIENT = """
import hashlib, json, socket, sys, threading
port = int(sys.argv[1])
payload = bytes(range(256)) * 2000  # 512 KB, more than any socket buffer


def attempt(host, port, data):
    try:
        with socket.create_connection((host, port), timeout=5) as connection:
            sender = threading.Thread(target=lambda: (connection.sendall(data),
                                                      connection.shutdown(socket.SHUT_WR)))
            sender.start()
            answer = bytearray()
            while chunk := connection.recv(65536):
                answer += chunk
            sender.join()
            return hashlib.sha256(answer).hexdigest()
    except OSError as error:
        return type(error).__name__


results = {}
threads = [threading.Thread(target=lambda i=i: results.__setitem__(
    f"service-{i}", attempt("10.0.0.1", 443, payload))) for i in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
results["own loopback"] = attempt("127.0.0.1", port, b"hi")
results["beyond"] = attempt("10.0.0.2", 443, b"hi")
print(json.dumps(results))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="network namespaces need root on Linux")
def test_a_pod_reaches_the_service_address_relayed_to_loopback_and_nothing_beyond() -> None:
    programs, missing = find_programs()
    assert programs is not None, missing
    identifier = new_run_identifier()
    pod = Pod(name="job-worker-0", namespace="ml", owner_kind="StatefulSet",
              owner_name="job-worker", index=0, hostname="job-worker-0", subdomain="job-worker",
              labels={}, annotations={}, containers=[], init_containers=[], volumes=[],
              restart_policy="Always", termination_grace_period_seconds=30)
    with echo_server() as (port, served):
        bridge = create_bridge(identifier, programs)
        descriptors = [bridge]
        forwarder: Forwarder | None = None
        try:
            add_service_addresses(bridge, identifier, ["10.0.0.1"], programs)
            forwarder = Forwarder.open(bridge, [("10.0.0.1", 443)], ("127.0.0.1", port))
            forwarder.start()
            entry = addressing.plan_addresses([pod])[0]
            namespaces = add_pod_network(bridge, identifier, entry, programs, ["10.0.0.1"])
            descriptors += [namespaces.network, namespaces.uts]
            completed = subprocess.run(
                [programs.nsenter, f"--net=/proc/{os.getpid()}/fd/{namespaces.network}", "--",
                 sys.executable, "-c", CLIENT, str(port)],
                capture_output=True, text=True, timeout=60, check=False)
            assert completed.returncode == 0, completed.stderr
            results = json.loads(completed.stdout)
            expected = hashlib.sha256(bytes(range(256)) * 2000).hexdigest()
            assert [results[f"service-{i}"] for i in range(4)] == [expected] * 4
            # The pod's loopback is its own, and no route leads anywhere else.
            assert results["own loopback"] == "ConnectionRefusedError"
            assert results["beyond"] == "OSError"  # network unreachable
            assert sorted(served) == [512000] * 4
            relay = forwarder
            forwarder = None
            relay.close()
            assert relay.listeners == [] and relay.connections == 0
            assert "API server relay" not in [thread.name for thread in threading.enumerate()]
        finally:
            if forwarder is not None:
                forwarder.close()
            for descriptor in descriptors:
                os.close(descriptor)
