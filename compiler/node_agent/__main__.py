"""`python -m tfcompile.compiler.node_agent`: run the local node until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tfcompile.compiler.local_run.console import Console
from tfcompile.compiler.local_run.network import NetworkSetupError, create_bridge
from tfcompile.compiler.local_run.options import LocalRunOptions
from tfcompile.compiler.local_run.preflight import find_programs
from tfcompile.compiler.local_run.user_namespace import create_user_namespace, unused_range
from tfcompile.compiler.local_run.workspace import new_run_identifier

from .agent import NodeAgent, node_directories
from .api import ApiClient
from .api_service import ApiServiceAccess, find_api_service, provide_api_service
from .claims import ClaimProvisioner
from .forwarder import ForwarderError
from .node import NodeRegistration, NodeShape, default_memory
from .pod_runtime import NodeContext


def _arguments(arguments: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tfcompile.compiler.node_agent",
                                     description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True,
                        help="the node's own credentials (user system:node:NAME)")
    parser.add_argument("--provisioner-kubeconfig", type=Path, required=True,
                        help="credentials that may list claims and create volumes")
    parser.add_argument("--node-name", required=True)
    parser.add_argument("--directory", type=Path, required=True,
                        help="where pods' files and claims' directories are kept")
    parser.add_argument("--cpu", default="32", help="CPU capacity to advertise (default: 32)")
    parser.add_argument("--memory", default=None,
                        help="memory capacity to advertise (default: this machine's)")
    parser.add_argument("--max-pods", type=int, default=110)
    parser.add_argument("--backoff-seconds", type=float, default=10.0,
                        help="first restart back-off, doubling up to 300 s (default: 10)")
    return parser.parse_args(arguments)


def main(arguments: list[str]) -> int:
    options = _arguments(arguments)
    if os.geteuid() != 0:
        sys.stderr.write("node-agent: network and mount namespaces need root\n")
        return 1
    programs, missing = find_programs()
    if programs is None:
        sys.stderr.write("node-agent: " + "; ".join(missing) + "\n")
        return 1
    pods_directory, claims_directory = node_directories(options.directory)
    pods_directory.mkdir(parents=True, exist_ok=True)
    claims_directory.mkdir(parents=True, exist_ok=True)
    ids = unused_range()
    if ids is None:
        sys.stderr.write("node-agent: no range of host user IDs is free for the pods' user "
                         "namespace\n")
        return 1
    identifier = new_run_identifier()
    node_client = ApiClient.from_kubeconfig(options.kubeconfig)
    provisioner_client = ApiClient.from_kubeconfig(options.provisioner_kubeconfig)
    bridge = create_bridge(identifier, programs)
    users = create_user_namespace(ids)
    console = Console(sys.stdout)
    access: ApiServiceAccess | None = None
    try:
        console.plain(f"node-agent: pods run as host user and group IDs {ids.describe()} "
                      "(a user namespace), which no account of this machine has")
        service = find_api_service(node_client)
        if service is None:
            console.plain("node-agent: no `kubernetes` Service in namespace default: the pods "
                          "get no way to the API server")
        else:
            try:
                access = provide_api_service(node_client, service, bridge, identifier, programs)
            except (ForwarderError, NetworkSetupError) as error:
                sys.stderr.write(f"node-agent: cannot give the pods the API server: {error}\n")
                return 1
            console.plain(f"node-agent: pods reach the API server at {service.cluster_ip} "
                          f"(kubernetes.default.svc), relayed to {node_client.server}")
        node = NodeContext(
            client=node_client, node_name=options.node_name, host_address="127.0.0.1",
            bridge=bridge, run_identifier=identifier, programs=programs,
            pods_directory=pods_directory, claims_directory=claims_directory, console=console,
            options=LocalRunOptions(backoff_initial_seconds=options.backoff_seconds,
                                    maximum_grace_seconds=300.0),
            users=users,
            api_service=service if access is not None else None,
        )
        shape = NodeShape(options.node_name, "127.0.0.1", options.cpu,
                          options.memory or default_memory(), options.max_pods)
        agent = NodeAgent(node, NodeRegistration(node_client, shape),
                          ClaimProvisioner(provisioner_client, claims_directory,
                                           options.node_name, ids))
        agent.run()
    finally:
        if access is not None:
            access.close()
        users.close()
        os.close(bridge)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
