"""One pod bound to this node: from its API object to running processes, and back.

Setting up reuses `local_run`'s runtime piece by piece: the pod as the kubelet would build it
(`rendering.pods.pod_from_template`, environment and `$(VAR)` expansion included), its volumes
(`local_run.volumes`), its own network and UTS namespaces wired to the node's bridge
(`local_run.network.add_pod_network`), one start file and helper per container
(`local_run.runner`), and a `Supervisor` that restarts containers with the kubelet's back-off.
The node agent calls `step` on every pass and reads the supervisor's state to report the pod's
status; `stop` ends the containers (SIGTERM, the grace period, SIGKILL) and `release` frees the
namespaces and the pod's files.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tfcompile.compiler.local_run import volumes
from tfcompile.compiler.local_run.addressing import PodAddress
from tfcompile.compiler.local_run.backoff import RestartBackoff
from tfcompile.compiler.local_run.console import Console
from tfcompile.compiler.local_run.network import NetworkPrograms, PodNamespaces, add_pod_network
from tfcompile.compiler.local_run.options import LocalRunOptions
from tfcompile.compiler.local_run.preflight import unresolved_reference_problems
from tfcompile.compiler.local_run.runner import launch_container, write_start_file
from tfcompile.compiler.local_run.supervisor import ContainerRun, Ending, PodRun, Supervisor
from tfcompile.compiler.local_run.user_namespace import UserNamespace
from tfcompile.compiler.local_run.workspace import Workspace
from tfcompile.compiler.rendering.pods import POD_INDEX_LABEL, Container, Pod, pod_from_template

from . import projected
from .api import ApiClient
from .api_service import ApiService
from .sources import NotReadyYet, check_claims, fetch_sources

# A node restarts containers for as long as the pod exists.
UNLIMITED_RESTARTS = 2**31


def timestamp(seconds: float | None = None) -> str:
    """RFC 3339 in UTC, to the second, as Kubernetes writes times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclass
class ContainerHistory:
    """What the API reports of one container that the supervisor does not keep: wall times."""

    seen_starts: int = 0
    started_at: str | None = None
    last_terminated: dict[str, Any] | None = None
    terminated_for: int = 0  # the start whose end is recorded in last_terminated


@dataclass(frozen=True)
class NodeContext:
    """What every pod of the node shares."""

    client: ApiClient
    node_name: str
    host_address: str
    bridge: int
    run_identifier: str
    programs: NetworkPrograms
    pods_directory: Path
    claims_directory: Path
    console: Console
    options: LocalRunOptions
    users: UserNamespace  # every pod's containers run in it, as no user of this machine
    api_service: ApiService | None = None  # None: the pods have no way to the API server

    def service_environment(self) -> dict[str, str]:
        return dict(self.api_service.environment) if self.api_service else {}

    def service_addresses(self) -> list[str]:
        return [self.api_service.cluster_ip] if self.api_service else []


def _rendering_pod(api_pod: dict[str, Any], runtime_fields: dict[str, str],
                   sources: Any, service_environment: dict[str, str]) -> Pod:
    metadata, spec = api_pod["metadata"], api_pod["spec"]
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    owners = metadata.get("ownerReferences") or [{}]
    return pod_from_template(
        name=str(metadata["name"]),
        namespace=str(metadata["namespace"]),
        owner_kind=str(owners[0].get("kind", "")),
        owner_name=str(owners[0].get("name", "")),
        index=int(labels.get(POD_INDEX_LABEL, "0") or 0),
        template={"metadata": {"labels": labels, "annotations": metadata.get("annotations")},
                  "spec": spec},
        extra_labels={},
        hostname=str(spec.get("hostname") or metadata["name"]),
        subdomain=spec.get("subdomain") or None,
        sources=sources,
        runtime_fields=runtime_fields,
        service_environment=service_environment,
    )


@dataclass(eq=False)
class PodRuntime:
    """The processes of one pod (by UID), their namespaces and files."""

    api_pod: dict[str, Any]
    address: PodAddress | None = None
    pod: Pod | None = None
    workspace: Workspace | None = None
    namespaces: PodNamespaces | None = None
    supervisor: Supervisor | None = None
    ending: Ending | None = None
    waiting_reason: str = "ContainerCreating"
    waiting_message: str = ""
    start_time: str = field(default_factory=timestamp)
    histories: dict[str, ContainerHistory] = field(default_factory=dict)
    stopper: threading.Thread | None = None
    stopped: bool = False
    reported: dict[str, Any] | None = None
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def uid(self) -> str:
        return str(self.api_pod["metadata"]["uid"])

    @property
    def name(self) -> str:
        return str(self.api_pod["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.api_pod["metadata"]["namespace"])

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    # Starting ----------------------------------------------------------------------------------

    def set_up(self, node: NodeContext, address: PodAddress) -> None:
        """Build the pod's volumes, namespaces and start files, and begin supervising it.

        Raises NotReadyYet (reported as a waiting reason) when something it needs is missing;
        whatever was made is released then, and the next pass tries again."""
        spec, namespace = self.api_pod["spec"], self.namespace
        claims = node.claims_directory / namespace
        check_claims(node.client, namespace, spec, claims)
        sources = fetch_sources(node.client, namespace, spec)
        ip = str(address.address)
        pod = _rendering_pod(self.api_pod, {
            "status.podIP": ip, "status.podIPs": ip, "spec.nodeName": node.node_name,
            "metadata.uid": self.uid, "status.hostIP": node.host_address,
            "status.hostIPs": node.host_address,
        }, sources.environment_sources(), node.service_environment())
        problems = unresolved_reference_problems([pod])
        if problems:
            self.waiting_reason = "CreateContainerConfigError"
            raise NotReadyYet("; ".join(problems))
        self.address = replace(address, pod=pod)
        self.pod = pod
        self.workspace = Workspace.create(node.run_identifier, node.pods_directory, claims)
        try:
            pod_volumes = self._prepare_volumes(node, pod, sources)
            self.workspace.pod_directory(pod.name).mkdir(parents=True, exist_ok=True)
            self.workspace.hosts_file(pod.name).write_text("", encoding="utf-8")
            self.namespaces = add_pod_network(node.bridge, node.run_identifier, self.address,
                                              node.programs, node.service_addresses())
            for container in [*pod.init_containers, *pod.containers]:
                write_start_file(self.workspace, self.namespaces, node.users, container, pod,
                                 pod_volumes)
        except BaseException:
            self.release()
            raise
        self._begin(node, pod)

    def _prepare_volumes(self, node: NodeContext, pod: Pod, sources: Any) -> volumes.PodVolumes:
        assert self.workspace is not None
        supported = [volume for volume in pod.volumes if volume.kind in volumes.SUPPORTED_KINDS]
        prepared = volumes.prepare_pod_volumes(
            replace(pod, volumes=supported), self.workspace.volumes_directory(pod.name),
            self.workspace.claims, sources.config_maps, sources.secrets, node.users.ids)
        for volume in self.api_pod["spec"].get("volumes") or []:
            kind = next((k for k in projected.KINDS if volume.get(k) is not None), None)
            if kind is None:
                continue
            directory = self.workspace.volumes_directory(pod.name) / str(volume["name"])
            directory.mkdir(parents=True, exist_ok=True)
            projected.write_files(directory, projected.volume_files(
                node.client, self.api_pod, volume, sources), node.users.ids)
            prepared.directories[str(volume["name"])] = directory
            prepared.kinds[str(volume["name"])] = kind
            prepared.read_only.add(str(volume["name"]))
        return prepared

    def _container_run(self, pod: Pod, container: Container, is_init: bool,
                       options: LocalRunOptions) -> ContainerRun:
        from collections import deque

        prefix = f"{pod.namespace}/{pod.name}"
        if is_init or len(pod.containers) > 1:
            prefix += f"/{container.name}"
        return ContainerRun(
            pod=pod, container=container, is_init=is_init, prefix=prefix,
            backoff=RestartBackoff(options.backoff_initial_seconds,
                                   options.backoff_maximum_seconds,
                                   options.backoff_reset_seconds),
            tail=deque(maxlen=options.failure_tail_lines))

    def _begin(self, node: NodeContext, pod: Pod) -> None:
        workspace, namespaces = self.workspace, self.namespaces
        assert workspace is not None and namespaces is not None
        options = replace(node.options, restart_limit=UNLIMITED_RESTARTS, success_pods=(),
                          timeout_seconds=None)
        pod_run = PodRun(
            pod=pod, address=str(self.address.address if self.address else ""),
            init_containers=[self._container_run(pod, c, True, options)
                             for c in pod.init_containers],
            containers=[self._container_run(pod, c, False, options) for c in pod.containers],
            marker=None)

        def launch(run: ContainerRun) -> Any:
            return launch_container(workspace, namespaces, node.users, run)

        self.supervisor = Supervisor([pod_run], launch, node.console, options)
        self.supervisor.begin()
        self.waiting_reason = "ContainerCreating"
        self.waiting_message = ""

    # Running -----------------------------------------------------------------------------------

    def step(self) -> None:
        """Collect exits and start what is due (main thread only: see `launch_container`)."""
        if self.supervisor is None or self.ending is not None or self.stopper is not None:
            return
        try:
            self.ending = self.supervisor.step()
        except OSError as error:
            self.ending = Ending("failed", f"could not start a container: {error}")
        self._record_history()

    def _record_history(self) -> None:
        assert self.supervisor is not None
        now = timestamp()
        for run in self.supervisor.pods[0].runs():
            history = self.histories.setdefault(run.container.name, ContainerHistory())
            ended = run.last_exit_code is not None and not run.running()
            if run.starts > history.seen_starts:
                if history.seen_starts and history.terminated_for < history.seen_starts:
                    self._terminated(history, run, now, history.seen_starts)
                history.seen_starts = run.starts
                history.started_at = now
            if ended and history.terminated_for < run.starts:
                self._terminated(history, run, now, run.starts)

    @staticmethod
    def _terminated(history: ContainerHistory, run: ContainerRun, now: str, start: int) -> None:
        code = run.last_exit_code if run.last_exit_code is not None else 0
        history.last_terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": history.started_at or now,
            "finishedAt": now,
            "containerID": f"tfcompile://{run.pod.name}/{run.container.name}/{start}",
        }
        history.terminated_for = start

    # Stopping ----------------------------------------------------------------------------------

    def begin_stop(self, grace_seconds: float) -> None:
        """Stop the containers in a thread of their own (SIGTERM, `grace_seconds`, SIGKILL)."""
        if self.stopper is not None:
            return
        supervisor = self.supervisor
        if supervisor is None:
            self.stopped = True
            self.stopper = threading.Thread(target=lambda: None)
            self.stopper.start()
            return
        supervisor.options = replace(supervisor.options, maximum_grace_seconds=grace_seconds)

        def stop() -> None:
            supervisor.stop_all(lambda: False)
            self.stopped = True

        self.stopper = threading.Thread(target=stop, name=f"stopping {self.key}", daemon=True)
        self.stopper.start()

    def release(self) -> list[str]:
        """Free the namespaces and delete the pod's files; returns what could not be deleted."""
        if self.namespaces is not None:
            for descriptor in (self.namespaces.network, self.namespaces.uts):
                with contextlib.suppress(OSError):
                    os.close(descriptor)
            self.namespaces = None
        failures: list[str] = []
        if self.workspace is not None:
            failures = self.workspace.remove()
            self.workspace = None
        return failures
