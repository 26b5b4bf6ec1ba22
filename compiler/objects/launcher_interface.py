"""What the compiler knows of the launcher: where its files go, how it is started, its program.

The launcher is the program every TensorFlow container runs around its training command
(`compiler/launcher/program.py` says what it does and why). It is an ordinary package of
tfcompile, shipped to the pods as one zip application of its own modules: the output layer
builds the zip from the installed package (`output.launcher_zip`) and hands it to the
compiler as a `LauncherProgram`, so this layer stays pure. The record format, the state paths
and the protocol version come from the launcher's own words (`launcher/protocol.py`, which it
uses itself and which does no I/O); they are not repeated here.

It is one program per job, shipped in a ConfigMap named by its protocol version and mounted by
every role (`builders/launcher_config_map.py` says why its bytes are left out of the revision). Its
settings (which tasks make the job succeed, which StatefulSets it may scale, the failure policy,
the revision they belong to) come from a JSON file beside it, and the pod's role from its
arguments (`command`); each pod's index and revision come from its environment."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfcompile.compiler.launcher.protocol import (
    FAILED,
    FAILED_REVISION_KEY,
    FAILED_TASK_KEY,
    FIELD_MANAGER,
    PROGRESS_CHARACTERS,
    PROGRESS_MAXIMUM_BYTES,
    PROGRESS_REVISION_SUFFIX,
    PROGRESS_SUFFIX,
    PROTOCOL,
    REFUSALS,
    REFUSED,
    RESULT_FILE,
    RESULT_KEY,
    RESULT_MAXIMUM_BYTES,
    REVISION_SETTING,
    SETTINGS_FILE,
    STATE_DIRECTORY,
    STOPPED,
    SUCCEEDED,
    TRAINING,
)
from tfcompile.spec.mount_paths import RESERVED_MOUNT_PATH

if TYPE_CHECKING:  # `validate` reads this module's names without the spec's models (0.13 s)
    from tfcompile.spec.models import TrainingJob

__all__ = [
    "FAILED", "FAILED_REVISION_KEY", "FAILED_TASK_KEY", "FIELD_MANAGER", "PROGRESS_CHARACTERS",
    "PROGRESS_MAXIMUM_BYTES", "PROGRESS_REVISION_SUFFIX", "PROGRESS_SUFFIX", "PROTOCOL", "REFUSALS",
    "REFUSED", "RESULT_FILE", "RESULT_KEY", "RESULT_MAXIMUM_BYTES", "REVISION_SETTING",
    "SETTINGS_FILE", "STATE_DIRECTORY", "STOPPED", "SUCCEEDED", "TRAINING", "LauncherProgram",
    "runs_launcher",
]

STATE_VOLUME = "tfcompile-state"
SUCCESS_MARKER = f"{STATE_DIRECTORY}/{SUCCEEDED}"
FAILURE_MARKER = f"{STATE_DIRECTORY}/{FAILED}"
SCRIPT_VOLUME = "script"
SCRIPT_DIRECTORY = f"{RESERVED_MOUNT_PATH}/script"
LAUNCHER_VOLUME = "tfcompile-launcher"
LAUNCHER_DIRECTORY = f"{RESERVED_MOUNT_PATH}/launcher"
PROGRAM_FILE = "tfcompile-launcher.pyz"
"""The launcher's zip application: its key in the ConfigMap's `binaryData`, and the file the
container's command runs."""
REVISION_DIGITS = 12
"""A revision is this many hexadecimal digits of a digest (`compile.revision`)."""
_REVISION = rf"[0-9a-f]{{{REVISION_DIGITS}}}"
RECORD_PATTERN = (
    rf"^({SUCCEEDED} {_REVISION}"
    rf"|{FAILED} {_REVISION} (exit [0-9]{{1,3}} after [0-9]{{1,9}} restarts"
    rf"|deadline [0-9hms]{{2,24}} passed)"
    rf"|{TRAINING} {_REVISION} since [0-9]{{1,12}} stops [0-9]{{1,9}}"
    rf"|{STOPPED} {_REVISION} after [0-9]{{1,12}} stops [0-9]{{1,9}})$"
)
"""Every value the launcher records for its task (`State.record`, `State.save_clock`):
`succeeded <revision>`; `failed <revision> exit <status> after <restarts> restarts` or `failed
<revision> deadline <duration> passed`; `training <revision> since <epoch seconds> stops <n>`;
`stopped <revision> after <seconds> stops <n>`. A regular expression that RE2 (the API server's,
for the launcher policy) and Python read alike."""
RESULT_PATTERN = (
    rf"^[0-9a-f]{{{REVISION_DIGITS}}} "
    rf"([{{].*[}}]|{REFUSED}: ({'|'.join(REFUSALS)}))$"
)
"""A sweep trial's recorded result (`RESULT_KEY`): `<revision> {...}`, or `<revision> refused:
<reason>` for a file that is no result, with one of the launcher's reasons (plain words, no
character special to a regular expression or a CEL string); for RE2 (the launcher policy) as
for Python. Its size is the policy's to bound, in bytes."""
RESULT_RECORD_MAXIMUM_BYTES = REVISION_DIGITS + 1 + RESULT_MAXIMUM_BYTES
"""The most a recorded result may hold, in UTF-8 bytes: the revision, a space, the result."""


@dataclass(frozen=True)
class LauncherProgram:
    """The launcher as shipped: its zip application (`PROGRAM_FILE`) and the protocol version
    it speaks."""

    archive: bytes
    protocol: int = PROTOCOL

    def binary_data(self) -> dict[str, str]:
        """The ConfigMap's `binaryData`: the zip as one line of base64 (no `$`, nothing for
        Flux's post-build substitution or a YAML writer to change)."""
        return {PROGRAM_FILE: base64.b64encode(self.archive).decode("ascii")}

    def digest(self) -> str:
        """The zip's SHA-256, which the ConfigMap shows a reviewer
        (`labels.LAUNCHER_DIGEST_ANNOTATION`)."""
        return hashlib.sha256(self.archive).hexdigest()


def runs_launcher(job: TrainingJob) -> bool:
    """Whether the job's TensorFlow containers run the launcher (`launcher: python`, the
    default); with `launcher: none` they run the training command itself, and the job has no
    launcher ConfigMap, account or rights, and no revision gate."""
    from tfcompile.spec.models import Launcher  # loaded already: `job` is one of its models

    return job.spec.launcher is Launcher.PYTHON


def command(role: str) -> list[str]:
    """The container `command` of a role's pods; the training command follows as the
    container's `args`."""
    return ["python", f"{LAUNCHER_DIRECTORY}/{PROGRAM_FILE}", f"--role={role}", "--"]


def task_names(role: str, replicas: int) -> list[str]:
    """`worker-0`, `worker-1`, …: the keys of the job's state record."""
    return [f"{role}-{index}" for index in range(replicas)]


def settings_text(settings: dict[str, Any]) -> str:
    """The launcher's settings as the ConfigMap carries them: sorted, on one line (a job's
    output stays short, and a change to them is one changed line, as an indented text's would
    mostly be)."""
    return json.dumps(settings, sort_keys=True, separators=(", ", ": "))
