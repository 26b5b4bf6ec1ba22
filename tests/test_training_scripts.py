"""Run the example training scripts as real TensorFlow clusters of local processes.

Every task is a process listening on a loopback port, with the environment the compiled
manifests give its pod (`TF_CONFIG`, `TASK_INDEX`, `JOB_NAME`, `PS_HOSTS`, ...) and temporary
directories in place of the shared volume and the node-local scratch space. A small supervisor
restarts a task that exits non-zero, as the kubelet restarts the container.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.free_ports import free_ports


def keras_2_installed() -> bool:
    """Whether `tf.keras` can be Keras 2, as the scripts need: TensorFlow 2.15's own Keras, or
    the tf-keras package beside a later TensorFlow (the training extra)."""
    if importlib.util.find_spec("tf_keras") is not None:
        return True
    try:
        return importlib.metadata.version("keras").startswith("2.")
    except importlib.metadata.PackageNotFoundError:
        return False


pytestmark = [pytest.mark.end_to_end, pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None or not keras_2_installed(),
    reason="needs TensorFlow with Keras 2 (the training extra: tensorflow-cpu and tf-keras)",
)]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# Held-out accuracy on the 450 held-out digits (the scripts generate them) must reach these
# bars. Measured values, with TensorFlow 2.15 (the examples' image) and 2.21 (the training
# extra) alike, lie between 0.98 and 1.0 (0.94 after the three short epochs of the SIGTERM test;
# see each test); the bars leave room for run-to-run variation.
MNIST_ACCURACY_BAR = 0.90
PARAMETER_SERVER_ACCURACY_BAR = 0.85
TF_SPAWNER_ACCURACY_BAR = 0.90
TENSORFLOW1_ACCURACY_BAR = 0.90

MNIST_EPOCHS = 8
TRAIN_EXAMPLES = 1347
FAKE_ACCESS_KEY = "AKIAFAKE7Q2X9EXAMPLE"
FAKE_SECRET_KEY = "fake-secret/K7MDENG+bPxRfiCYEXAMPLEKEY"


def make_cluster(**replicas: int) -> dict[str, list[str]]:
    """A cluster spec with one loopback address per task, roles sorted like TF_CONFIG's keys."""
    ports = iter(free_ports(sum(replicas.values())))
    return {
        role: [f"localhost:{next(ports)}" for _ in range(count)]
        for role, count in sorted(replicas.items())
        if count
    }


def pod_env(job: str, cluster: dict[str, list[str]], role: str, index: int) -> dict[str, str]:
    """The variables a compiled StatefulSet gives pod `<job>-<role>-<index>`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("TF_CONFIG", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    }
    tf_config = {"cluster": cluster, "task": {"type": role, "index": index}, "environment": "cloud"}
    workers = len(cluster.get("worker", []))
    env.update(
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
        HOSTNAME=f"{job}-{role}-{index}",
        TASK_INDEX=str(index),
        JOB_NAME=role,
        WORKER_NUMBER=str(index),
        TOT_WORKERS=str(workers),
        NUM_WORKERS=str(workers),
        PS_HOSTS=",".join(cluster.get("ps", [])),
        WORKER_HOSTS=",".join(cluster.get("worker", [])),
    )
    if sum(len(hosts) for hosts in cluster.values()) > 1:
        env["TF_CONFIG"] = json.dumps(tf_config, separators=(",", ":"), sort_keys=True)
    return env


@dataclass
class Task:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_dir: Path
    process: subprocess.Popen[bytes] | None = None
    exits: list[tuple[float, int]] = field(default_factory=list)
    restart_at: float | None = None

    def start(self) -> None:
        log = self.log_dir / f"{self.name}.{len(self.exits)}.log"
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, *self.argv],
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def output(self) -> str:
        return "".join(
            path.read_text(errors="replace")
            for path in sorted(self.log_dir.glob(f"{self.name}.*.log"))
        )

    def tail(self, lines: int = 25) -> str:
        return f"--- {self.name} ---\n" + "\n".join(self.output().splitlines()[-lines:])


class LocalCluster:
    """Tasks as process groups, started together and supervised until all exit 0."""

    def __init__(self, log_dir: Path, tmp_dir: Path) -> None:
        self.log_dir = log_dir
        self.tmp_dir = tmp_dir
        self.tasks: dict[str, Task] = {}

    def add(self, name: str, argv: list[str], env: dict[str, str]) -> Task:
        task = Task(name, argv, {**env, "TMPDIR": str(self.tmp_dir)}, self.log_dir)
        self.tasks[name] = task
        return task

    def start(self) -> None:
        for task in self.tasks.values():
            task.start()

    def stop(self) -> None:
        for task in self.tasks.values():
            task.kill()

    def diagnostics(self) -> str:
        return "\n".join(task.tail() for task in self.tasks.values())

    def poll(self, restart: bool, restart_delay: float) -> bool:
        """Restart due tasks, record exits; True when every task has exited 0."""
        now = time.monotonic()
        for task in self.tasks.values():
            if task.restart_at is not None:
                if now >= task.restart_at:
                    task.restart_at = None
                    task.start()
                continue
            assert task.process is not None
            code = task.process.poll()
            if code is None or (task.exits and task.exits[-1][1] == 0):
                continue
            task.exits.append((now, code))
            if code != 0 and not restart:
                pytest.fail(f"{task.name} exited {code}\n{self.diagnostics()}")
            if code != 0:
                task.restart_at = now + restart_delay
        return all(task.exits and task.exits[-1][1] == 0 for task in self.tasks.values())

    def run(
        self,
        timeout: float,
        restart: bool = False,
        restart_delay: float = 1.0,
        while_running: Callable[[], None] | None = None,
    ) -> None:
        """Wait until every task has exited 0; with `restart`, rerun tasks that fail."""
        deadline = time.monotonic() + timeout
        while not self.poll(restart, restart_delay):
            if time.monotonic() > deadline:
                pytest.fail(f"tasks did not all finish in {timeout:.0f} s\n{self.diagnostics()}")
            if while_running is not None:
                while_running()
            time.sleep(0.1)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="tfcompile-training-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def local_cluster(workdir: Path) -> Iterator[LocalCluster]:
    logs, tmp = workdir / "logs", workdir / "tmp"
    logs.mkdir()
    tmp.mkdir()
    cluster = LocalCluster(logs, tmp)
    try:
        yield cluster
    finally:
        cluster.stop()


def read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def progress_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def add_mnist_workers(local_cluster: LocalCluster, shared: Path) -> None:
    """The two workers of examples/mnist/job.yaml."""
    cluster = make_cluster(worker=2)
    argv = [str(EXAMPLES / "mnist" / "train.py"), "--epochs", str(MNIST_EPOCHS)]
    for index in range(2):
        local_cluster.add(
            f"worker-{index}",
            [*argv, "--shared-dir", str(shared)],
            pod_env("mnist", cluster, "worker", index),
        )


def check_mnist_results(shared: Path) -> list[dict[str, Any]]:
    results = [read_json(shared / "results" / f"worker-{index}.json") for index in range(2)]
    for result in results:
        assert result["epochs_completed"] == MNIST_EPOCHS
        assert result["replicas"] == 2
        assert result["accuracy"] >= MNIST_ACCURACY_BAR, result
    assert results[0]["final_loss"] == pytest.approx(results[1]["final_loss"], rel=1e-6)
    assert results[0]["accuracy"] == pytest.approx(results[1]["accuracy"], abs=1e-6)
    assert (shared / "model" / "saved_model.pb").is_file()
    return results


def test_mnist_two_workers_train_one_model(workdir: Path, local_cluster: LocalCluster) -> None:
    # Measured: held-out accuracy 0.993, final training loss 0.048, on both workers.
    shared = workdir / "shared"
    add_mnist_workers(local_cluster, shared)
    local_cluster.start()
    local_cluster.run(timeout=120)

    assert all(len(task.exits) == 1 for task in local_cluster.tasks.values())
    check_mnist_results(shared)
    for index in range(2):
        records = progress_records(shared / "progress" / f"worker-{index}.log")
        assert [record["epoch"] for record in records] == list(range(MNIST_EPOCHS))
        assert len({record["attempt"] for record in records}) == 1


@pytest.mark.parametrize("victim", [1, 0], ids=["kill-worker-1", "kill-worker-0-leader"])
def test_mnist_resumes_after_a_worker_is_killed(
    workdir: Path, local_cluster: LocalCluster, victim: int
) -> None:
    """SIGKILL one worker mid-training; failed tasks restart and the job resumes from backup.

    Worker 0 also hosts the coordination service of MultiWorkerMirroredStrategy, so both the
    leader and the other worker are tried. The surviving worker's collectives fail (the dead
    peer's connection resets, or the coordination service sees a new incarnation or missing
    heartbeats) and its process exits non-zero within seconds; nothing hangs.
    """
    shared = workdir / "shared"
    add_mnist_workers(local_cluster, shared)
    victim_task = local_cluster.tasks[f"worker-{victim}"]
    survivor = local_cluster.tasks[f"worker-{1 - victim}"]
    victim_log = shared / "progress" / f"worker-{victim}.log"
    killed_at: list[float] = []

    def kill_after_first_epoch() -> None:
        if killed_at or not victim_log.exists() or not progress_records(victim_log):
            return
        time.sleep(0.3)
        victim_task.kill()
        killed_at.append(time.monotonic())

    local_cluster.start()
    local_cluster.run(timeout=240, restart=True, while_running=kill_after_first_epoch)

    assert killed_at, "training ended before the first epoch was logged"
    assert victim_task.exits[0][1] == -signal.SIGKILL
    survivor_failure = survivor.exits[0]
    assert survivor_failure[1] != 0, "the surviving worker should fail and be restarted"
    survivor_exit_seconds = survivor_failure[0] - killed_at[0]
    print(f"surviving worker exited {survivor_failure[1]} after {survivor_exit_seconds:.1f} s")
    assert survivor_exit_seconds < 60

    results = check_mnist_results(shared)
    for index, result in enumerate(results):
        assert result["initial_epoch"] > 0, "the final attempt must resume, not start over"
        records = progress_records(shared / "progress" / f"worker-{index}.log")
        attempts = list(dict.fromkeys(record["attempt"] for record in records))
        assert len(attempts) >= 2
        last = [record["epoch"] for record in records if record["attempt"] == attempts[-1]]
        assert last[0] > 0
        assert last[-1] == MNIST_EPOCHS - 1
        assert {record["epoch"] for record in records} == set(range(MNIST_EPOCHS))


def test_mnist_survives_a_frozen_worker(workdir: Path, local_cluster: LocalCluster) -> None:
    """SIGSTOP a worker (a hung node or a network partition): no connection is reset.

    The coordination service notices the missing heartbeats (10 s) and aborts the surviving
    worker's collectives; that worker exits non-zero and is restarted. When the frozen worker
    runs again it finds its cluster gone, exits non-zero too, and the restarted pair resumes.
    """
    shared = workdir / "shared"
    add_mnist_workers(local_cluster, shared)
    frozen = local_cluster.tasks["worker-1"]
    survivor = local_cluster.tasks["worker-0"]
    frozen_log = shared / "progress" / "worker-1.log"
    frozen_at: list[float] = []
    resumed: list[bool] = []

    def freeze_then_resume() -> None:
        assert frozen.process is not None
        if not frozen_at:
            if frozen_log.exists() and progress_records(frozen_log):
                time.sleep(0.3)
                os.killpg(frozen.process.pid, signal.SIGSTOP)
                frozen_at.append(time.monotonic())
        elif not resumed and survivor.exits:
            os.killpg(frozen.process.pid, signal.SIGCONT)
            resumed.append(True)

    local_cluster.start()
    local_cluster.run(timeout=240, restart=True, while_running=freeze_then_resume)

    assert frozen_at, "training ended before the first epoch was logged"
    survivor_failure = survivor.exits[0]
    assert survivor_failure[1] != 0
    survivor_exit_seconds = survivor_failure[0] - frozen_at[0]
    print(f"surviving worker exited {survivor_failure[1]} after {survivor_exit_seconds:.1f} s")
    assert survivor_exit_seconds < 60
    assert frozen.exits[0][1] != 0
    for result in check_mnist_results(shared):
        assert result["initial_epoch"] > 0


def test_parameter_server_chief_trains_and_evaluator_reports(
    workdir: Path, local_cluster: LocalCluster
) -> None:
    # Measured: the evaluator's held-out accuracy on the final checkpoint is 0.987-0.991.
    shared = workdir / "shared"
    cluster = make_cluster(chief=1, worker=2, ps=1, evaluator=1)
    for role, hosts in cluster.items():
        for index in range(len(hosts)):
            local_cluster.add(
                f"{role}-{index}",
                [str(EXAMPLES / "parameter-server" / "train.py"), "--shared-dir", str(shared)],
                pod_env("parameter-server", cluster, role, index),
            )
    local_cluster.start()
    local_cluster.run(timeout=180)

    run = read_json(shared / "run.json")
    chief = read_json(shared / "results" / "chief-0.json")
    evaluator = read_json(shared / "results" / "evaluator-0.json")
    assert run["state"] == "finished"
    assert chief["run_id"] == evaluator["run_id"] == run["run_id"]
    assert chief["epochs_completed"] == 6
    final_checkpoint = Path(chief["final_checkpoint"])
    assert final_checkpoint.parent == shared / "checkpoints"
    assert final_checkpoint.with_name(final_checkpoint.name + ".index").is_file()
    assert chief["evaluator"] == evaluator
    assert evaluator["final"] is True
    assert evaluator["checkpoint"] == str(final_checkpoint)
    assert evaluator["accuracy"] >= PARAMETER_SERVER_ACCURACY_BAR, evaluator


def test_tf_spawner_shards_by_worker_number_and_hides_credentials(
    workdir: Path, local_cluster: LocalCluster
) -> None:
    # Measured: held-out accuracy 0.987 on both workers.
    shared = workdir / "shared"
    cluster = make_cluster(worker=2)
    for index in range(2):
        env = pod_env("tf-spawner", cluster, "worker", index)
        env.update(
            S3_ENDPOINT="https://s3.example.com",
            AWS_ACCESS_KEY_ID=FAKE_ACCESS_KEY,
            AWS_SECRET_ACCESS_KEY=FAKE_SECRET_KEY,
        )
        local_cluster.add(
            f"worker-{index}",
            [str(EXAMPLES / "tf-spawner" / "train.py"), "--shared-dir", str(shared)],
            env,
        )
    local_cluster.start()
    local_cluster.run(timeout=120)

    results = [read_json(shared / "results" / f"worker-{index}.json") for index in range(2)]
    for index, result in enumerate(results):
        assert result["worker_number"] == index
        assert result["tot_workers"] == 2
        assert result["global_batch_size"] == 2 * 16
        assert result["credentials_present"] is True
        assert result["s3_endpoint"] == "https://s3.example.com"
        assert result["accuracy"] >= TF_SPAWNER_ACCURACY_BAR, result
    assert sum(result["shard_examples"] for result in results) == TRAIN_EXAMPLES
    assert results[0]["final_loss"] == pytest.approx(results[1]["final_loss"], rel=1e-6)

    written = [local_cluster.tasks[name].output() for name in local_cluster.tasks]
    written += [
        path.read_bytes().decode(errors="replace") for path in shared.rglob("*") if path.is_file()
    ]
    for text in written:
        assert FAKE_ACCESS_KEY not in text
        assert FAKE_SECRET_KEY not in text


def test_tensorflow1_workers_finish_and_evaluator_reports(
    workdir: Path, local_cluster: LocalCluster
) -> None:
    # Measured: the evaluator's held-out accuracy at the last step is 0.996-0.998.
    shared = workdir / "shared"
    cluster = make_cluster(worker=2, ps=1, evaluator=1)
    for role, hosts in cluster.items():
        for index in range(len(hosts)):
            env = pod_env("tensorflow1", cluster, role, index)
            scratch = workdir / f"scratch-{role}-{index}"
            local_cluster.add(
                f"{role}-{index}",
                [
                    str(EXAMPLES / "tensorflow1" / "train.py"),
                    f"--ps_hosts={env['PS_HOSTS']}",
                    f"--worker_hosts={env['WORKER_HOSTS']}",
                    f"--job_name={env['JOB_NAME']}",
                    f"--task_index={env['TASK_INDEX']}",
                    f"--shared-dir={shared}",
                    f"--scratch-dir={scratch}",
                ],
                env,
            )
    local_cluster.start()
    local_cluster.run(timeout=180)

    workers = [read_json(shared / "results" / f"worker-{index}.json") for index in range(2)]
    assert [worker["is_chief"] for worker in workers] == [True, False]
    for worker in workers:
        assert worker["global_step"] >= 1500
        assert worker["local_steps"] > 0
    assert sum(worker["local_steps"] for worker in workers) >= 1500
    evaluator = read_json(shared / "results" / "evaluator-0.json")
    assert evaluator["final"] is True
    assert evaluator["global_step"] >= 1500
    assert Path(evaluator["checkpoint"]).parent == shared / "checkpoints"
    assert evaluator["accuracy"] >= TENSORFLOW1_ACCURACY_BAR, evaluator
    assert list((shared / "logs" / "train").glob("events.out.tfevents.*"))
    assert list((shared / "logs" / "eval").glob("events.out.tfevents.*"))
    for name in ("worker-0", "worker-1", "evaluator-0"):
        assert (workdir / f"scratch-{name}" / "digits" / "x_train.npy").is_file()


@pytest.mark.parametrize(
    ("example", "args"),
    [
        ("mnist", ["--epochs", "2"]),
        ("parameter-server", ["--epochs", "2"]),
        ("tf-spawner", ["--epochs", "2"]),
        ("tensorflow1", ["--train_steps", "200"]),
    ],
)
def test_one_pod_job_trains_without_tf_config(
    workdir: Path, local_cluster: LocalCluster, example: str, args: list[str]
) -> None:
    """A job of one pod gets no TF_CONFIG; every script then trains alone."""
    shared = workdir / "shared"
    role = "chief" if example == "parameter-server" else "worker"
    env = pod_env(example, make_cluster(**{role: 1}), role, 0)
    assert "TF_CONFIG" not in env
    argv = [str(EXAMPLES / example / "train.py"), f"--shared-dir={shared}", *args]
    if example == "tensorflow1":
        argv += [
            f"--ps_hosts={env['PS_HOSTS']}",
            f"--worker_hosts={env['WORKER_HOSTS']}",
            f"--job_name={env['JOB_NAME']}",
            f"--task_index={env['TASK_INDEX']}",
            f"--scratch-dir={workdir / 'scratch'}",
        ]
    local_cluster.add(f"{role}-0", argv, env)
    local_cluster.start()
    local_cluster.run(timeout=90)
    if example in ("mnist", "tf-spawner"):
        result = read_json(shared / "results" / "worker-0.json")
        assert result["epochs_completed"] == 2
    if example == "tf-spawner":
        assert read_json(shared / "results" / "worker-0.json")["credentials_present"] is False
    if example == "parameter-server":
        result = read_json(shared / "results" / "chief-0.json")
        assert result["epochs_completed"] == 2
    if example == "tensorflow1":
        assert read_json(shared / "results" / "worker-0.json")["global_step"] >= 200
        assert (shared / "checkpoints" / "checkpoint").is_file()


def test_mnist_saves_on_sigterm_and_resumes_from_that_step(
    workdir: Path, local_cluster: LocalCluster
) -> None:
    """SIGTERM one worker mid-epoch (a pod deleted, evicted or drained): every worker saves the
    backup after the same step and exits 143; restarted, they resume at the next step."""
    shared = workdir / "shared"
    steps, epochs = 80, 3
    cluster = make_cluster(worker=2)
    argv = [str(EXAMPLES / "mnist" / "train.py"), "--epochs", str(epochs),
            "--steps-per-epoch", str(steps), "--shared-dir", str(shared)]
    for index in range(2):
        local_cluster.add(f"worker-{index}", argv, pod_env("mnist", cluster, "worker", index))
    victim = local_cluster.tasks["worker-1"]
    victim_log = shared / "progress" / "worker-1.log"
    signalled_at: list[float] = []

    def sigterm_in_second_epoch() -> None:
        if signalled_at or not victim_log.exists() or not progress_records(victim_log):
            return
        # Soon after the first epoch, so that the signal lands mid-epoch even when the steps are
        # quick (an idle machine runs an epoch of 40 steps in well under a second).
        time.sleep(0.1)
        assert victim.process is not None
        victim.process.send_signal(signal.SIGTERM)
        signalled_at.append(time.monotonic())

    local_cluster.start()
    local_cluster.run(timeout=150, restart=True, while_running=sigterm_in_second_epoch)

    assert signalled_at, "training ended before the first epoch was logged"
    for index, task in enumerate(local_cluster.tasks.values()):
        assert task.exits[0][1] == 143, task.tail()
        print(f"worker-{index} saved and exited after {task.exits[0][0] - signalled_at[0]:.1f} s")
        assert task.exits[0][0] - signalled_at[0] < 30  # the default grace period
        # A restarted worker may fail once more while its peer is still restarting.
        assert task.exits[-1][1] == 0
    stops = [read_json(shared / "preempted" / f"worker-{index}.json") for index in range(2)]
    assert [stop["signalled"] for stop in stops] == [False, True]
    assert stops[0]["epoch"] == stops[1]["epoch"]
    assert stops[0]["step"] == stops[1]["step"]
    saved_epoch, saved_step = stops[0]["epoch"], stops[0]["step"]
    assert 1 <= saved_epoch < epochs
    assert 0 <= saved_step < steps - 1
    for index in range(2):
        result = read_json(shared / "results" / f"worker-{index}.json")
        assert result["epochs_completed"] == epochs
        # An epoch-end backup would resume at step 0 of the saved epoch.
        assert (result["initial_epoch"], result["initial_step"]) == (saved_epoch, saved_step + 1)
        assert result["accuracy"] >= MNIST_ACCURACY_BAR, result
        records = progress_records(shared / "progress" / f"worker-{index}.log")
        assert [record["epoch"] for record in records] == list(range(epochs))
    assert not (shared / "backup" / "chief").exists()
