"""The launcher as a local process: success idles, failures stop by policy, SIGTERM is forwarded.

These run the launcher exactly as compiled into a job's ConfigMap, with this pod's emptyDir in a
temporary directory and no service-account token (so it records in the pod only); the record in
the API server and the release are tested against a real API server in tests/cluster/.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import py_compile
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import job_text
from tests.free_ports import free_ports
from tfcompile.compiler.launcher import api_server, gate, program, protocol, records, start
from tfcompile.compiler.objects import launcher_interface as launcher
from tfcompile.compiler.objects.builders.launcher_config_map import launcher_data, launcher_settings
from tfcompile.compiler.objects.builders.launcher_policy import records_policy
from tfcompile.compiler.output.launcher_zip import launcher_modules, shipped_launcher
from tfcompile.spec.loading import load_jobs
from tfcompile.spec.mount_paths import RESERVED_MOUNT_PATH, TOKEN_DIRECTORY
from tfcompile.spec.rules import REVISION_VARIABLE

EVENT_SECONDS = 60
"""How long a test waits for what a launcher is to print or do: far beyond the second or two it
takes, so that a loaded machine does not fail a test; an event that never comes fails it then."""

JOB = job_text(image="tf", command="[python, train.py]",
               roles="chief: {replicas: 1}\nworker: {replicas: 2}\nevaluator: {replicas: 1}")


def settings_of(tmp_path: Path, extra: str = "") -> dict[str, Any]:
    (tmp_path / "job.yaml").write_text(JOB + extra)
    (loaded,) = load_jobs(tmp_path / "job.yaml")
    return launcher_settings(loaded.job)


def ship(directory: Path) -> Path:
    """The launcher's zip in `directory`, as the pod's ConfigMap volume holds it; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / launcher.PROGRAM_FILE
    path.write_bytes(shipped_launcher().archive)
    return path


@dataclass
class Pod:
    """One pod's launcher files and emptyDir; `start` runs the launcher like its container."""

    directory: Path
    settings: dict[str, Any]

    def __post_init__(self) -> None:
        self.state = self.directory / "state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.program = ship(self.directory / "launcher")
        (self.directory / "settings.json").write_text(launcher.settings_text(self.settings))

    def start(self, command: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(self.program), f"--state={self.state}",
             f"--account={self.directory / 'no-account'}", "--role=worker",
             f"--settings={self.directory / 'settings.json'}", "--", "sh", "-c", command],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
            env={**os.environ, "TASK_INDEX": "1",
                 "TFCOMPILE_REVISION": "0123456789ab"},
        )
        _OUTPUTS[process.pid] = Output(process)
        return process


class Output:
    """What a launcher prints, read as it prints it: a test waits for a line, not a time."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.ended = False
        self.reader = threading.Thread(target=self._read, args=(process,), daemon=True)
        self.reader.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def wait_for(self, text: str, seconds: float = EVENT_SECONDS) -> None:
        """Return once a line holding `text` was printed; fail if the output ends first or
        after `seconds`."""
        with self.changed:
            self.changed.wait_for(
                lambda: self.ended or any(text in line for line in self.lines), seconds)
            if not any(text in line for line in self.lines):
                ended = "its output ended" if self.ended else f"{seconds} s"
                pytest.fail(f"the launcher never printed {text!r} ({ended}):\n"
                            + "".join(self.lines))

    def text(self) -> str:
        """Everything printed, once the process has ended."""
        self.reader.join(timeout=EVENT_SECONDS)
        assert not self.reader.is_alive(), "the launcher's output never ended"
        return "".join(self.lines)


_OUTPUTS: dict[int, Output] = {}


def output_of(process: subprocess.Popen[str]) -> Output:
    return _OUTPUTS[process.pid]


def idles(process: subprocess.Popen[str]) -> bool:
    """The launcher said it idles, and still runs (it would exit were it to train again),
    asleep in its idle loop: it catches SIGTERM only once there (a SIGTERM between the message
    and the loop ends it by the signal, not with 0)."""
    said_then_asleep(process, "; idling (delete or suspend the job to stop)")
    return process.poll() is None


def said_then_asleep(process: subprocess.Popen[str], text: str) -> None:
    """Wait until the launcher printed `text` and then blocked (in a sleep or waiting for the
    training): it sets what a signal does after it prints and before it blocks, so a signal
    sent in between would meet the launcher of before the message."""
    output_of(process).wait_for(text)
    assert eventually(lambda: process.poll() is not None or _sleeping(process.pid)), (
        f"the launcher never blocked after printing {text!r} within {EVENT_SECONDS} s")


def _sleeping(pid: int) -> bool:
    """Whether the process's main thread is blocked (state S)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].startswith("S")


def stop(process: subprocess.Popen[str]) -> str:
    """SIGTERM as the kubelet sends it; an idle launcher exits 0 promptly."""
    process.terminate()
    assert process.wait(timeout=EVENT_SECONDS) == 0
    return output_of(process).text()


def test_the_program_has_no_dollar_and_runs_on_the_python_of_tensorflow_images(
        tmp_path: Path) -> None:
    for text in launcher_data(load_jobs_text(tmp_path)).values():
        assert "$" not in text  # neither Flux's substitution nor the kubelet's $(VAR) touches it
    shipped = dict(launcher_modules())
    siblings = {name.removesuffix(".py") for name in map(os.path.basename, shipped)}
    for name, text in shipped.items():
        assert "$" not in text
        (tmp_path / os.path.basename(name)).write_text(text)
        py_compile.compile(str(tmp_path / os.path.basename(name)), doraise=True)
        # TensorFlow images have Python 3.8 and later, and nothing but the standard library
        # beside the launcher's own modules (imported relatively, whatever the package's name).
        tree = ast.parse(text, feature_version=(3, 8))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        imported |= {str(node.module).split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.level == 0}
        assert imported <= set(sys.stdlib_module_names), (name, imported)
        assert all(str(node.module) in siblings for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) and node.level > 0), name
    # The zip holds the package the tests import, `start.py` as its `__main__.py`.
    package = Path(program.__file__).parent
    assert shipped == {
        ("__main__.py" if path.name == "start.py" else f"{start.PACKAGE}/{path.name}"):
            path.read_text() for path in package.glob("*.py")}
    with zipfile.ZipFile(io.BytesIO(shipped_launcher().archive)) as archive:
        assert {info.filename: archive.read(info).decode() for info in archive.infolist()} == (
            shipped)
    assert program.REVISION_VARIABLE == REVISION_VARIABLE
    assert protocol.RESERVED_MOUNT_PATH == RESERVED_MOUNT_PATH
    assert api_server.ACCOUNT_DIRECTORY == TOKEN_DIRECTORY


def load_jobs_text(tmp_path: Path) -> Any:
    (tmp_path / "job.yaml").write_text(JOB + "  onSuccess: release\n"
                                       "  failurePolicy: {maxRestarts: 3}\n")
    (loaded,) = load_jobs(tmp_path / "job.yaml")
    return loaded.job


def test_settings_name_the_tasks_that_make_the_job_succeed(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, "  onSuccess: release\n")
    assert settings["successTasks"] == ["chief-0"]
    assert settings["evaluatorTasks"] == ["evaluator-0"]
    assert settings["releaseFirst"] == ["demo-chief", "demo-worker"]
    assert settings["releaseLast"] == ["demo-evaluator"]
    without_chief = JOB.replace("    chief: {replicas: 1}\n", "")
    (tmp_path / "job.yaml").write_text(without_chief)
    (loaded,) = load_jobs(tmp_path / "job.yaml")
    assert launcher_settings(loaded.job)["successTasks"] == ["worker-0", "worker-1"]


@pytest.mark.slow
def test_success_is_recorded_and_a_restart_idles_instead_of_training_again(
        tmp_path: Path) -> None:
    pod = Pod(tmp_path, settings_of(tmp_path))
    runs = tmp_path / "runs"
    first = pod.start(f"echo trained >> {shlex.quote(str(runs))}")
    assert idles(first)
    output = stop(first)
    assert (pod.state / launcher.SUCCEEDED).exists()
    assert "training succeeded; idling" in output
    again = pod.start(f"echo trained >> {shlex.quote(str(runs))}")
    assert idles(again)
    output = stop(again)
    assert "task worker-1 of revision 0123456789ab: succeeded (recorded)" in output
    assert "this task already succeeded; idling" in output
    assert runs.read_text() == "trained\n"


@pytest.mark.slow
def test_a_launcher_waits_for_the_settings_of_its_own_revision(tmp_path: Path) -> None:
    """The settings sit in a ConfigMap updated in place: a pod of another revision than theirs
    (an old pod during a roll, a new one before the kubelet refreshes its files) must not train
    with them, and trains once the file is of its revision (SIGTERM still stops it at once)."""
    settings = settings_of(tmp_path)
    pod = Pod(tmp_path, {**settings, protocol.REVISION_SETTING: "ba9876543210"})
    runs = tmp_path / "runs"
    waiting = pod.start(f"echo trained >> {shlex.quote(str(runs))}")
    said_then_asleep(waiting, "waiting for the kubelet to refresh them")
    assert waiting.poll() is None
    assert not runs.exists()
    assert "waiting" in stop(waiting)
    refreshed = pod.start(f"echo trained >> {shlex.quote(str(runs))}")
    output_of(refreshed).wait_for("waiting for the kubelet to refresh them")
    (tmp_path / "settings.json").write_text(launcher.settings_text(
        {**settings, protocol.REVISION_SETTING: "0123456789ab"}))
    assert idles(refreshed)  # read again after SETTINGS_WAIT_SECONDS, trained, succeeded
    assert runs.read_text() == "trained\n"
    assert "training succeeded; idling" in stop(refreshed)


@pytest.mark.slow
def test_without_a_policy_every_failure_is_passed_to_the_kubelet(tmp_path: Path) -> None:
    pod = Pod(tmp_path, settings_of(tmp_path))
    for _ in range(4):
        assert pod.start("exit 1").wait(timeout=EVENT_SECONDS) == 1
    assert not (pod.state / launcher.FAILED).exists()


@pytest.mark.slow
def test_failure_policy_stops_after_max_restarts(tmp_path: Path) -> None:
    pod = Pod(tmp_path, settings_of(tmp_path, "  failurePolicy: {maxRestarts: 2}\n"))
    assert [pod.start("exit 3").wait(timeout=EVENT_SECONDS) for _ in range(2)] == [3, 3]
    assert not (pod.state / launcher.FAILED).exists()
    third = pod.start("exit 3")
    assert idles(third)  # the 2nd restart failed too: the task stops instead of crash-looping
    output = stop(third)
    assert "no restarts left" in output
    assert (pod.state / launcher.FAILED).read_text() == "exit 3 after 2 restarts\n"
    fifth = pod.start("echo trained-again")
    assert idles(fifth)  # a stopped task does not train again in this pod
    assert "trained-again" not in stop(fifth)


@pytest.mark.slow
def test_an_exit_code_that_means_do_not_retry_stops_at_once(tmp_path: Path) -> None:
    pod = Pod(tmp_path, settings_of(
        tmp_path, "  failurePolicy: {maxRestarts: 10, doNotRetryExitCodes: [1, 2]}\n"))
    # Retryable: the kubelet restarts it.
    assert pod.start("exit 137").wait(timeout=EVENT_SECONDS) == 137
    stopped = pod.start("exit 2")
    assert idles(stopped)
    assert "that exit code means do not retry" in stop(stopped)
    assert (pod.state / launcher.FAILED).read_text() == "exit 2 after 1 restarts\n"


@pytest.mark.slow
def test_sigterm_reaches_the_training_and_is_not_counted_as_a_failure(tmp_path: Path) -> None:
    pod = Pod(tmp_path, settings_of(tmp_path, "  failurePolicy: {maxRestarts: 0}\n"))
    sleeper = pod.start("trap 'echo got-term; exit 143' TERM; sleep 600 & echo trapped; wait")
    # The training runs, its trap set, and the launcher waits for it (forwarding signals).
    said_then_asleep(sleeper, "trapped")
    sleeper.terminate()
    # Ended long before its sleep would: the launcher forwarded SIGTERM to the training.
    assert sleeper.wait(timeout=EVENT_SECONDS) == 143
    with contextlib.suppress(ProcessLookupError):  # the kubelet ends what is left of it
        os.killpg(sleeper.pid, signal.SIGKILL)
    assert "got-term" in output_of(sleeper).text()
    assert not (pod.state / launcher.FAILED).exists()
    assert not (pod.state / "failures").exists()


@pytest.mark.slow
def test_a_missing_command_exits_127_like_a_shell(tmp_path: Path) -> None:
    pod = Pod(tmp_path, settings_of(tmp_path))
    process = subprocess.run(
        [sys.executable, str(pod.program), f"--state={pod.state}",
         f"--account={tmp_path}", f"--settings={tmp_path / 'settings.json'}", "--",
         str(tmp_path / "no-such-program")],
        capture_output=True, text=True, timeout=EVENT_SECONDS, check=False)
    assert process.returncode == 127
    assert "cannot start" in process.stderr


def test_settings_are_json_the_launcher_reads(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, "  failurePolicy: {doNotRetryExitCodes: [2, 1, 2]}\n")
    assert json.loads(launcher.settings_text(settings))["failurePolicy"] == {
        "maxRestarts": 10, "doNotRetryExitCodes": [1, 2]}


@dataclass
class GatedTask:
    """One task of a two-worker cluster on loopback: its own address, port-sharing peers."""

    directory: Path
    index: int
    port: int

    @property
    def address(self) -> str:
        return f"127.0.0.{self.index + 2}"

    def start(self, revision: str, command: str) -> tuple[subprocess.Popen[str], Path]:
        """Run the launcher as this task's container; its output goes to a file."""
        self.directory.mkdir(parents=True, exist_ok=True)
        settings = settings_of(self.directory)
        settings["revisionGate"] = {**settings["revisionGate"], "port": self.port,
                                    "waitSeconds": 0.2, "watchSeconds": 0.3}
        pod = Pod(self.directory / f"attempt-{time.monotonic_ns()}", settings)
        log = pod.directory / "output.log"
        tf_config = {"cluster": {"worker": ["127.0.0.2:2222", "127.0.0.3:2222"]},
                     "task": {"type": "worker", "index": self.index}}
        with log.open("w") as output:
            process = subprocess.Popen(
                [sys.executable, str(pod.program), f"--state={pod.state}",
                 f"--account={pod.directory / 'no-account'}",
                 f"--settings={pod.directory / 'settings.json'}", f"--listen={self.address}",
                 "--role=worker", "--", "sh", "-c", command],
                stdout=output, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                env={**os.environ, "TASK_INDEX": str(self.index),
                     "TF_CONFIG": json.dumps(tf_config), REVISION_VARIABLE: revision})
        return process, log


def eventually(check: Any, seconds: float = EVENT_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_the_revision_gate_holds_training_until_every_peer_runs_the_same_revision(
        tmp_path: Path) -> None:
    (port,) = free_ports(1)
    worker_0, worker_1 = GatedTask(tmp_path / "w0", 0, port), GatedTask(tmp_path / "w1", 1, port)
    trained_0, trained_1 = tmp_path / "trained-0", tmp_path / "trained-1"
    processes: list[subprocess.Popen[str]] = []
    try:
        first, first_log = worker_0.start("new", f"touch {trained_0}; sleep 60")
        processes.append(first)
        assert eventually(lambda: "waits for every task to run it: 127.0.0.3 (no answer)"
                          in first_log.read_text())
        old, _ = worker_1.start("old", f"touch {trained_1}; sleep 60")  # a pod not yet replaced
        processes.append(old)
        assert eventually(lambda: "127.0.0.3 (old)" in first_log.read_text())
        assert not trained_0.exists() and not trained_1.exists()  # old and new never train
        old.terminate()  # the kubelet stops a pod waiting at the gate at once
        assert old.wait(timeout=EVENT_SECONDS) == 0
        new, _ = worker_1.start("new", f"touch {trained_1}; sleep 60")
        processes.append(new)
        assert eventually(lambda: trained_0.exists() and trained_1.exists())
        assert "every task runs revision new; training" in first_log.read_text()
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=EVENT_SECONDS)


@pytest.mark.slow
def test_a_training_task_stops_when_a_peer_answers_another_revision(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    worker_0, worker_1 = GatedTask(tmp_path / "w0", 0, port), GatedTask(tmp_path / "w1", 1, port)
    processes: list[subprocess.Popen[str]] = []
    try:
        training, log = worker_0.start("old", "sleep 60")
        processes.append(training)
        peer, _ = worker_1.start("old", "sleep 60")
        processes.append(peer)
        assert eventually(lambda: "training" in log.read_text())
        os.killpg(peer.pid, signal.SIGKILL)  # the pod is replaced by one of a new revision
        replaced, _ = worker_1.start("new", "sleep 60")
        processes.append(replaced)
        assert training.wait(timeout=EVENT_SECONDS) == 1  # the kubelet restarts it into the gate
        assert "127.0.0.3 runs revision new, not old: stopping the training" in log.read_text()
        state = log.parent / "state"
        assert not (state / "failures").exists()  # being replaced is not a failure
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=EVENT_SECONDS)


def test_a_releasing_pod_scales_its_own_statefulset_after_the_others() -> None:
    """A pod's token is bound to the pod: scaling its own StatefulSet first would end the token
    before the others are scaled (at once, for a pod deleted without a grace period)."""
    own_last = program.own_last
    names = ["demo-chief", "demo-worker", "demo-evaluator"]
    for role, order in (("chief", ["demo-worker", "demo-evaluator", "demo-chief"]),
                        ("worker", ["demo-chief", "demo-evaluator", "demo-worker"]),
                        ("evaluator", names), ("ps", names)):
        assert own_last(names, role) == order


def test_the_record_format_the_cluster_enforces_is_the_launchers() -> None:
    """The launcher policy admits only these values for a task's record (the API server reads
    the same expression with RE2; tests/cluster/ shows the launcher's records pass it)."""
    revision = "0123456789ab"
    for value in (f"succeeded {revision}", f"failed {revision} exit 3 after 2 restarts",
                  f"failed {revision} exit 137 after 0 restarts",
                  f"failed {revision} deadline 1h30m passed",
                  f"training {revision} since 1795000000 stops 0",
                  f"stopped {revision} after 3600 stops 2"):
        assert re.fullmatch(launcher.RECORD_PATTERN, value), value
    for value in (f"succeeded {revision} ", f"succeeded {revision}\x1b]0;x\x07", "succeeded",
                  f"succeeded {revision}0", "succeeded unknown", f"done {revision}",
                  f"failed {revision}", f"failed {revision} exit 3 after 2 restarts; more",
                  f"failed {revision} exit -1 after 2 restarts", ""
                  f"failed {revision} deadline 1h passed; more", f"training {revision}",
                  f"training {revision} since -5 stops 0", f"stopped {revision} after 1 stops",
                  f"training {revision} since 1795000000 stops 0 and more"):
        assert not re.fullmatch(launcher.RECORD_PATTERN, value), value


def test_the_launcher_policy_admits_each_result_note_and_counts_a_result_in_bytes() -> None:
    """The launcher records `<revision> refused: <reason>` for a file that is no result: the
    policy's pattern admits each reason it gives and nothing else after `refused:`; and it
    bounds a result in UTF-8 bytes, as the launcher does (CEL's `size()` of a string counts
    characters, a 4-byte one as one: the rule takes the size of its `bytes()`; the API
    server's evaluation of it is shown in tests/cluster/test_launcher_policy.py)."""
    revision = "0123456789ab"
    for reason in protocol.REFUSALS:
        assert re.fullmatch(launcher.RESULT_PATTERN, f"{revision} refused: {reason}"), reason
    for note in ("refused: ", "refused: not JSON; more", "refused: \x1b[2J", "refused"):
        assert not re.fullmatch(launcher.RESULT_PATTERN, f"{revision} {note}"), note
    (rule,) = (validation for validation in records_policy()["spec"]["validations"]
               if "may set result only" in validation.get("messageExpression", ""))
    assert f"size(bytes(variables.new['result'])) <= {12 + 1 + 4096}" in rule["expression"]
    assert "size(variables.new['result'])" not in rule["expression"]
    assert "4096 bytes (UTF-8)" in rule["messageExpression"]


def test_the_deadline_clock_goes_on_after_a_restart_and_pauses_while_stopped() -> None:
    """What a task's record says of the deadline's clock: running since a time, or stopped after
    so many seconds (the time it was stopped does not count); another revision's is no clock."""
    revision = "0123456789ab"
    now = 1_800_000_000.0
    assert records.parse_clock(f"training {revision} since 1799999000 stops 1", revision,
                               now) == (1_799_999_000.0, 1)
    assert records.parse_clock(f"stopped {revision} after 600 stops 2", revision,
                               now) == (now - 600, 2)
    assert records.parse_clock(f"training {revision} since 1900000000 stops 0", revision,
                               now) == (now, 0)  # a clock from the future starts now
    for record in (f"training {'f' * 12} since 1799999000 stops 1", f"succeeded {revision}",
                   f"stopped {revision} after x stops 2", ""):
        assert records.parse_clock(record, revision, now) is None


def test_a_peer_task_is_every_task_of_tf_config_but_this_one() -> None:
    tf_config = {"cluster": {"worker": ["a-worker-0.a-worker:2222", "a-worker-1.a-worker:2222"],
                             "ps": ["a-ps-0.a-ps:2222"]},
                 "task": {"type": "worker", "index": 1}}
    assert gate.peer_tasks(tf_config) == ["ps-0", "worker-0"]
    assert gate.peer_hosts(tf_config) == ["a-ps-0.a-ps", "a-worker-0.a-worker"]


@pytest.mark.slow
def test_a_training_past_its_deadline_is_stopped_and_recorded_as_failed(tmp_path: Path) -> None:
    pod = Pod(tmp_path, settings_of(tmp_path, "  deadline: 2s\n"))
    started = time.monotonic()
    training = pod.start(
        "sleep 600 & trap 'kill $!; echo saved-a-checkpoint; exit 0' TERM; wait")
    assert idles(training)  # a task stopped at its deadline does not train again
    # Not before its deadline, and long before its sleep ends (the second it stops at is the
    # subject of tests/test_launcher_from_inside.py, with a fake clock).
    assert (pod.state / launcher.FAILED).exists()
    assert time.monotonic() - started >= 2
    output = stop(training)
    assert "saved-a-checkpoint" in output  # the training got SIGTERM, and time to save
    assert "has trained for its deadline" in output
    assert (pod.state / launcher.FAILED).read_text() == "deadline 2s passed\n"
    again = pod.start("echo trained-again")
    assert idles(again)
    assert "trained-again" not in stop(again)


@pytest.mark.slow
def test_the_deadline_counts_restarts_but_not_the_time_a_stopped_task_waits(
        tmp_path: Path) -> None:
    pod = Pod(tmp_path, settings_of(tmp_path, "  deadline: 4s\n"))
    first_started = time.monotonic()
    failed = pod.start("sleep 1; exit 1")
    assert failed.wait(timeout=EVENT_SECONDS) == 1  # a failure: the clock goes on
    sleeper = pod.start("trap 'exit 143' TERM; sleep 600 & echo trapped; wait")
    said_then_asleep(sleeper, "trapped")
    time.sleep(1.5)  # 1.5 s more of training at least: the clock passes 2.5 s before it pauses
    sleeper.terminate()  # deleted or evicted: the clock pauses
    assert sleeper.wait(timeout=EVENT_SECONDS) == 143
    # The clock cannot have counted more than this, and a second more: it restarts from the
    # whole second its first training started in.
    ran = time.monotonic() - first_started + 1
    with contextlib.suppress(ProcessLookupError):
        os.killpg(sleeper.pid, signal.SIGKILL)
    clock = (pod.state / "clock").read_text().split()
    assert clock[0] == "stopped" and clock[4:] == ["stops", "1"], clock
    counted = int(clock[3])
    assert 2 <= counted <= ran, (clock, ran)
    time.sleep(3)  # longer than the deadline's rest: a stopped task's time does not count
    started = time.monotonic()
    resumed = pod.start("sleep 600 & trap 'kill $!; exit 0' TERM; wait")
    assert idles(resumed)  # stopped at its deadline, long before its sleep ends
    # It trained the rest of its deadline (whole seconds were recorded: up to one more), not
    # stopped at once, as it would have been had the 3 s it was stopped counted.
    assert 4 - counted - 1 <= time.monotonic() - started, counted
    assert "deadline 4s passed" in stop(resumed)
