"""`run_pods`: run the pods of rendered manifests in their images with podman, as a cluster would.

The order of a run: check everything that could refuse it (nothing changes before); make the run's
temporary directory and start its guard (`guard`); make the network, the pods' volumes and the
podman pods; start the containers and supervise them until the run ends; then, whatever happened
(success, failure, an exception, or SIGINT/SIGTERM/SIGHUP to the runner), stop every container,
remove the pods and the network and delete the temporary directory. Signals are caught only while
a run is in progress, and only when `run_pods` is called from the main thread; a signal while the
pods are stopping skips the grace periods. When the runner is killed (SIGKILL) its guard removes
the pods, the network and the temporary directory.
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from types import FrameType, TracebackType
from typing import Any

from tfcompile.compiler.rendering.pods import Container, Pod
from tfcompile.compiler.rendering.quantities import parse_quantity

from . import addressing, volumes
from .addressing import PodAddress
from .backoff import RestartBackoff
from .console import Console
from .container_runtime import (
    ContainerStart,
    Podman,
    PodmanError,
    find_podman,
    pull_option,
    qualified_image,
)
from .identity import identity_of, raw_container
from .options import (
    EXIT_FAILED,
    EXIT_REFUSED,
    EXIT_SUCCEEDED,
    ContainerSummary,
    LocalRunOptions,
    PodSummary,
    RunOutcome,
)
from .preflight import find_problems
from .sub_paths import resolved_source
from .supervisor import (
    FAILED,
    INTERRUPTED,
    SUCCEEDED,
    ContainerRun,
    Ending,
    PodRun,
    Supervisor,
)
from .workspace import Workspace, new_run_identifier, remove_abandoned

GUARD_MODULE = f"{__package__}.guard"
GUARD_WAIT_SECONDS = 60.0
SETUP_FAILED = "setup failed"
REFUSED = "refused"
START_ERROR_STATUS = 128
"""The status of a container that could not start (the kubelet's StartError)."""


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


def _limits(container: Mapping[str, Any]) -> list[str]:
    """podman's limits for the container's `resources.limits` (CPU and memory), which podman's
    cgroups enforce as the kubelet's do."""
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    if not isinstance(limits, Mapping):
        return []
    options: list[str] = []
    if "memory" in limits:
        options += ["--memory", str(math.ceil(parse_quantity(str(limits["memory"]))))]
    if "cpu" in limits:
        options += ["--cpus", f"{float(parse_quantity(str(limits['cpu']))):g}"]
    return options


def _capabilities(context: Mapping[str, Any], which: str) -> list[str]:
    capabilities = context.get("capabilities")
    listed = capabilities.get(which) if isinstance(capabilities, Mapping) else None
    return [str(name) for name in listed] if isinstance(listed, list) else []


def container_start(podman: Podman, pod_run: PodRun, run: ContainerRun,
                    pod_volumes: volumes.PodVolumes) -> ContainerStart:
    """What `podman run` needs for this start of `run`'s container; OSError when a mount's
    subPath cannot be used (a link the pod made, say)."""
    pod, container = pod_run.pod, run.container
    raw = raw_container(pod, container.name)
    context = raw.get("securityContext")
    context = context if isinstance(context, Mapping) else {}
    identity = identity_of(pod, container.name)
    mounts = [(resolved_source(request), request.target, request.read_only)
              for request in volumes.container_mounts(container, pod_volumes)]
    image = qualified_image(container.image)
    policy = raw.get("imagePullPolicy")
    return ContainerStart(
        name=f"{podman.pod_name(pod.name)}-{container.name}-{run.starts}",
        pod=pod.name,
        image=image,
        pull=pull_option(str(policy) if policy else None, container.image),
        command=container.command,
        arguments=container.args,
        environment=container.environment,
        working_directory=container.working_dir,
        user=identity.user,
        group=identity.group,
        supplementary_groups=[group for group in identity.groups if group != identity.group],
        no_new_privileges=identity.no_new_privileges,
        read_only_root=context.get("readOnlyRootFilesystem") is True,
        dropped_capabilities=_capabilities(context, "drop"),
        added_capabilities=_capabilities(context, "add"),
        mounts=mounts,
        grace_seconds=pod.termination_grace_period_seconds,
        limits=_limits(raw),
    )


def failed_start(message: str) -> subprocess.Popen[bytes]:
    """A process standing for a container that could not start: it prints why and exits with
    START_ERROR_STATUS, so that the start counts as failed and is retried with the back-off."""
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; print(sys.argv[1]); sys.exit(int(sys.argv[2]))",
         f"cannot start the container: {message}", str(START_ERROR_STATUS)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)


class _Run:
    """One run in progress: what it created, so that all of it can be undone."""

    def __init__(self, pods: Sequence[Pod], options: LocalRunOptions, program: str,
                 console: Console, signals: _SignalCatcher) -> None:
        self.pods = list(pods)
        self.options = options
        self.console = console
        self.signals = signals
        self.identifier = new_run_identifier()
        self.podman = Podman(program, self.identifier)
        self.workspace: Workspace | None = None
        self.guard: subprocess.Popen[bytes] | None = None
        self.pod_runs: list[PodRun] = []
        self.pod_volumes: dict[str, volumes.PodVolumes] = {}

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

    def _prepare_pod(self, workspace: Workspace, entry: PodAddress,
                     plan: Sequence[PodAddress]) -> PodRun:
        pod, options = entry.pod, self.options
        workspace.volumes_directory(pod.name).mkdir(parents=True)
        pod_volumes = self.pod_volumes[pod.name] = volumes.prepare_pod_volumes(
            pod, workspace.volumes_directory(pod.name), workspace.claims,
            options.config_maps, options.secrets)
        self.podman.create_pod(pod.name, entry.address, entry.hostname,
                               addressing.host_entries(entry, plan, options.cluster_domain))
        marker_directory = pod_volumes.directories.get(options.success_marker_volume)
        is_marker_volume = (pod_volumes.kinds.get(options.success_marker_volume)
                            == volumes.EMPTY_DIRECTORY)
        return PodRun(
            pod=pod,
            address=str(entry.address),
            init_containers=[self._container_run(pod, c, True) for c in pod.init_containers],
            containers=[self._container_run(pod, c, False) for c in pod.containers],
            marker=(marker_directory / options.success_marker_file
                    if marker_directory is not None and is_marker_volume else None),
            failure_marker=(marker_directory / options.failure_marker_file
                            if marker_directory is not None and is_marker_volume else None),
        )

    def _launch(self, run: ContainerRun) -> subprocess.Popen[bytes]:
        pod_run = next(pod for pod in self.pod_runs if pod.pod.name == run.pod.name)
        try:
            start = container_start(self.podman, pod_run, run, self.pod_volumes[run.pod.name])
        except OSError as error:
            return failed_start(f"cannot prepare its volumes: {error.strerror or error}")
        command, environment = self.podman.run_command(start)
        return subprocess.Popen(command, env=environment, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def _start_guard(self, workspace: Workspace) -> None:
        self.guard = subprocess.Popen(
            [sys.executable, "-m", GUARD_MODULE, self.podman.program, self.identifier,
             str(workspace.root)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def _announce(self, workspace: Workspace, plan: Sequence[PodAddress]) -> None:
        self.console.notice(
            f"run {self.identifier}: {len(self.pods)} pod(s) on podman network "
            f"{self.podman.network_name}, files in {workspace.root}")
        width = max(len(entry.pod.name) for entry in plan)
        for entry in plan:
            names = addressing.dns_names(entry.pod, self.options.cluster_domain)
            images = ", ".join(dict.fromkeys(qualified_image(container.image) for container
                                             in [*entry.pod.init_containers,
                                                 *entry.pod.containers]))
            self.console.notice(f"  {entry.pod.name:<{width}}  {entry.address!s:<15}  "
                                f"{names[0] if names else entry.hostname}  {images}")

    def _set_up(self) -> Supervisor:
        options = self.options
        for directory in remove_abandoned(options.temporary_directory):
            self.console.notice(f"removed {directory}, left by a run that was killed")
        workspace = self.workspace = Workspace.create(
            self.identifier, options.temporary_directory, options.claims_directory)
        self._start_guard(workspace)
        self.podman.check()
        plan = addressing.plan_addresses(self.pods, self.podman.create_network())
        self._announce(workspace, plan)
        for entry in plan:
            self.pod_runs.append(self._prepare_pod(workspace, entry, plan))
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
            except (PodmanError, OSError, ValueError) as error:
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
        """Remove the pods (a container still running after its grace is stopped at once),
        the network and the temporary directory; then let the guard go."""
        for complaint in self.podman.remove_run():
            self.console.notice(f"warning: podman: {complaint}")
        if self.workspace is not None:
            for failure in self.workspace.remove():
                self.console.notice(f"warning: could not delete {failure}")
        if self.guard is not None:
            assert self.guard.stdin is not None
            self.guard.stdin.close()
            try:
                self.guard.wait(GUARD_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                self.console.notice("warning: the run's guard is still removing its pods")

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
    """Run `pods` in their images with podman as a cluster would, until training succeeds or the
    run fails.

    The run gets a podman network of its own (internal: no route beyond it); each pod a podman
    pod with its address there, its hostname and a hosts file answering every pod's DNS names,
    and its volumes (see `volumes`); every container runs in its image (pulled as its
    imagePullPolicy says), as its pod's user and groups, with its security context's
    capabilities, privilege escalation and read-only root, and its CPU and memory limits.
    Containers restart with the kubelet's back-off, each start a new container, and their
    output is printed live as `pod-name | line`. The run ends with exit code 0 once every pod in
    `options.success_pods` has written its success marker; 1 when a container exceeds the
    restart limit or fails for good, at the timeout, or when the run cannot be set up; 2 when
    the run is refused before anything is created (every reason is printed to `options.errors`
    and listed in `RunOutcome.problems`: not root, podman missing, missing Secret values,
    unsupported volumes, ...); 128 + the signal number when SIGINT, SIGTERM or SIGHUP stopped
    it. Whatever the ending, every pod, container, the network and the temporary files of the
    run are gone on return; if the runner is killed instead, its guard removes them.
    Needs root, Linux and podman. Errors in the caller's own use (bad options) raise ValueError.
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
    program = find_podman()
    assert program is not None
    with _SignalCatcher() as signals:
        return _Run(pods, options, program, Console(output), signals).execute()
