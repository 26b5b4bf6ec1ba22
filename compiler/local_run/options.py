"""What the caller of a local run can set, and what the run reports back.

Kept apart from the runtime so that the command line can build options and read outcomes without
pulling in process management.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tfcompile.compiler.objects.launcher_interface import (
    FAILURE_MARKER,
    STATE_DIRECTORY,
    STATE_VOLUME,
    SUCCESS_MARKER,
)

from .volumes import Content

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2


@dataclass(frozen=True)
class LocalRunOptions:
    """Settings of one local run; the defaults follow the kubelet where it has one.

    config_maps: ConfigMap name -> {key: text, or bytes for a key of `binaryData`}, for
        configMap volumes.
    secrets: (Secret name, key) -> value, for secret volumes (see `parse_secrets_file`).
    success_pods: the run succeeds once every one of these pods has written its success marker.
        Empty: the run only ends by failure, timeout or interruption.
    success_marker_volume / success_marker_file: the marker is that file inside that emptyDir.
    failure_marker_file: a pod whose launcher wrote this file there (its failurePolicy said
        stop) ends the run as failed.
    restart_limit: a container needing more restarts than this ends the run as failed.
    backoff_initial_seconds / backoff_maximum_seconds / backoff_reset_seconds: the kubelet's
        restart back-off: 10 s doubling up to 300 s, forgotten after 10 minutes of running.
    timeout_seconds: end the run as failed after this long (None: no limit).
    maximum_grace_seconds: cap on each pod's termination grace period when stopping.
    failure_tail_lines: how many last lines of a failing container to repeat.
    cluster_domain: the cluster's DNS domain used in fully qualified pod names.
    claims_directory: where each PersistentVolumeClaim's directory is made and kept; None: in the
        run's temporary directory, removed at the end.
    temporary_directory: where the run's temporary directory is made (None: the system's).
    output: pod output, progress and summary (None: standard output).
    errors: reasons a run is refused (None: standard error).
    """

    config_maps: Mapping[str, Mapping[str, Content]] = field(default_factory=dict)
    secrets: Mapping[tuple[str, str], str] = field(default_factory=dict)
    success_pods: Sequence[str] = ()
    success_marker_volume: str = STATE_VOLUME
    success_marker_file: str = posixpath.relpath(SUCCESS_MARKER, STATE_DIRECTORY)
    failure_marker_file: str = posixpath.relpath(FAILURE_MARKER, STATE_DIRECTORY)
    restart_limit: int = 3
    backoff_initial_seconds: float = 10.0
    backoff_maximum_seconds: float = 300.0
    backoff_reset_seconds: float = 600.0
    timeout_seconds: float | None = None
    maximum_grace_seconds: float = 30.0
    failure_tail_lines: int = 20
    cluster_domain: str = "cluster.local"
    claims_directory: Path | None = None
    temporary_directory: Path | None = None
    output: TextIO | None = None
    errors: TextIO | None = None

    def __post_init__(self) -> None:
        if self.restart_limit < 0:
            raise ValueError("restart_limit must be 0 or more")
        if not 0 < self.backoff_initial_seconds <= self.backoff_maximum_seconds:
            raise ValueError("back-off must satisfy 0 < initial <= maximum")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        if self.maximum_grace_seconds < 0 or self.failure_tail_lines < 0:
            raise ValueError("maximum_grace_seconds and failure_tail_lines must be 0 or more")


@dataclass(frozen=True)
class ContainerSummary:
    """How one container fared: restarts and the status of its last exit before the run ended."""

    name: str
    restarts: int
    last_exit_code: int | None  # None: never exited on its own


@dataclass(frozen=True)
class PodSummary:
    """How one pod fared; `succeeded` is None when the pod has no success marker volume."""

    name: str
    address: str
    restarts: int
    last_exit_code: int | None
    succeeded: bool | None
    containers: tuple[ContainerSummary, ...]


@dataclass(frozen=True)
class RunOutcome:
    """The end of a run.

    exit_code: 0 succeeded; 1 failed, timed out or could not be set up; 2 refused before starting
        (problems listed); 128 + signal number when interrupted by SIGINT, SIGTERM or SIGHUP.
    ending: "succeeded", "failed", "timed out", "interrupted", "setup failed" or "refused".
    """

    exit_code: int
    ending: str
    message: str
    problems: tuple[str, ...] = ()
    pods: tuple[PodSummary, ...] = ()
