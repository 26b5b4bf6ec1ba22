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

import itertools
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
from tfcompile.compiler.launcher import program, progress, protocol, records, results
from tfcompile.compiler.objects import launcher_interface as launcher

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

    def __init__(self, clock: Clock | None = None) -> None:
        self.data: dict[str, str] = {}
        self.clock = clock
        self.history: list[tuple[float, dict[str, str]]] = []
        """Every request it admitted: when (by the fake clock), and what it set."""

    def records(self, name: str) -> dict[str, str]:
        return dict(self.data)

    def record(self, name: str, entries: dict[str, str], attempts: int = 6,
               timeout: float = 30.0) -> None:
        new = {**self.data, **entries}
        if TASK in entries and not re.fullmatch(launcher.RECORD_PATTERN, entries[TASK]):
            raise OSError("HTTP 403 Forbidden: not a record")
        if protocol.RESULT_KEY in entries:
            result = entries[protocol.RESULT_KEY]
            if (len(result.encode()) > launcher.RESULT_RECORD_MAXIMUM_BYTES
                    or not re.fullmatch(launcher.RESULT_PATTERN, result)
                    or new.get(TASK) != f"{launcher.SUCCEEDED} {result[:12]}"):
                raise OSError("HTTP 403 Forbidden: not a result")
        line, line_revision = (f"{TASK}{protocol.PROGRESS_SUFFIX}",
                               f"{TASK}{protocol.PROGRESS_REVISION_SUFFIX}")
        if line in entries or line_revision in entries:
            own = new.get(TASK, "")
            if (len(new.get(line, "")) > launcher.PROGRESS_MAXIMUM_BYTES
                    or not re.fullmatch(f"[{launcher.PROGRESS_CHARACTERS}]+", new.get(line, ""))
                    or new.get(line_revision) != REVISION
                    or not (own.startswith((f"training {REVISION} ", f"stopped {REVISION} "))
                            or own == f"succeeded {REVISION}")):
                raise OSError("HTTP 403 Forbidden: not a progress line")
        self.data = new
        self.history.append((self.clock.now if self.clock else 0.0, dict(entries)))

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
    reports: list[tuple[float, bytes]] = field(default_factory=list)
    """What it writes at its progress file, and when."""
    progress_file: Path | None = None
    result_file: Path | None = None
    started: float | None = None
    returncode: int | None = None
    terminated: float | None = None
    ended: float | None = None
    signals: list[int] = field(default_factory=list)

    def start(self, environment: dict[str, str] | None = None) -> Training:
        self.started = self.clock.now
        where = (environment or {}).get("TFCOMPILE_PROGRESS_FILE")
        self.progress_file = Path(where) if where else None
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
        found.extend((self.start_time + at, f"progress {index}")
                     for index, (at, _) in enumerate(self.reports))
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
            elif what.startswith("progress"):
                _, text = self.reports[int(what.split()[1])]
                assert self.progress_file is not None, "no TFCOMPILE_PROGRESS_FILE"
                self.progress_file.write_bytes(text)
                self.clock.now += 1e-6  # the next event comes after this one
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
                     f"--account={self.directory / 'account'}", "--role=worker", "--", "train"]
        try:  # the settings beside the program, as in the pod
            return f"exit {program.main(arguments, str(self.directory))}"
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
    api = PolicyApi(clock)
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
            Popen=lambda command, env=None: pod.trainings[-1].start(env),
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


@pytest.mark.parametrize("ends_after", [0.5, 12.0], ids=["at once", "after a checkpoint"])
def test_a_stop_the_api_server_did_not_take_is_recorded_before_the_training_has_ended(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch, ends_after: float) -> None:
    """Eviction on a loaded node: the API server does not take the stop's first two writes
    (the launcher's first attempt at the signal). Without a deadline the record is still
    written again until it is taken, by the time the training has ended, so a peer whose
    training fails with this one finds it and does not count that failure."""
    pod = make_pod()
    writing = pod.api.record
    refused: list[dict[str, str]] = []

    def record(name: str, entries: dict[str, str], *arguments: Any) -> None:
        if entries.get(TASK, "").startswith("stopped ") and len(refused) < 2:
            refused.append(entries)
            raise OSError("timed out")
        writing(name, entries, *arguments)

    monkeypatch.setattr(pod.api, "record", record)
    training = pod.training(signals_launcher=[20.0], ends_after_term=ends_after)
    assert pod.run(training) == "exit 143"
    assert len(refused) == 2
    stops = [when for when, entries in pod.api.history
             if entries.get(TASK, "").startswith(f"stopped {REVISION} ")]
    assert stops and training.ended is not None and stops[0] <= training.ended
    assert pod.api.data[TASK].endswith(" stops 1")


NESTED = b"[" * 2000 + b"]" * 2000


def object_of_bytes(size: int) -> bytes:
    """A compact JSON object of numbers, its keys sorted, of exactly `size` bytes: each
    `"kNNNN":1` and its comma is 10 bytes, the braces 2 less one comma; the first key is padded
    with `x` (and still sorts first)."""
    count = (size - 1) // 10
    keys = [f"k{index:04d}" for index in range(count)]
    keys[0] += "x" * (size - (10 * count + 1))
    text = "{" + ",".join(f'"{key}":1' for key in keys) + "}"
    assert len(text) == size
    return text.encode()


LARGEST = object_of_bytes(4096)


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
    (b'{"converged": true, "loss": 0.5}', "refused: not a JSON object of finite numbers"),
    (LARGEST, LARGEST.decode()),
    (object_of_bytes(4097), "refused: larger than 4096 bytes"),
], ids=["numbers", "400-digit-integer", "4000-digit-integer", "1e999", "nan", "infinity",
        "nested", "nested-10000", "not-utf-8", "not-json", "a-megabyte", "escaped-too-large",
        "a-boolean", "exactly-4096-bytes", "4097-bytes"])
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
    assert pod.api.data == {TASK: f"succeeded {REVISION}", protocol.RESULT_KEY:
                            f"{REVISION} refused: not a regular file that can be read"}


def _progress_records(api: PolicyApi) -> list[tuple[float, str]]:
    key = f"{TASK}{protocol.PROGRESS_SUFFIX}"
    return [(when, entries[key]) for when, entries in api.history if key in entries]


def test_progress_is_recorded_as_it_changes_at_most_every_ten_seconds_and_where_it_ended(
        make_pod: Any) -> None:
    """The training rewrites its progress file as it likes; the launcher records a changed
    line at most every `PROGRESS_SECONDS`, and the last one before the success."""
    pod = make_pod()
    training = pod.training(runs=60.0, reports=[
        (1.0, b'{"epoch": 1, "epochs": 3, "loss": 0.5}'),
        (2.0, b'{"epoch": 1, "epochs": 3, "loss": 0.45}'),
        (30.0, b'{"epoch": 2, "epochs": 3, "loss": 0.30, "accuracy": 0.915}'),
        (59.0, b'{"epoch": 3, "epochs": 3, "loss": 0.2125, "accuracy": 0.9}')])
    assert pod.run(training) == "idle"
    recorded = _progress_records(pod.api)
    lines = [line for _, line in recorded]
    assert lines[0] in ("epoch 1/3, loss 0.5", "epoch 1/3, loss 0.45")
    assert "epoch 2/3, accuracy 0.915, loss 0.3" in lines
    assert lines[-1] == "epoch 3/3, accuracy 0.9, loss 0.2125"
    assert len(lines) == len(set(lines))  # only what changed
    times = [when for when, _ in recorded]
    # The final line may follow sooner: it is where the training ended.
    assert all(later - earlier >= progress.PROGRESS_SECONDS - 1e-3
               for earlier, later in itertools.pairwise(times[:-1]))
    success = next(when for when, entries in pod.api.history
                   if entries.get(TASK) == f"succeeded {REVISION}")
    assert times[-1] <= success
    assert pod.api.data[f"{TASK}{protocol.PROGRESS_REVISION_SUFFIX}"] == REVISION


@pytest.mark.parametrize("content", [
    b'{"epoch": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    b'{"loss": NaN}', b"not json", b"\xff\xfe", b'{"x": 1' + b"0" * 400 + b"}",
    b'{"' + b"a" * 300 + b'": 1}', b"{}",
], ids=["deep", "nan", "text", "bytes", "huge integer", "a long name only", "empty"])
def test_a_progress_file_that_is_not_progress_is_never_recorded_and_stops_nothing(
        make_pod: Any, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    pod = make_pod()
    training = pod.training(runs=30.0, reports=[(1.0, content)])
    assert pod.run(training) == "idle"
    assert _progress_records(pod.api) == []
    assert pod.api.data[TASK] == f"succeeded {REVISION}"
    said = [line for line in capsys.readouterr().err.splitlines() if "progress" in line]
    assert len(said) == 1 and "is not recorded" in said[0]


def test_a_progress_line_names_counts_first_then_every_metric_by_name() -> None:
    from tfcompile.compiler.launcher.progress import progress_line

    assert progress_line({"loss": 0.123456, "step": 120, "steps": 400.0, "epoch": 3}) == (
        "epoch 3, step 120/400, loss 0.1235")
    assert progress_line({"val-loss": 1e-7, "x y": 1}) == "val-loss 1e-07"
