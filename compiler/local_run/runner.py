"""`run_pods`: run the pods of rendered manifests on this machine, as a cluster would.

The order of a run: check everything that could refuse it (nothing changes before); make the run's
temporary directory, its user namespace, the pods' volumes and hosts files; build the network;
start the pods and supervise them until the run ends; then, whatever happened (success, failure,
an exception, or SIGINT/SIGTERM/SIGHUP to the runner), stop every container, release the
namespaces and delete the temporary directory. Signals are caught only while a run is in
progress, and only when `run_pods` is called from the main thread; a signal while the pods are
stopping skips the grace periods. When the runner is killed (SIGKILL) the kernel ends every
container with it (see `container_entry`) and frees the namespaces; only the temporary directory
stays, until the next run deletes it (see `workspace`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from types import FrameType, TracebackType
from typing import Any

from tfcompile.compiler.rendering.pods import Container, Pod

from . import addressing, volumes
from .addressing import PodAddress
from .backoff import RestartBackoff
from .console import Console
from .filesystem_view import MountRequest
from .identity import identity_of
from .network import (
    NetworkPrograms,
    NetworkSetupError,
    PodNamespaces,
    RunNetwork,
    create_network,
)
from .options import (
    EXIT_FAILED,
    EXIT_REFUSED,
    EXIT_SUCCEEDED,
    ContainerSummary,
    LocalRunOptions,
    PodSummary,
    RunOutcome,
)
from .preflight import find_problems, find_programs
from .supervisor import (
    FAILED,
    INTERRUPTED,
    SUCCEEDED,
    ContainerRun,
    Ending,
    PodRun,
    Supervisor,
)
from .user_namespace import UserNamespace, create_user_namespace, unused_range
from .workspace import SHIMS_PATH, Workspace, new_run_identifier, remove_abandoned

ENTRY_MODULE = f"{__package__}.container_entry"
SETUP_FAILED = "setup failed"
REFUSED = "refused"
HOSTS_PATH = "/etc/hosts"
START_FILE = "start.json"
STAGING_DIRECTORY = "staging"


class _SignalCatcher:
    """Turns SIGINT, SIGTERM and SIGHUP into a flag the run polls, while a run is in progress."""

    HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.wake = threading.Event()
        self._number: int | None = None
        self._forced = False
        self.stopping = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalCatcher:
        if threading.current_thread() is threading.main_thread():
            for number in self.HANDLED:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self._number is None and not self.stopping:
            self._number = number
        else:
            self._forced = True
        self.wake.set()

    def received(self) -> int | None:
        return self._number

    def forced(self) -> bool:
        return self._forced


def _container_prefix(pod: Pod, container: Container, is_init: bool) -> str:
    if not is_init and len(pod.containers) == 1:
        return pod.name
    return f"{pod.name}/{container.name}"


def interpreter_mounts(mounts: list[MountRequest]) -> list[MountRequest]:
    """The interpreter's own environment, bound again (read-only) where a volume would hide it:
    a virtualenv under /tmp disappears below the pod's /tmp emptyDir otherwise. Mounts are made
    shallowest first, so these land on top."""
    covered = []
    for path in sorted({sys.prefix, sys.base_prefix}):
        if any(path.startswith(mount.target.rstrip("/") + "/") for mount in mounts):
            covered.append(MountRequest(path, path, True))
    return covered


def write_start_file(workspace: Workspace, namespaces: PodNamespaces, users: UserNamespace,
                     container: Container, pod: Pod, pod_volumes: volumes.PodVolumes) -> None:
    """Write what `container_entry` needs to start `container` of `pod` in its namespaces."""
    directory = workspace.container_directory(pod.name, container.name)
    (directory / STAGING_DIRECTORY).mkdir(parents=True)
    mounts = [*volumes.container_mounts(container, pod_volumes),
              MountRequest(str(workspace.hosts_file(pod.name)), HOSTS_PATH, False)]
    if workspace.has_shims():
        mounts.append(MountRequest(str(workspace.bin_directory), SHIMS_PATH, True))
    mounts.extend(interpreter_mounts(mounts))
    environment = {
        "PATH": workspace.container_path_variable(),
        "HOSTNAME": addressing.pod_hostname(pod),
        **container.environment,
    }
    identity = identity_of(pod, container.name)
    start = {
        "runner_process": os.getpid(),
        "network_namespace": namespaces.network,
        "uts_namespace": namespaces.uts,
        "user_namespace": users.descriptor,
        "staging_directory": str(directory / STAGING_DIRECTORY),
        "mounts": [{"source": m.source, "target": m.target, "read_only": m.read_only,
                    "sub_path": m.sub_path, "create": m.create} for m in mounts],
        "working_directory": container.working_dir or "/",
        "arguments": [*container.command, *container.args],
        "environment": environment,
        "user": identity.user,
        "group": identity.group,
        "groups": list(identity.groups),
        "no_new_privileges": identity.no_new_privileges,
        # The interpreter may live under a directory only the host's root may enter (a home):
        # the container's own view of those directories is made traversable.
        "traversable": sorted({os.path.realpath(sys.executable), sys.prefix, sys.base_prefix}),
    }
    (directory / START_FILE).write_text(json.dumps(start), encoding="utf-8")


def launch_container(workspace: Workspace, namespaces: PodNamespaces, users: UserNamespace,
                     run: ContainerRun) -> subprocess.Popen[bytes]:
    """Start one container (from its start file) in a new session; its output on one pipe.

    The caller's thread must outlive the container: the kernel kills the container's helper, and
    with it every process of the container, when the thread that started it ends."""
    start_file = workspace.container_directory(run.pod.name, run.container.name) / START_FILE
    return subprocess.Popen(
        [sys.executable, "-P", "-m", ENTRY_MODULE, str(start_file)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={},
        cwd="/",
        start_new_session=True,
        pass_fds=(namespaces.network, namespaces.uts, users.descriptor),
    )


class _Run:
    """One run in progress: what it created, so that all of it can be undone."""

    def __init__(self, pods: Sequence[Pod], options: LocalRunOptions, programs: NetworkPrograms,
                 console: Console, signals: _SignalCatcher) -> None:
        self.pods = list(pods)
        self.options = options
        self.programs = programs
        self.console = console
        self.signals = signals
        self.identifier = new_run_identifier()
        self.plan = addressing.plan_addresses(self.pods)
        self.workspace: Workspace | None = None
        self.network: RunNetwork | None = None
        self.users: UserNamespace | None = None
        self.pod_runs: list[PodRun] = []

    # Setting up ------------------------------------------------------------------------------

    def _container_run(self, pod: Pod, container: Container, is_init: bool) -> ContainerRun:
        options = self.options
        return ContainerRun(
            pod=pod,
            container=container,
            is_init=is_init,
            prefix=_container_prefix(pod, container, is_init),
            backoff=RestartBackoff(options.backoff_initial_seconds,
                                   options.backoff_maximum_seconds,
                                   options.backoff_reset_seconds),
            tail=deque(maxlen=options.failure_tail_lines),
        )

    def _prepare_pod(self, workspace: Workspace, users: UserNamespace,
                     entry: PodAddress) -> tuple[PodRun, volumes.PodVolumes]:
        pod, options = entry.pod, self.options
        workspace.pod_directory(pod.name).mkdir(parents=True)
        workspace.hosts_file(pod.name).write_text(
            addressing.hosts_file(entry, self.plan, options.cluster_domain), encoding="utf-8")
        pod_volumes = volumes.prepare_pod_volumes(
            pod, workspace.volumes_directory(pod.name), workspace.claims,
            options.config_maps, options.secrets, users.ids)
        marker_directory = pod_volumes.directories.get(options.success_marker_volume)
        is_marker_volume = (pod_volumes.kinds.get(options.success_marker_volume)
                            == volumes.EMPTY_DIRECTORY)
        pod_run = PodRun(
            pod=pod,
            address=str(entry.address),
            init_containers=[self._container_run(pod, c, True) for c in pod.init_containers],
            containers=[self._container_run(pod, c, False) for c in pod.containers],
            marker=(marker_directory / options.success_marker_file
                    if marker_directory is not None and is_marker_volume else None),
            failure_marker=(marker_directory / options.failure_marker_file
                            if marker_directory is not None and is_marker_volume else None),
        )
        return pod_run, pod_volumes

    def _write_start_file(self, workspace: Workspace, network: RunNetwork, users: UserNamespace,
                          pod_run: PodRun, run: ContainerRun,
                          pod_volumes: volumes.PodVolumes) -> None:
        write_start_file(workspace, network.pods[pod_run.pod.name], users, run.container,
                         pod_run.pod, pod_volumes)

    def _launch(self, run: ContainerRun) -> subprocess.Popen[bytes]:
        assert self.workspace is not None and self.network is not None
        assert self.users is not None
        return launch_container(self.workspace, self.network.pods[run.pod.name], self.users,
                                run)

    def _announce(self, workspace: Workspace, users: UserNamespace) -> None:
        version = ".".join(str(part) for part in sys.version_info[:3])
        self.console.notice(
            "images are not pulled: every container runs its command on this machine, with "
            f"`python` being {sys.executable} (Python {version})")
        self.console.notice(
            f"run {self.identifier}: {len(self.pods)} pod(s) on {addressing.NETWORK}, "
            f"files in {workspace.root}")
        self.console.notice(
            f"pods run in a user namespace: their user and group IDs 0-{users.ids.size - 1} are "
            f"host IDs {users.ids.describe()}, which no account of this machine has")
        width = max(len(entry.pod.name) for entry in self.plan)
        for entry in self.plan:
            names = addressing.dns_names(entry.pod, self.options.cluster_domain)
            self.console.notice(f"  {entry.pod.name:<{width}}  {entry.address!s:<12}  "
                                f"{names[0] if names else entry.hostname}")

    def _set_up(self) -> Supervisor:
        options = self.options
        for directory in remove_abandoned(options.temporary_directory):
            self.console.notice(f"removed {directory}, left by a run that was killed")
        workspace = self.workspace = Workspace.create(
            self.identifier, options.temporary_directory, options.claims_directory)
        ids = unused_range()
        if ids is None:  # taken since the preflight checked
            raise OSError("no range of host user IDs is free for the pods' user namespace")
        users = self.users = create_user_namespace(ids)
        self._announce(workspace, users)
        pod_volumes: dict[str, volumes.PodVolumes] = {}
        for entry in self.plan:
            pod_run, pod_volumes[entry.pod.name] = self._prepare_pod(workspace, users, entry)
            self.pod_runs.append(pod_run)
        network = self.network = create_network(self.identifier, self.plan, self.programs)
        for pod_run in self.pod_runs:
            for run in pod_run.runs():
                self._write_start_file(workspace, network, users, pod_run, run,
                                       pod_volumes[pod_run.pod.name])
        width = max(len(run.prefix) for pod_run in self.pod_runs for run in pod_run.runs())
        self.console.prefix_width = width
        return Supervisor(self.pod_runs, self._launch, self.console, options,
                          wake=self.signals.wake)

    # Running and undoing ---------------------------------------------------------------------

    def execute(self) -> RunOutcome:
        """Set up, supervise, and always stop and release everything, in that order."""
        supervisor: Supervisor | None = None
        try:
            try:
                supervisor = self._set_up()
            except (NetworkSetupError, OSError) as error:
                ending = Ending(SETUP_FAILED, f"could not set up the run: {error}")
            else:
                try:
                    ending = supervisor.run(self.signals.received)
                except OSError as error:
                    ending = Ending(FAILED, f"could not start a container: {error}")
            finally:
                self.signals.stopping = True
                if supervisor is not None:
                    supervisor.stop_all(self.signals.forced)
            summaries = self._summaries()
        finally:
            self._release()
        return self._report(ending, summaries)

    def _release(self) -> None:
        if self.network is not None:
            self.network.close()
        if self.users is not None:
            self.users.close()
        if self.workspace is not None:
            for failure in self.workspace.remove():
                self.console.notice(f"warning: could not delete {failure}")

    # Reporting -------------------------------------------------------------------------------

    def _summaries(self) -> tuple[PodSummary, ...]:
        summaries = []
        for pod_run in self.pod_runs:
            runs = pod_run.runs()
            exited = [run for run in runs if run.last_exit_code is not None]
            last = max(exited, key=lambda run: run.started_at) if exited else None
            summaries.append(PodSummary(
                name=pod_run.pod.name,
                address=pod_run.address,
                restarts=sum(run.restarts for run in runs),
                last_exit_code=last.last_exit_code if last is not None else None,
                succeeded=pod_run.succeeded(),
                containers=tuple(ContainerSummary(run.container.name, run.restarts,
                                                  run.last_exit_code) for run in runs),
            ))
        return tuple(summaries)

    def _print_summary(self, summaries: Sequence[PodSummary]) -> None:
        if not summaries:
            return
        width = max(len("POD"), *(len(summary.name) for summary in summaries))
        self.console.notice("summary:")
        self.console.plain(f"  {'POD':<{width}}  {'RESTARTS':>8}  {'LAST EXIT':>9}  SUCCEEDED")
        for summary in summaries:
            code = "-" if summary.last_exit_code is None else str(summary.last_exit_code)
            succeeded = {None: "-", True: "yes", False: "no"}[summary.succeeded]
            self.console.plain(f"  {summary.name:<{width}}  {summary.restarts:>8}  {code:>9}  "
                               f"{succeeded}")

    def _report(self, ending: Ending, summaries: tuple[PodSummary, ...]) -> RunOutcome:
        if ending.failing is not None:
            failing = ending.failing
            self.console.notice(f"the last {len(failing.tail)} line(s) of {failing.prefix}:")
            for line in failing.tail:
                self.console.pod_line(failing.prefix, line)
        self._print_summary(summaries)
        self.console.notice(ending.message)
        if ending.kind == SUCCEEDED:
            code = EXIT_SUCCEEDED
        elif ending.kind == INTERRUPTED:
            code = 128 + (self.signals.received() or signal.SIGINT)
        else:
            code = EXIT_FAILED
        return RunOutcome(code, ending.kind, ending.message, pods=summaries)


def run_pods(pods: Sequence[Pod], options: LocalRunOptions) -> RunOutcome:
    """Run `pods` on this machine as a cluster would, until training succeeds or the run fails.

    Each pod gets its own network namespace on a bridge private to the run (10.244.0.0/16), a
    hosts file answering every pod's DNS names, its own hostname, its volumes (see `volumes`) and
    for each container a private mount and PID namespace; every container runs as its pod's user
    inside the run's user namespace, as no user of this machine (see `user_namespace`).
    Containers run their commands with this machine's Python first on PATH, restart with the
    kubelet's back-off, and their output is printed live as `pod-name | line`. The run ends with
    exit code 0 once every pod in `options.success_pods` has written its success marker; 1 when a
    container exceeds the restart limit or fails for good, at the timeout, or when the run cannot
    be set up; 2 when the run is refused before anything is created (every reason is printed to
    `options.errors` and listed in `RunOutcome.problems`: not root, missing programs, missing
    Secret values, unsupported volumes, user IDs beyond the mapped ones, ...); 128 + the signal
    number when SIGINT, SIGTERM or SIGHUP stopped it. Whatever the ending, every process,
    namespace and temporary file of the run is gone on return; if the runner is killed instead,
    its containers end with it.
    Needs root and Linux. Errors in the caller's own use (bad options) raise ValueError.
    """
    output = options.output if options.output is not None else sys.stdout
    errors = options.errors if options.errors is not None else sys.stderr
    problems = find_problems(pods, options)
    if problems:
        for problem in problems:
            errors.write(f"run-local: error: {problem}\n")
        errors.flush()
        message = f"the run cannot start ({len(problems)} problem(s))"
        return RunOutcome(EXIT_REFUSED, REFUSED, message, tuple(problems))
    programs, _ = find_programs()
    assert programs is not None
    with _SignalCatcher() as signals:
        return _Run(pods, options, programs, Console(output), signals).execute()

