"""The launcher's decisions, as its container makes them (`program.main` in this process): when
and in what order it releases a job, when a failure counts and when it gives up, which record it
believes.

These are what a user's cluster relies on: a release that scales the pod's own StatefulSet first
ends the pod's token before the others are scaled (they keep their GPUs); one that scales the
evaluator first cuts its final evaluation; a job released before it succeeded loses its
training; a failure policy off by one gives up a restart early or never. The harness is
`tests/test_launcher_from_inside.py`'s (a fake clock, a fake training, the job's state ConfigMap
behind the cluster's launcher policy); here the API server also records each StatefulSet the
launcher scales to 0. The pod is `worker-0` of the job `demo` (chief, 2 workers, evaluator).
The revision gate is asked in process too, its peers' answers and its clock faked.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import job_text
from tests.test_launcher_from_inside import REVISION, TASK, Pod
from tests.test_launcher_from_inside import make_pod as make_pod  # the fixture, re-exported
from tfcompile.compiler.launcher import program
from tfcompile.compiler.objects import launcher_interface as launcher
from tfcompile.compiler.objects.builders.launcher_config_map import launcher_settings
from tfcompile.spec.loading import load_jobs

OTHER_REVISION = "fedcba987654"


def releasing(pod: Pod, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The StatefulSets the pod's launcher scales to 0, in order (filled as it runs)."""
    scaled: list[str] = []
    monkeypatch.setattr(pod.api, "scale_to_zero", scaled.append)
    return scaled


def test_a_released_job_scales_the_pods_own_statefulset_after_the_others_and_the_evaluator_last(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chief and the evaluator have succeeded; worker-0 ends last and releases the job."""
    pod = make_pod("  onSuccess: release\n")
    pod.api.data.update({"chief-0": f"succeeded {REVISION}",
                         "evaluator-0": f"succeeded {REVISION}"})
    scaled = releasing(pod, monkeypatch)
    assert pod.run(pod.training(runs=30.0)) == "idle"
    assert scaled == ["demo-chief", "demo-worker", "demo-evaluator"]


def test_the_evaluator_keeps_running_until_its_own_success(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pod = make_pod("  onSuccess: release\n")
    pod.api.data["chief-0"] = f"succeeded {REVISION}"
    scaled = releasing(pod, monkeypatch)
    assert pod.run(pod.training(runs=30.0)) == "idle"
    assert scaled == ["demo-chief", "demo-worker"]
    assert "the evaluator keeps running until its last evaluation" in capsys.readouterr().err


def test_nothing_is_released_before_the_job_has_succeeded(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's success is not the job's: with a chief, the chief's success is."""
    pod = make_pod("  onSuccess: release\n")
    pod.api.data["chief-0"] = f"succeeded {OTHER_REVISION}"  # an older revision's success
    scaled = releasing(pod, monkeypatch)
    assert pod.run(pod.training(runs=30.0)) == "idle"
    assert pod.api.data[TASK] == f"succeeded {REVISION}"
    assert scaled == []


def test_without_a_chief_every_worker_must_succeed_before_the_release(
        tmp_path: Path, make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pod = make_pod()
    job = tmp_path / "workers.yaml"
    job.write_text(job_text(image="tf", command="[python, train.py]",
                            spec_lines="onSuccess: release\n", roles="worker: {replicas: 2}"))
    (loaded,) = load_jobs(job)
    (pod.directory / "settings.json").write_text(
        launcher.settings_text(launcher_settings(loaded.job)))
    scaled = releasing(pod, monkeypatch)
    assert pod.run(pod.training(runs=30.0)) == "idle"
    assert scaled == []  # worker-1 has not succeeded
    pod.api.data["worker-1"] = f"succeeded {REVISION}"
    assert pod.restart(pod.training()) == "idle"  # a restart of a succeeded task releases
    assert scaled == ["demo-worker"]


def test_a_job_that_gave_up_is_released_with_the_pods_own_statefulset_last(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pod = make_pod("  onFailure: release\n  failurePolicy: {maxRestarts: 0}\n")
    scaled = releasing(pod, monkeypatch)
    assert pod.run(pod.training(runs=5.0, status=1)) == "idle"
    assert scaled == ["demo-chief", "demo-evaluator", "demo-worker"]


def test_the_failure_policy_gives_up_after_max_restarts_and_says_how_many(
        make_pod: Any) -> None:
    """maxRestarts: 2 — the first failure and two restarts fail; the third failure stops."""
    pod = make_pod("  failurePolicy: {maxRestarts: 2}\n")
    endings = [pod.restart(pod.training(runs=5.0, status=1)) for _ in range(4)]
    assert endings == ["exit 1", "exit 1", "idle", "idle"]
    assert pod.api.data[TASK] == f"failed {REVISION} exit 1 after 2 restarts"
    assert pod.trainings[-1].started is None  # given up: it trains no more


def test_an_exit_code_that_means_do_not_retry_stops_at_once(make_pod: Any) -> None:
    pod = make_pod("  failurePolicy: {maxRestarts: 5, doNotRetryExitCodes: [3]}\n")
    assert pod.run(pod.training(runs=5.0, status=3)) == "idle"
    assert pod.api.data[TASK] == f"failed {REVISION} exit 3 after 0 restarts"


def test_a_failure_beside_peers_that_were_not_stopped_counts(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a peer's stop recorded during the training excuses a failure; a peer that was
    never stopped excuses nothing."""
    pod = make_pod("  failurePolicy: {maxRestarts: 0}\n")
    two_workers(monkeypatch)
    pod.api.data["worker-1"] = f"training {REVISION} since 1799999000 stops 0"
    assert pod.run(pod.training(runs=5.0, status=1)) == "idle"
    assert pod.api.data[TASK] == f"failed {REVISION} exit 1 after 0 restarts"


def two_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pod is worker-0 of two workers; its peer's record key is `worker-1`."""
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["demo-worker-0.demo-worker:2222",
                               "demo-worker-1.demo-worker:2222"]},
        "task": {"type": "worker", "index": 0}}))


def peer_records_later(pod: Pod, monkeypatch: pytest.MonkeyPatch, after: float,
                       record: str) -> None:
    """worker-1's record becomes `record` once `after` seconds of the fake clock have passed
    (from now): its launcher writes it then."""
    at = pod.clock.now + after
    reading: Callable[[str], dict[str, str]] = pod.api.records

    def records(name: str) -> dict[str, str]:
        if pod.clock.now >= at:
            pod.api.data["worker-1"] = record
        return reading(name)

    monkeypatch.setattr(pod.api, "records", records)


@pytest.mark.parametrize("why", [f"stopped {REVISION} after 40 stops 1",
                                 f"training {REVISION} since 1799999000 stops 1"],
                         ids=["the peer was signalled", "the peer failed for its own peer's stop"])
def test_a_failure_after_a_peers_stop_is_not_counted_and_counts_as_this_tasks_stop(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    """Eviction: worker-1 is stopped (or its training failed, uncounted, for its own peer's
    stop) while worker-0 trains; worker-0's training fails with it. With `maxRestarts: 0`, a
    counted failure would end the job. Not counted, it is recorded as worker-0's stop in turn
    (stops 0 -> 1, the clock's start kept): a replacement worker-1 whose new training had
    joined worker-0's doomed one fails with it, and must not count that either."""
    pod = make_pod("  failurePolicy: {maxRestarts: 0}\n")
    two_workers(monkeypatch)
    pod.api.data["worker-1"] = f"training {REVISION} since 1799999000 stops 0"
    peer_records_later(pod, monkeypatch, 5.0, why)
    assert pod.run(pod.training(runs=5.0, status=1)) == "exit 1"
    assert pod.api.data[TASK] == f"training {REVISION} since 1800000000 stops 1"
    assert pod.restart(pod.training(runs=5.0)) == "idle"
    assert pod.api.data[TASK] == f"succeeded {REVISION}"


def test_a_peers_stop_recorded_after_this_training_failed_still_excuses_it(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """worker-1's training failed for its peer's stop at the same moment as worker-0's, and
    its launcher records that 8 s later (a loaded node): worker-0 looks for it that long."""
    pod = make_pod("  failurePolicy: {maxRestarts: 0}\n")
    two_workers(monkeypatch)
    pod.api.data["worker-1"] = f"training {REVISION} since 1799999000 stops 2"
    training = pod.training(runs=5.0, status=1)
    peer_records_later(pod, monkeypatch, 13.0, f"training {REVISION} since 1799999000 stops 3")
    assert pod.run(training) == "exit 1"
    assert pod.api.data[TASK] == f"training {REVISION} since 1800000000 stops 1"
    assert pod.clock.now - training.start_time - 5.0 == pytest.approx(8.0, abs=1.0)


def test_a_failure_beside_a_peer_that_stopped_before_this_training_counts(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop recorded before this training started excused an earlier training, not this
    one; the launcher gives up looking after `PEER_RECORD_SECONDS` and counts the failure."""
    pod = make_pod("  failurePolicy: {maxRestarts: 0}\n")
    two_workers(monkeypatch)
    pod.api.data["worker-1"] = f"stopped {REVISION} after 40 stops 4"
    training = pod.training(runs=5.0, status=1)
    assert pod.run(training) == "idle"
    assert pod.api.data[TASK] == f"failed {REVISION} exit 1 after 0 restarts"
    waited = pod.clock.now - training.start_time - 5.0
    assert program.PEER_RECORD_SECONDS <= waited <= program.PEER_RECORD_SECONDS + 1.0


def test_a_pod_stopping_after_its_training_failed_does_not_wait_for_peers_records(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet stops the pod (SIGTERM) while its launcher looks for a peer's stop: it stops
    looking and exits within the grace period, the failure counted."""
    import signal

    pod = make_pod("  failurePolicy: {maxRestarts: 1}\n")
    two_workers(monkeypatch)
    pod.api.data["worker-1"] = f"training {REVISION} since 1799999000 stops 0"
    training = pod.training(runs=5.0, status=1)
    reading: Callable[[str], dict[str, str]] = pod.api.records

    def records(name: str) -> dict[str, str]:
        if training.returncode is not None:
            signal.raise_signal(signal.SIGTERM)
        return reading(name)

    monkeypatch.setattr(pod.api, "records", records)
    assert pod.run(training) == "exit 1"
    assert pod.clock.now - training.start_time - 5.0 < 1.0
    assert (pod.directory / "state" / "failures").read_text() == "1\n"


class SupersededGate:
    """A gate that opens at once; while the training runs, worker-1 answers another revision."""

    def __init__(self, settings: dict[str, Any], listen: str, revision: str) -> None:
        self.peers = ["demo-worker-1.demo-worker"]
        self.watch_seconds = float(settings["watchSeconds"])

    def wait(self, until: float | None = None) -> bool:
        return True

    def superseded(self) -> str | None:
        return f"demo-worker-1.demo-worker runs revision {OTHER_REVISION}"


def test_a_training_superseded_by_a_peers_revision_records_a_stop_before_it_stops(
        make_pod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A roll: worker-1 already runs the new revision, so worker-0 stops its old training,
    uncounted. Its stop is recorded first, so a third task of the old revision, whose
    training fails with this one, does not count that failure."""
    pod = make_pod("  failurePolicy: {maxRestarts: 0}\n")
    two_workers(monkeypatch)
    monkeypatch.setattr(program, "RevisionGate", SupersededGate)
    training = pod.training(runs=3600.0, ends_after_term=2.0)
    assert pod.run(training) == "exit 1"
    stops = [when for when, entries in pod.api.history
             if entries.get(TASK, "").startswith(f"stopped {REVISION} ")]
    assert stops and training.terminated is not None and stops[0] <= training.terminated
    assert pod.api.data[TASK].endswith(" stops 1")
    assert not (pod.directory / "state" / "failures").exists()


def test_another_revisions_outcome_does_not_stop_this_one_from_training(make_pod: Any) -> None:
    """A pod of a new revision finds the old revision's success in the state: it trains."""
    pod = make_pod()
    pod.api.data[TASK] = f"succeeded {OTHER_REVISION}"
    training = pod.training(runs=30.0)
    assert pod.run(training) == "idle"
    assert training.started is not None
    assert pod.api.data[TASK] == f"succeeded {REVISION}"


class Peers:
    """What each peer answers on the gate port, in turn per host, on a fake clock that moves
    only when the gate sleeps; every question is kept."""

    def __init__(self, answers: dict[str, list[str | None]]) -> None:
        self.answers = answers
        self.asked: list[str] = []
        self.now = 1_800_000_000.0

    def revision_of(self, host: str) -> str | None:
        self.asked.append(host)
        remaining = self.answers[host]
        return remaining.pop(0) if len(remaining) > 1 else remaining[0]

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        assert self.now < 1_800_000_000.0 + 3600, "the gate still waits an hour later"


def revision_gate(monkeypatch: pytest.MonkeyPatch, peers: Peers, watch_peers: int = 1) -> Any:
    """worker-0's gate in a job of three workers, asking `peers` (no port is opened)."""
    from tfcompile.compiler.launcher import gate

    def no_server(address: object) -> None:
        raise OSError("not in this test")

    monkeypatch.setattr(socket, "create_server", no_server)  # the gate's socket module
    monkeypatch.setattr(gate, "time", peers)
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": [f"demo-worker-{index}.demo-worker:2222" for index in range(3)]},
        "task": {"type": "worker", "index": 0}}))
    opened = gate.RevisionGate({"port": 2223, "waitSeconds": 2, "watchSeconds": 10,
                                "watchPeers": watch_peers}, "", REVISION)
    monkeypatch.setattr(opened, "revision_of", peers.revision_of)
    return opened


def test_the_gate_opens_once_every_peer_answers_this_revision(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Peers restarting (no answer) or still on the old revision hold it; it asks again every
    waitSeconds, only the peers still pending."""
    peers = Peers({"demo-worker-1.demo-worker": [None, OTHER_REVISION, REVISION],
                   "demo-worker-2.demo-worker": [REVISION]})
    opened = revision_gate(monkeypatch, peers)
    assert opened.wait() is True
    assert peers.asked == ["demo-worker-1.demo-worker", "demo-worker-2.demo-worker",
                           "demo-worker-1.demo-worker", "demo-worker-1.demo-worker"]
    assert peers.now == 1_800_000_000.0 + 2 * 2


def test_the_gate_gives_up_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    peers = Peers({"demo-worker-1.demo-worker": [OTHER_REVISION],
                   "demo-worker-2.demo-worker": [REVISION]})
    opened = revision_gate(monkeypatch, peers)
    assert opened.wait(until=1_800_000_000.0 + 5) is False
    assert peers.now == 1_800_000_000.0 + 6  # asked at 0, 2 and 4 s; at 6 s the deadline passed


def test_a_training_is_superseded_only_by_a_peer_answering_another_revision(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A peer that does not answer (restarting, or not yet scheduled) supersedes nothing; the
    peers are asked watchPeers at a time, in turn."""
    peers = Peers({"demo-worker-1.demo-worker": [None, OTHER_REVISION],
                   "demo-worker-2.demo-worker": [REVISION]})
    opened = revision_gate(monkeypatch, peers)
    assert [opened.superseded() for _ in range(3)] == [
        None, None, f"demo-worker-1.demo-worker runs revision {OTHER_REVISION}"]
    assert peers.asked == ["demo-worker-1.demo-worker", "demo-worker-2.demo-worker",
                           "demo-worker-1.demo-worker"]


class _OpenGate:
    """A gate with no peers that opens at once."""

    def __init__(self) -> None:
        self.peers: list[str] = []
        self.watch_seconds = 0.2

    def wait(self, until: float | None = None) -> bool:
        return True

    def superseded(self) -> str | None:
        return None


class _Records:
    """The task's state record: only what `train` asks of it, the stops counted."""

    def __init__(self) -> None:
        self.stops = 0

    def refresh(self) -> None:
        pass

    def stops_of(self, tasks: list[str]) -> dict[str, int]:
        return {}

    unsaved = False

    def record_stop(self) -> None:
        self.stops += 1

    def renew_stop(self) -> None:
        pass


@pytest.mark.slow
def test_a_signal_while_the_training_starts_reaches_the_training(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM between the training's start and the launcher knowing it (the kubelet stopping
    the pod at that moment) is forwarded to the training, which gets its grace period, and is
    recorded as a stop; it does not end the launcher alone, leaving the training to be killed."""
    import os
    import signal
    import subprocess
    import sys

    from tfcompile.compiler.launcher import program

    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def popen_then_signal(command: list[str], **options: Any) -> subprocess.Popen[bytes]:
        child = real_popen(command, **options)
        started.append(child)
        os.kill(os.getpid(), signal.SIGTERM)  # handled here, before `train` holds the child
        return child

    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    monkeypatch.setattr(subprocess, "Popen", popen_then_signal)
    records = _Records()
    gate: Any = _OpenGate()
    state: Any = records
    try:
        ending = program.train([sys.executable, "-c", "import time; time.sleep(60)"], gate,
                               state, None, [])
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for child in started:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert (ending.status, ending.signalled) == (128 + signal.SIGTERM, True)
    assert records.stops == 1
