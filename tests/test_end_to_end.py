"""End-to-end: the compiled examples train with real TensorFlow in the images they name, through
`tfcompile run-local` (compile, render with the job's overlays, run each pod with podman as a
cluster would). Needs root and the project's podman with its images (tests/podman_fixture.py);
`.ci/run` provides both."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, OVERLAYS, job_text
from tfcompile.compiler.local_run.container_runtime import RUN_LABEL

pytestmark = [pytest.mark.end_to_end, pytest.mark.usefixtures("podman_images")]

ACCURACY_BAR = 0.90
"""Held-out accuracy the digits model must reach (measured: 0.99 after 8 epochs)."""


def run_local(job: Path, claims: Path, *extra: str, timeout: float = 600,
              on_line: Callable[[str], None] | None = None,
              interrupt_when: Callable[[], bool] | None = None) -> tuple[int, str]:
    """`tfcompile run-local JOB` as a user runs it; returns its exit status and output.
    `interrupt_when` is asked after each line; when true, the run gets Ctrl-C (SIGINT)."""
    command = [sys.executable, "-m", "tfcompile.compiler.cli", "run-local", str(job),
               "--overlays", str(OVERLAYS), "--claims-directory", str(claims),
               "--backoff", "1", "--timeout", "400", *extra]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    lines: list[str] = []
    assert process.stdout is not None
    started = time.monotonic()
    try:
        for line in process.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line)
            if interrupt_when is not None and interrupt_when():
                os.killpg(process.pid, signal.SIGINT)
                interrupt_when = None
            if time.monotonic() - started > timeout:
                break
        status = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return status, "".join(lines)


def read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def progress(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _parent(process: Path) -> int:
    fields = _read(process / "stat").rsplit(b")", 1)[-1].split()
    return int(fields[1]) if len(fields) > 1 else 0


def container_processes(pod: str) -> list[int]:
    """PIDs of every process of the pod's running containers in a local run (the container's
    first process, found through podman, and its descendants): never a process of another
    pod of the same name, such as one a real node of the suite runs beside these tests."""
    shown = subprocess.run(
        ["podman", "ps", "--filter", f"label={RUN_LABEL}", "--filter", f"name=-{pod}-",
         "--format", "{{.Pid}}"], capture_output=True, text=True, check=True)
    found = [int(pid) for pid in shown.stdout.split() if pid != "0"]
    parents = {int(entry.name): _parent(entry) for entry in _processes()}
    added = True
    while added:
        more = [pid for pid, parent in parents.items() if parent in found and pid not in found]
        found += more
        added = bool(more)
    return found


def _command(pid: int) -> list[bytes]:
    return _read(Path(f"/proc/{pid}/cmdline")).split(b"\0")


def training_processes(pod: str) -> list[int]:
    """The training script itself (not the launcher around it)."""
    return [pid for pid in container_processes(pod)
            if not any(b"tfcompile-launcher" in part for part in _command(pid))
            and any(part.endswith(b"train.py") for part in _command(pid))]


def training_launchers(pod: str) -> list[int]:
    """The launcher (`python …/tfcompile-launcher.pyz -- …`) of a pod's container."""
    return [pid for pid in container_processes(pod)
            if any(part.endswith(b"tfcompile-launcher.pyz") for part in _command(pid))]


def assert_written_by_the_pods_user(shared: Path) -> None:
    """The pods ran as the restricted user (1000) the compiled templates ask for, writing to the
    claim as the group fsGroup made it writable for (the pods run with this machine's IDs, as a
    node runs a pod without `hostUsers: false`)."""
    written = [path for path in shared.rglob("*") if path.is_file()]
    assert written
    assert {path.stat().st_uid for path in written} == {1000}
    assert {path.stat().st_gid for path in written} == {1000}


def test_mnist_workers_train_one_model_together(tmp_path: Path) -> None:
    status, output = run_local(EXAMPLES / "mnist" / "job.yaml", tmp_path)
    assert status == 0, output[-3000:]
    shared = tmp_path / "mnist-shared"
    first = read_json(shared / "results" / "worker-0.json")
    second = read_json(shared / "results" / "worker-1.json")
    assert first["replicas"] == second["replicas"] == 2
    assert first["final_loss"] == pytest.approx(second["final_loss"], abs=1e-6)
    assert first["epochs_completed"] == second["epochs_completed"] == 8
    assert first["accuracy"] >= ACCURACY_BAR and second["accuracy"] >= ACCURACY_BAR
    assert "mnist-worker-0 | " in output and "mnist-worker-1 | " in output
    assert "run-local: training succeeded (mnist-worker-0, mnist-worker-1)" in output
    assert_written_by_the_pods_user(shared)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _processes() -> list[Path]:
    return [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _run_objects() -> list[str]:
    """Every podman pod, container and network of a local run on this machine."""
    found = []
    for what in (["pod", "ps"], ["ps", "--all"], ["network", "ls"]):
        shown = subprocess.run(["podman", *what, "--filter", f"label={RUN_LABEL}", "--quiet"],
                               capture_output=True, text=True, check=True)
        found += shown.stdout.split()
    return found


def test_a_killed_run_local_takes_its_pods_with_it(tmp_path: Path) -> None:
    """SIGKILL to `tfcompile run-local` (it cannot catch it) in the middle of training: its
    guard removes its pods, their network and its files. The directory it compiled the job
    into stays until the next run, which deletes it."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    environment = {**os.environ, "TMPDIR": str(temporary)}
    log = tmp_path / "mnist-shared" / "progress" / "worker-0.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "tfcompile.compiler.cli", "run-local",
         str(EXAMPLES / "mnist" / "job.yaml"), "--overlays", str(OVERLAYS),
         "--claims-directory", str(tmp_path), "--timeout", "400"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment)
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if log.exists() and progress(log):
            break
    assert log.exists() and progress(log), "".join(lines[-40:])
    ours = [pid for pod in ("mnist-worker-0", "mnist-worker-1")
            for pid in container_processes(pod)]
    for pod in ("mnist-worker-0", "mnist-worker-1"):
        assert set(ours) & set(training_processes(pod)), pod
    assert _run_objects()
    process.kill()  # run-local alone: its guard and the pods run in sessions of their own
    process.wait(timeout=30)
    deadline = time.monotonic() + 120
    while ((_run_objects() or any(Path(f"/proc/{pid}").exists() for pid in ours)
            or len(list(temporary.iterdir())) > 1) and time.monotonic() < deadline):
        time.sleep(0.2)
    assert _run_objects() == []
    assert [pid for pid in ours if Path(f"/proc/{pid}").exists()] == []
    (left,) = temporary.iterdir()  # the directory it compiled the job into
    assert left.name.startswith("tfcompile-run-local-"), left
    job = tmp_path / "job" / "job.yaml"
    job.parent.mkdir()
    (job.parent / "train.py").write_text("raise SystemExit(3)\n")
    job.write_text(job_text("broken", image="python:3.11", script="train.py", command=None))
    command = [sys.executable, "-m", "tfcompile.compiler.cli", "run-local", str(job),
               "--restart-limit", "0"]
    next_run = subprocess.run(command, capture_output=True, text=True, env=environment,
                              timeout=300, check=False)
    assert next_run.returncode == 1, next_run.stdout + next_run.stderr
    assert f"removed {left}, left by a run that was killed" in next_run.stdout
    assert list(temporary.iterdir()) == []


KILLED_EPOCHS = 40
STAND_IN = Path(__file__).with_name("stand_in_training.py")


def test_a_killed_worker_resumes_from_the_checkpoint(tmp_path: Path) -> None:
    shared = tmp_path / "mnist-shared"
    log = shared / "progress" / "worker-1.log"
    killed: list[int] = []

    def kill_in_the_middle(line: str) -> None:
        if killed or not log.exists() or len(progress(log)) < 3:
            return
        for pid in training_processes("mnist-worker-1"):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    # run-local's restart is the subject, not TensorFlow's recovery (test_training_scripts.py
    # kills real TensorFlow workers): the stand-in program keeps the example's files.
    job = tmp_path / "job" / "job.yaml"
    job.parent.mkdir()
    shutil.copy(STAND_IN, job.parent / "train.py")
    job.write_text((EXAMPLES / "mnist" / "job.yaml").read_text().replace(
        'args: [--epochs, "8", --shared-dir, /mnt/shared]',
        f'args: [--epochs, "{KILLED_EPOCHS}", --shared-dir, /mnt/shared, --epoch-seconds,'
        ' "0.25"]'))
    status, output = run_local(job, tmp_path, on_line=kill_in_the_middle)
    assert killed, "the worker was never killed: " + output[-2000:]
    assert status == 0, output[-3000:]
    records = progress(log)
    attempts = list(dict.fromkeys(record["attempt"] for record in records))
    assert len(attempts) >= 2, "the killed worker did not start again"
    resumed = [record["epoch"] for record in records if record["attempt"] == attempts[-1]]
    assert resumed[0] > 0, f"training started over: {records}"
    assert resumed[-1] == KILLED_EPOCHS - 1
    result = read_json(shared / "results" / "worker-1.json")
    assert result["epochs_completed"] == KILLED_EPOCHS and result["initial_epoch"] > 0


def test_after_success_the_launcher_idles_instead_of_training_again(tmp_path: Path) -> None:
    from tfcompile.compiler.local_run import LocalRunOptions, run_pods
    from tfcompile.compiler.local_run.job import LocalJobSettings, config_maps, rendered_pods

    settings = LocalJobSettings(job_file=EXAMPLES / "mnist" / "job.yaml", overlays=OVERLAYS,
                                secrets_file=None, options=LocalRunOptions())
    pods, objects, _ = rendered_pods(settings, tmp_path / "compiled")
    transcript = tmp_path / "transcript.txt"
    shared = tmp_path / "claims" / "mnist-shared"

    def restart_after_success() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # the launcher has recorded success
            if "mnist-worker-0 | tfcompile: training succeeded" in transcript.read_text():
                break
            time.sleep(0.5)
        # The container's first process: killing it ends the container, which run-local
        # restarts as the kubelet would (one container of this pod runs at a time).
        (launcher,) = training_launchers("mnist-worker-0")
        os.kill(launcher, signal.SIGKILL)
        while time.monotonic() < deadline:
            if "this task already succeeded; idling" in transcript.read_text():
                break
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)  # end the run, as Ctrl-C does

    with transcript.open("w") as output:
        options = LocalRunOptions(config_maps=config_maps(objects), success_pods=(),
                                  backoff_initial_seconds=0.5, timeout_seconds=400,
                                  maximum_grace_seconds=5,
                                  claims_directory=tmp_path / "claims", output=output)
        watcher = threading.Thread(target=restart_after_success, daemon=True)
        watcher.start()
        outcome = run_pods(pods, options)
        watcher.join(timeout=10)
    text = transcript.read_text()
    assert outcome.exit_code == 128 + signal.SIGINT, text[-2000:]
    assert "mnist-worker-0 | tfcompile: this task already succeeded; idling" in text
    epochs = [record["epoch"] for record in progress(shared / "progress" / "worker-0.log")]
    assert epochs == list(range(8)), "training ran again after it had succeeded"
    summary = {pod.name: pod for pod in outcome.pods}
    assert summary["mnist-worker-0"].restarts == 1


def test_parameter_server_chief_trains_and_the_evaluator_scores_a_checkpoint(
    tmp_path: Path,
) -> None:
    status, output = run_local(EXAMPLES / "parameter-server" / "job.yaml", tmp_path)
    assert status == 0, output[-3000:]
    assert "run-local: training succeeded (parameter-server-chief-0)" in output
    shared = tmp_path / "parameter-server-shared"
    chief = read_json(shared / "results" / "chief-0.json")
    evaluator = read_json(shared / "results" / "evaluator-0.json")
    assert chief["epochs_completed"] == 6
    assert evaluator["final"] is True
    assert evaluator["checkpoint"] == chief["final_checkpoint"]
    assert Path(str(evaluator["checkpoint"]).replace("/mnt/shared", str(shared)) + ".index"
                ).exists()
    assert evaluator["accuracy"] >= ACCURACY_BAR
    assert_written_by_the_pods_user(shared)


def test_tf_spawner_job_gets_its_secret_and_worker_variables(tmp_path: Path) -> None:
    job = EXAMPLES / "tf-spawner" / "job.yaml"
    refused, message = run_local(job, tmp_path)
    assert refused == 2
    assert "s3-credentials" in message and "--secrets" in message
    secrets = tmp_path / "secrets.env"
    secrets.write_text("s3-credentials/access-key=AKIA-local-test\n"
                       "s3-credentials/secret-key=very-secret-value-123\n")
    status, output = run_local(job, tmp_path, "--secrets", str(secrets))
    assert status == 0, output[-3000:]
    assert "very-secret-value-123" not in output
    for index in (0, 1):
        result = read_json(tmp_path / "tf-spawner-data" / "results" / f"worker-{index}.json")
        assert result["worker_number"] == index
        assert result["tot_workers"] == 2
        assert result["credentials_present"] is True
    assert_written_by_the_pods_user(tmp_path / "tf-spawner-data")


def test_tensorflow1_parameter_servers_and_workers_train_with_flags(tmp_path: Path) -> None:
    status, output = run_local(EXAMPLES / "tensorflow1" / "job.yaml", tmp_path)
    assert status == 0, output[-3000:]
    assert "run-local: training succeeded (tensorflow1-worker-0, tensorflow1-worker-1)" in output
    shared = tmp_path / "tensorflow1-shared"
    chief = read_json(shared / "results" / "worker-0.json")
    other = read_json(shared / "results" / "worker-1.json")
    assert chief["is_chief"] is True and other["is_chief"] is False
    assert chief["global_step"] >= 1500
    assert other["local_steps"] > 0  # both workers took steps against the parameter server
    assert_written_by_the_pods_user(shared)


def test_a_job_that_keeps_failing_ends_with_its_last_lines(tmp_path: Path) -> None:
    job = tmp_path / "job" / "job.yaml"
    job.parent.mkdir()
    (job.parent / "train.py").write_text(
        "import os, sys\n"
        "print('cannot open dataset on', os.environ['HOSTNAME'], flush=True)\n"
        "sys.exit(3)\n")
    job.write_text(job_text("broken", image="python:3.11", script="train.py", command=None))
    started = time.monotonic()
    status, output = run_local(job, tmp_path, "--restart-limit", "2")
    assert status == 1, output
    assert time.monotonic() - started < 300  # the restarts' back-off of 1 s, not a timeout
    # Each pod's lines carry its name (which worker fails first is the machine's choice).
    assert re.search(r"broken-worker-(\d) \| cannot open dataset on broken-worker-\1\n", output)
    assert "training exited with status 3" in output
    # The worker that reached the limit first ran 3 times (first run + 2 restarts); its peer may
    # have run fewer, waiting at the revision gate while the other restarted.
    limited = re.search(r"run-local: (broken-worker-\d) exited with status 3 after 2 restart",
                        output)
    assert limited, output
    assert output.count(f"cannot open dataset on {limited.group(1)}") >= 3
    assert "run-local: the last" in output and "after 2 restart(s); the limit is 2" in output


def test_changing_the_worker_count_resumes_training_with_the_new_cluster(tmp_path: Path) -> None:
    """What ElasticDL's master did by pushing TF_CONFIG: here replicas change in git, every pod
    restarts with the new TF_CONFIG, and BackupAndRestore carries the training over."""
    # An epoch takes about half a second: enough of them that the interrupt comes mid-training.
    EPOCHS = 60
    job = tmp_path / "job" / "job.yaml"
    job.parent.mkdir()
    shutil.copy(EXAMPLES / "mnist" / "train.py", job.parent / "train.py")
    spec = (EXAMPLES / "mnist" / "job.yaml").read_text().replace('"8"', f'"{EPOCHS}"')
    job.write_text(spec)
    log = tmp_path / "mnist-shared" / "progress" / "worker-0.log"
    status, output = run_local(
        job, tmp_path, interrupt_when=lambda: log.exists() and len(progress(log)) >= 4)
    assert status == 128 + signal.SIGINT, output[-2000:]
    done = len(progress(log))
    assert 4 <= done < EPOCHS
    job.write_text(spec.replace("replicas: 2", "replicas: 3"))
    status, output = run_local(job, tmp_path)
    assert status == 0, output[-3000:]
    for index in range(3):
        result = read_json(tmp_path / "mnist-shared" / "results" / f"worker-{index}.json")
        assert result["replicas"] == 3
        assert result["initial_epoch"] >= 4 and result["epochs_completed"] == EPOCHS
        assert result["accuracy"] >= ACCURACY_BAR
