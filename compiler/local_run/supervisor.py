"""Keeps the pods of a local run going as the kubelet would, and decides when the run ends.

Init containers run one after another, then all the pod's containers start together. A container
that exits is restarted according to the pod's restartPolicy, after the kubelet's back-off. The run
ends when every success pod has its marker file (succeeded), when a container would need more
restarts than allowed or fails for good (failed), at the timeout (timed out), or when the runner is
signalled (interrupted). Stopping sends SIGTERM to each container's process group, waits for the
pod's grace period (capped), then sends SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tfcompile.compiler.rendering.pods import Container, Pod

from .backoff import RestartBackoff
from .console import Console, start_reader
from .options import LocalRunOptions

POLL_SECONDS = 0.1
STOP_POLL_SECONDS = 0.05
OUTPUT_DRAIN_SECONDS = 2.0
KILL_WAIT_SECONDS = 10.0

SUCCEEDED = "succeeded"
FAILED = "failed"
TIMED_OUT = "timed out"
INTERRUPTED = "interrupted"


@dataclass(eq=False)
class ContainerRun:
    """One container of one pod, across its restarts."""

    pod: Pod
    container: Container
    is_init: bool
    prefix: str
    backoff: RestartBackoff
    tail: deque[str]
    process: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = None
    started_at: float = 0.0
    starts: int = 0
    restarts: int = 0
    last_exit_code: int | None = None
    start_at: float | None = None
    kill_at: float = 0.0

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass(eq=False)
class PodRun:
    """One pod: its containers in start order, and where its success marker would appear."""

    pod: Pod
    address: str
    init_containers: list[ContainerRun]
    containers: list[ContainerRun]
    marker: Path | None
    next_init: int = 0
    failure_marker: Path | None = None

    def runs(self) -> list[ContainerRun]:
        return [*self.init_containers, *self.containers]

    def succeeded(self) -> bool | None:
        return None if self.marker is None else self.marker.exists()


@dataclass(frozen=True)
class Ending:
    """Why the run ended; `failing` is the container that failed it, if one did."""

    kind: str
    message: str
    failing: ContainerRun | None = None


Launch = Callable[[ContainerRun], "subprocess.Popen[bytes]"]


def _exit_code(process: subprocess.Popen[bytes]) -> int:
    code = process.returncode
    return code if code >= 0 else 128 - code


@dataclass
class Supervisor:
    """Runs the pods; `run` until the run ends, then `stop_all` (always, even after errors)."""

    pods: list[PodRun]
    launch: Launch
    console: Console
    options: LocalRunOptions
    wake: threading.Event = field(default_factory=threading.Event)
    clock: Callable[[], float] = time.monotonic
    _started: float = 0.0

    def _all_runs(self) -> list[ContainerRun]:
        return [run for pod in self.pods for run in pod.runs()]

    def _schedule_pod_start(self, pod: PodRun, now: float) -> None:
        if pod.next_init < len(pod.init_containers):
            pod.init_containers[pod.next_init].start_at = now
        else:
            for run in pod.containers:
                run.start_at = now

    def _start(self, run: ContainerRun) -> None:
        if run.starts:
            run.restarts += 1
            self.console.notice(f"restarting {run.prefix} (restart {run.restarts})")
        run.starts += 1
        run.start_at = None
        run.process = self.launch(run)
        run.started_at = self.clock()
        assert run.process.stdout is not None
        run.reader = start_reader(run.process.stdout, run.prefix, self.console, run.tail)

    def _collect(self, run: ContainerRun) -> int:
        assert run.process is not None
        code = _exit_code(run.process)
        if run.reader is not None:
            run.reader.join(OUTPUT_DRAIN_SECONDS)
        run.process = None
        run.reader = None
        return code

    def _restart_wanted(self, run: ContainerRun, code: int) -> bool:
        policy = run.pod.restart_policy
        if run.is_init:
            return code != 0 and policy != "Never"
        return policy == "Always" or (policy == "OnFailure" and code != 0)

    def _on_exit(self, pod: PodRun, run: ContainerRun, now: float) -> Ending | None:
        ran_for = now - run.started_at
        code = self._collect(run)
        run.last_exit_code = code
        if run.is_init and code == 0:
            pod.next_init += 1
            self._schedule_pod_start(pod, now)
            return None
        if not self._restart_wanted(run, code):
            self.console.notice(f"{run.prefix} exited with status {code}; not restarted "
                                f"(restartPolicy {run.pod.restart_policy})")
            if code != 0:
                return Ending(FAILED, f"{run.prefix} failed with status {code} and will not be "
                                      f"restarted (restartPolicy {run.pod.restart_policy})", run)
            return None
        if run.restarts >= self.options.restart_limit:
            return Ending(FAILED, f"{run.prefix} exited with status {code} after {run.restarts} "
                                  f"restart(s); the limit is {self.options.restart_limit}", run)
        delay = run.backoff.next_delay(ran_for)
        run.start_at = now + delay
        hint = " (restartPolicy Always restarts even a success)" if code == 0 else ""
        self.console.notice(f"{run.prefix} exited with status {code} after {ran_for:.1f} s"
                            f"{hint}; restarting in {delay:g} s (back-off)")
        return None

    def _waiting_for(self) -> list[str]:
        return [pod.pod.name for pod in self.pods
                if pod.pod.name in self.options.success_pods and not pod.succeeded()]

    def begin(self) -> None:
        """Schedule every pod's first start; `step` then starts them."""
        self._started = self.clock()
        for pod in self.pods:
            self._schedule_pod_start(pod, self._started)

    def step(self) -> Ending | None:
        """One pass: collect exits, start what is due, judge success and the timeout."""
        now = self.clock()
        for pod in self.pods:
            for run in pod.runs():
                if run.process is not None and run.process.poll() is not None:
                    ending = self._on_exit(pod, run, now)
                    if ending is not None:
                        return ending
        for run in self._all_runs():
            if run.start_at is not None and run.start_at <= now and run.process is None:
                self._start(run)
        stopped = [pod for pod in self.pods
                   if pod.failure_marker is not None and pod.failure_marker.exists()]
        for pod in stopped:
            assert pod.failure_marker is not None
            return Ending(FAILED, f"{pod.pod.name} stopped retrying (failurePolicy): "
                                  f"{pod.failure_marker.read_text().strip()}")
        if self.options.success_pods and not self._waiting_for():
            names = ", ".join(self.options.success_pods)
            return Ending(SUCCEEDED, f"training succeeded ({names})")
        timeout = self.options.timeout_seconds
        if timeout is not None and now - self._started >= timeout:
            waiting = ", ".join(self._waiting_for())
            reason = (f"still waiting for: {waiting}" if waiting
                      else "no success pods were given")
            return Ending(TIMED_OUT, f"timed out after {timeout:g} s before training "
                                     f"succeeded ({reason})")
        return None

    def run(self, interruption: Callable[[], int | None]) -> Ending:
        """Supervise until the run ends; `interruption` returns a signal number once signalled."""
        self.begin()
        while True:
            number = interruption()
            if number is not None:
                return Ending(INTERRUPTED,
                              f"interrupted by {signal.Signals(number).name}; stopping the pods")
            ending = self.step()
            if ending is not None:
                return ending
            self.wake.wait(POLL_SECONDS)
            self.wake.clear()

    def _signal(self, run: ContainerRun, number: int) -> None:
        if run.running():
            assert run.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.process.pid, number)

    def stop_all(self, forced: Callable[[], bool]) -> None:
        """Stop every container: SIGTERM, the grace period (capped), then SIGKILL."""
        now = self.clock()
        running = [run for run in self._all_runs() if run.running()]
        for run in running:
            grace = min(float(run.pod.termination_grace_period_seconds),
                        self.options.maximum_grace_seconds)
            run.kill_at = now + grace
            self._signal(run, signal.SIGTERM)
        killed_at: float | None = None
        while running:
            now = self.clock()
            for run in running:
                if forced() or now >= run.kill_at:
                    self._signal(run, signal.SIGKILL)
                    killed_at = killed_at if killed_at is not None else now
            running = [run for run in running if run.running()]
            if running and killed_at is not None and now - killed_at > KILL_WAIT_SECONDS:
                names = ", ".join(run.prefix for run in running)
                self.console.notice(f"warning: still running after SIGKILL: {names}")
                break
            time.sleep(STOP_POLL_SECONDS)
        for run in self._all_runs():
            if run.process is not None and run.process.poll() is not None:
                if run.reader is not None:
                    run.reader.join(OUTPUT_DRAIN_SECONDS)
                run.process = None
                run.reader = None
