"""What a training can do to its launcher from inside its pod, and what still holds.

The training is the user's code, in the launcher's own container: it can signal the launcher
(the kubelet's SIGTERM and its own look alike) and write anything at `TFCOMPILE_RESULT_FILE`.
Whatever it does, the deadline stops it when it comes and every second it trained counts; a
result is recorded, or refused with a note in the record beside the success, and never makes
the launcher fail after a successful training (which would train it again, uncounted).

The launcher runs here in this process, as its container runs it (`program.main`), on a fake
clock (hours pass at once), with a fake training process (`Training`: what it does when, on
that clock) and a fake API server that keeps the job's state ConfigMap and refuses what the
cluster's launcher policy refuses (the record formats, and a result's size in bytes).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.test_launcher import settings_of
from tfcompile.compiler.launcher import program, records, results
from tfcompile.compiler.objects import launcher

REVISION = "0123456789ab"
TASK = "worker-0"
BACKOFF_SECONDS = 10.0
"""The kubelet's wait before it restarts a container (its first back-off)."""
FOREVER_SECONDS = 30 * 24 * 3600.0
"""A training that runs this long on the fake clock trains forever."""


class Idled(Exception):
    """The launcher went to sleep for good (`program.idle`)."""


class TrainsForever(Exception):
    """The fake clock passed `FOREVER_SECONDS` with the training still running."""


class ContainerKilled(Exception):
    """The kubelet killed the container (SIGKILL at the end of the grace period)."""


class Clock:
    """The launcher's `time` module: seconds pass only when someone waits."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if seconds >= program.IDLE_SECONDS:
            raise Idled
        self.now += seconds


class PolicyApi:
    """The job's state ConfigMap in the API server, behind the cluster's launcher policy: a
    task's record in the launcher's formats only, a result only beside that task's success, in
    its format and at most its size in UTF-8 bytes (what the policy's CEL checks)."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def records(self, name: str) -> dict[str, str]:
        return dict(self.data)

    def record(self, name: str, entries: dict[str, str], attempts: int = 6,
               timeout: float = 30.0) -> None:
        new = {**self.data, **entries}
        if TASK in entries and not re.fullmatch(launcher.RECORD_PATTERN, entries[TASK]):
            raise OSError("HTTP 403 Forbidden: not a record")
        if records.RESULT_KEY in entries:
            result = entries[records.RESULT_KEY]
            if (len(result.encode()) > launcher.RESULT_RECORD_MAXIMUM_BYTES
                    or not re.fullmatch(launcher.RESULT_PATTERN, result)
                    or new.get(TASK) != f"{launcher.SUCCEEDED} {result[:12]}"):
                raise OSError("HTTP 403 Forbidden: not a result")
        self.data = new

    def scale_to_zero(self, statefulset: str) -> None:
        raise AssertionError("nothing here releases")


@dataclass
class Training:
    """A training as the launcher sees it (its `Popen`), on the fake clock. Times are seconds
    after it started: when it exits by itself (`runs`, with `status`), when it sends its
    launcher SIGTERM (`signals_launcher`), how long it takes to end after a SIGTERM
    (`ends_after_term`; None: it ignores it), when the kubelet kills the container
    (`killed`), and what it writes at the result file before it exits (`writes`, or what
    `then` makes there)."""

    clock: Clock
    runs: float | None = None
    status: int = 0
    signals_launcher: list[float] = field(default_factory=list)
    ends_after_term: float | None = None
    killed: float | None = None
    writes: bytes | None = None
    then: Callable[[Path], None] | None = None
    result_file: Path | None = None
    started: float | None = None
    returncode: int | None = None
    terminated: float | None = None
    ended: float | None = None
    signals: list[int] = field(default_factory=list)

    def start(self) -> Training:
        self.started = self.clock.now
        return self

    @property
    def start_time(self) -> float:
        assert self.started is not None, "the training never started"
        return self.started

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, number: int) -> None:
        self.signals.append(number)
        if number == signal.SIGKILL:
            self.returncode = -signal.SIGKILL
        elif self.terminated is None:
            self.terminated = self.clock.now

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def events(self) -> list[tuple[float, str]]:
        found = [(self.start_time + at, "signal") for at in self.signals_launcher]
        if self.runs is not None:
            found.append((self.start_time + self.runs, "exit"))
        if self.terminated is not None and self.ends_after_term is not None:
            found.append((self.terminated + self.ends_after_term, "term"))
        if self.killed is not None:
            found.append((self.start_time + self.killed, "killed"))
        return sorted(event for event in found if event[0] >= self.clock.now)

    def wait(self, timeout: float | None = None) -> int:
        limit = None if timeout is None else self.clock.now + timeout
        while self.returncode is None:
            if self.clock.now - self.start_time > FOREVER_SECONDS:
                raise TrainsForever
            events = self.events()
            if not events or (limit is not None and events[0][0] > limit):
                if limit is None:
                    raise TrainsForever
                self.clock.now = limit
                raise subprocess.TimeoutExpired("training", timeout or 0.0)
            when, what = events[0]
            self.clock.now = when
            if what == "signal":
                self.signals_launcher.remove(when - self.start_time)
                signal.raise_signal(signal.SIGTERM)  # the launcher's handler runs now
            elif what == "killed":
                raise ContainerKilled
            elif what == "term":
                self.returncode = -signal.SIGTERM
            else:
                if self.result_file is not None and self.writes is not None:
                    self.result_file.write_bytes(self.writes)
                if self.result_file is not None and self.then is not None:
                    self.then(self.result_file)
                self.returncode = self.status
        self.ended = self.clock.now if self.ended is None else self.ended
        return self.returncode

    def ran(self) -> float:
        """How long it ran, by the fake clock (until now, while it runs)."""
        return (self.clock.now if self.ended is None else self.ended) - self.start_time


class OpenGate:
    """A job of one task: no peer to wait for or to watch."""

    def __init__(self, settings: dict[str, Any], listen: str, revision: str) -> None:
        self.peers: list[str] = []
        self.watch_seconds = float(settings["watchSeconds"])

    def wait(self, until: float | None = None) -> bool:
        return True

    def superseded(self) -> str | None:
        return None


@dataclass
class Pod:
    """One task's pod: its emptyDir, its settings, its account (for the fake API server)."""

    directory: Path
    clock: Clock
    api: PolicyApi
    trainings: list[Training] = field(default_factory=list)

    @property
    def result_file(self) -> Path:
        return self.directory / "state" / "result.json"

    def training(self, **behaviour: Any) -> Training:
        return Training(self.clock, result_file=self.result_file, **behaviour)

    def run(self, training: Training) -> str:
        """Run the launcher as the container does, around `training`: how it ended
        (`exit <status>`, `idle`, `killed`)."""
        self.trainings.append(training)
        arguments = [f"--state={self.directory / 'state'}",
                     f"--account={self.directory / 'account'}", "--role=worker",
                     f"--settings={self.directory / 'settings.json'}", "--", "train"]
        try:
            return f"exit {program.main(arguments)}"
        except SystemExit as exit_:
            return f"exit {exit_.code}"
        except Idled:
            return "idle"
        except ContainerKilled:
            return "killed"
        finally:
            for number in (signal.SIGTERM, signal.SIGINT):
                signal.signal(number, signal.SIG_DFL)
            program.DEFERRED_SIGNALS.clear()

    def restart(self, training: Training) -> str:
        """The kubelet restarts the container after its back-off."""
        self.clock.now += BACKOFF_SECONDS
        return self.run(training)


@pytest.fixture
def make_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A pod of a job with `extra` spec lines, whose launcher runs in this process."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    clock = Clock()
    api = PolicyApi()
    pods: list[Pod] = []

    def make(extra: str = "") -> Pod:
        directory = tmp_path / "pod"
        (directory / "state").mkdir(parents=True)
        (directory / "account").mkdir()
        (directory / "account" / "token").write_text("token\n")
        (directory / "settings.json").write_text(
            launcher.settings_text(settings_of(tmp_path, extra)))
        pod = Pod(directory, clock, api)
        pods.append(pod)
        monkeypatch.setattr(program, "time", clock)
        monkeypatch.setattr(records, "time", clock)
        monkeypatch.setattr(records, "ApiServer", lambda url, account: api)
        monkeypatch.setattr(program, "RevisionGate", OpenGate)
        monkeypatch.setattr(program, "subprocess", SimpleNamespace(
            Popen=lambda command: pod.trainings[-1].start(),
            TimeoutExpired=subprocess.TimeoutExpired))
        monkeypatch.setenv("TASK_INDEX", "0")
        monkeypatch.setenv("TFCOMPILE_REVISION", REVISION)
        monkeypatch.setenv(results.RESULT_VARIABLE, str(pod.result_file))
        monkeypatch.delenv("TF_CONFIG", raising=False)
        return pod

    yield make
    for number, handler in handlers.items():
        signal.signal(number, handler)


def test_a_training_that_signals_its_launcher_is_still_stopped_at_the_deadline(
        make_pod: Any) -> None:
    """The training sends its launcher SIGTERM (as the kubelet would), ignores the SIGTERM the
    launcher forwards, and trains on: at the deadline the launcher stops it (SIGTERM, then
    SIGKILL 30 s later), records the failure the spec asks for, and a restart trains no more."""
    pod = make_pod("  deadline: 1m\n")
    training = pod.training(signals_launcher=[5.0])
    assert pod.run(training) == "exit 0"  # signalled: it exits rather than idle
    assert training.signals == [signal.SIGTERM, signal.SIGTERM, signal.SIGKILL]
    assert training.ran() == 60 + program.STOP_SECONDS
    assert pod.api.data[TASK] == f"failed {REVISION} deadline 1m passed"
    assert pod.api.data["failed-task"] == f"{TASK} (deadline 1m passed)"
    assert pod.restart(pod.training(runs=1.0)) == "idle"
    assert pod.trainings[-1].started is None  # it never trained again


def test_every_second_a_signalled_training_runs_counts_toward_the_deadline(
        make_pod: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A training that signals its launcher at once and trains 90 s more each time (its exit
    0 then is neither a success nor a failure, and the kubelet restarts it) is charged for all
    90 s: after 600 s of training in all, the deadline ends it."""
    pod = make_pod("  deadline: 10m\n")
    endings: list[str] = []
    while len(endings) < 20 and "failed" not in "".join(endings[-1:]):
        training = pod.training(signals_launcher=[1.0], runs=90.0, status=0)
        ending = pod.restart(training)
        endings.append(ending + (" (failed)" if pod.api.data[TASK].startswith("failed") else ""))
        if len(endings) == 1:
            assert pod.api.data[TASK] == f"stopped {REVISION} after 90 stops 1"
    assert endings == ["exit 0"] * 6 + ["exit 0 (failed)"], endings
    assert pod.api.data[TASK] == f"failed {REVISION} deadline 10m passed"
    assert sum(training.ran() for training in pod.trainings) <= 600 + program.STOP_SECONDS
    assert "neither a success nor a failure" in capsys.readouterr().err


def test_a_stop_is_recorded_until_the_training_ends_or_the_kubelet_kills_it(
        make_pod: Any) -> None:
    """A training stopped at 20 s runs on (as MultiWorkerMirroredStrategy's does) until the
    kubelet kills the container at 50 s: the record of the stop has followed it, so the
    restart's clock goes on from about 50 s, not 20 s."""
    pod = make_pod("  deadline: 1h\n")
    assert pod.run(pod.training(signals_launcher=[20.0], killed=50.0)) == "killed"
    recorded = pod.api.data[TASK].split()
    assert recorded[:3] == ["stopped", REVISION, "after"] and recorded[4:] == ["stops", "1"]
    assert 50 - program.STOP_CLOCK_SECONDS <= int(recorded[3]) <= 50
    pod.clock.now += 3600  # the replacement pod is scheduled an hour later: that does not count
    resumed = pod.training()
    assert pod.run(resumed) == "idle"
    assert 3600 - 50 <= resumed.ran() <= 3600 - 50 + program.STOP_CLOCK_SECONDS + \
        program.STOP_SECONDS


NESTED = b"[" * 2000 + b"]" * 2000


@pytest.mark.parametrize(("written", "recorded"), [
    (b'{"loss": 0.25, "accuracy": 1}', '{"accuracy":1,"loss":0.25}'),
    (b'{"loss": ' + b"9" * 400 + b"}", "refused: not a JSON object of finite numbers"),
    (b'{"loss": ' + b"9" * 4000 + b"}", "refused: not a JSON object of finite numbers"),
    (b'{"loss": 1e999}', "refused: not a JSON object of finite numbers"),
    (b'{"loss": NaN}', "refused: not a JSON object of finite numbers"),
    (b'{"loss": -Infinity}', "refused: not a JSON object of finite numbers"),
    (b'{"loss": ' + NESTED + b"}", "refused: not a JSON object of finite numbers"),
    (b"[" * 10_000 + b"]" * 10_000, "refused: larger than 4096 bytes"),
    (b'{"loss": 0.5, "\xff\xfe": 1}', "refused: not UTF-8 text"),
    (b'{"loss": 0.5', "refused: not JSON"),
    (b"x" * 1_000_000, "refused: larger than 4096 bytes"),
    (b'{"' + "é".encode() * 2000 + b'": 1}', "refused: larger than 4096 bytes"),
], ids=["numbers", "400-digit-integer", "4000-digit-integer", "1e999", "nan", "infinity",
        "nested", "nested-10000", "not-utf-8", "not-json", "a-megabyte", "escaped-too-large"])
def test_any_result_is_recorded_or_refused_beside_the_success(
        make_pod: Any, written: bytes, recorded: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever the training writes as its result, its success is recorded and the launcher
    idles (it does not train again), with the result or a note that it was refused; the log
    says why, without the file's content."""
    pod = make_pod()
    assert pod.run(pod.training(runs=30.0, writes=written)) == "idle"
    assert pod.api.data == {TASK: f"succeeded {REVISION}", "result": f"{REVISION} {recorded}"}
    said = capsys.readouterr().err
    assert "training succeeded; idling" in said
    if recorded.startswith("refused"):
        assert "is not recorded: " + recorded.removeprefix("refused: ") in said
        assert "9999" not in said and "[[" not in said


def link_elsewhere(path: Path) -> None:
    (path.parent.parent / "elsewhere.json").write_text('{"loss": 1}')
    path.symlink_to(path.parent.parent / "elsewhere.json")


def fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.mark.parametrize("make", [link_elsewhere, Path.mkdir, fifo],
                         ids=["link", "directory", "fifo"])
def test_a_result_that_is_no_regular_file_is_refused_beside_the_success(
        make_pod: Any, make: Callable[[Path], None]) -> None:
    """Read through no link, and only from a regular file (a FIFO would block, a device
    never end)."""
    pod = make_pod()
    assert pod.run(pod.training(runs=30.0, then=make)) == "idle"
    assert pod.api.data == {TASK: f"succeeded {REVISION}", records.RESULT_KEY:
                            f"{REVISION} refused: not a regular file that can be read"}
