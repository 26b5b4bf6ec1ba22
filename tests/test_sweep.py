"""`sweep:` compiles to one job per point of the grid: stable names, the values in the training's
environment, trials pruned with their points, and every mistake located."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import EXAMPLES, OVERLAYS, Result, job_directories, job_text
from tests.test_spec_errors import _refused_at
from tfcompile.compiler.checking.validation import validate
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests
from tfcompile.spec.sweep import MAXIMUM_TRIALS

SWEEP = """\
sweep:
  parameters:
    LEARNING_RATE: ["0.001", "0.01", "0.1"]
    HIDDEN_LAYERS: ["5", "6"]
  objective: {metric: accuracy, goal: maximize}
"""


TRIALS = {
    ("5", "0.001"): "5026e8e2", ("5", "0.01"): "f19669f0", ("5", "0.1"): "12729259",
    ("6", "0.001"): "412c398b", ("6", "0.01"): "8e153bb2", ("6", "0.1"): "1b70d81c",
}
"""The digest part of each trial's name, by (HIDDEN_LAYERS, LEARNING_RATE): the first 8
hexadecimal digits of the SHA-256 of the point as compact JSON, its parameters sorted, computed
outside tfcompile, e.g. `printf '%s' '[["HIDDEN_LAYERS","5"],["LEARNING_RATE","0.01"]]' |
sha256sum` gives f19669f0…. They are what users' clusters run: the committed output of
examples/sweep has these names, and a change to them renames (and restarts) every trial."""


def sweep_job(sweep: str = SWEEP, spec_lines: str = "", name: str = "grid") -> str:
    return job_text(name, command="[python, train.py]",
                    spec_lines="args: [--rate, $(LEARNING_RATE)]\n" + spec_lines + sweep,
                    roles="worker: {replicas: 2}")


def build(run_cli: Callable[..., Result], text: str, root: Path) -> list[str]:
    """Build `text` as jobs/job.yaml into root/output; the job directories there."""
    (root / "jobs").mkdir(parents=True, exist_ok=True)
    (root / "jobs" / "job.yaml").write_text(text)
    result = run_cli("build", str(root / "jobs"), "-o", str(root / "output"))
    assert result.status == 0, result.stderr
    return [path.name for path in job_directories(root / "output")]


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


def test_one_job_per_point_named_by_its_values(run_cli: Callable[..., Result],
                                               tmp_path: Path) -> None:
    jobs = build(run_cli, sweep_job(), tmp_path)
    assert jobs == ["grid-12729259", "grid-1b70d81c", "grid-412c398b", "grid-5026e8e2",
                    "grid-8e153bb2", "grid-f19669f0"]
    assert len(set(jobs)) == 6 and all(len(name) == len("grid-") + 8 for name in jobs)


def test_adding_a_value_renames_no_trial_and_removing_one_prunes_its_trials(
        run_cli: Callable[..., Result], tmp_path: Path) -> None:
    before = build(run_cli, sweep_job(), tmp_path)
    texts = {path: path.read_bytes() for path in (tmp_path / "output").rglob("*.yaml")}
    more = build(run_cli, sweep_job(SWEEP.replace('"0.1"]', '"0.1", "1.0"]')), tmp_path)
    assert set(before) < set(more) and len(more) == 8
    # the trials that were there are unchanged, byte for byte: nothing restarts
    assert {path: path.read_bytes() for path in texts} == texts
    fewer = build(run_cli, sweep_job(SWEEP.replace('"5", "6"', '"5"')), tmp_path)
    assert len(fewer) == 3 and set(fewer) < set(before)
    gone = set(more) - set(fewer)
    assert all(not (tmp_path / "output" / name).exists() for name in gone)


BOARD = """\
storage:
  shared: {mountPath: /mnt/shared, existingClaim: grid-logs}
tensorboard: {logDir: /mnt/shared/logs}
"""
"""One claim every trial mounts, and a TensorBoard: the sweep's one, over all its trials."""


@pytest.mark.parametrize(("spec_lines", "entries"), [("", 8), (BOARD, 9)],
                         ids=["trials", "trials and their TensorBoard"])
def test_building_another_job_keeps_every_trial_of_a_sweep(
        run_cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        spec_lines: str, entries: int) -> None:
    """A sweep's spec defines its trials (by their names) and its TensorBoard, not a job named
    as the spec: a build of other jobs loads it to judge their directories, and keeps them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs" / "grid").mkdir(parents=True)
    (tmp_path / "jobs" / "grid" / "job.yaml").write_text(sweep_job(spec_lines=spec_lines))
    (tmp_path / "jobs" / "other").mkdir()
    (tmp_path / "jobs" / "other" / "job.yaml").write_text(job_text("other"))
    assert run_cli("build", "jobs").status == 0
    before = sorted(path.name for path in (tmp_path / "output").iterdir())  # README.md too
    assert len(before) == entries
    result = run_cli("build", "jobs/other")
    assert result.status == 0, result.stderr
    assert "prune" not in result.stderr
    assert sorted(path.name for path in (tmp_path / "output").iterdir()) == before
    assert run_cli("build", "jobs/other", "--check").status == 0


def test_a_sweep_has_one_tensorboard_over_every_trial_and_the_trials_none(
        run_cli: Callable[..., Result], tmp_path: Path) -> None:
    """Not a Deployment and a Service per trial: one TensorBoard reading `logDir` on the claim
    every trial mounts (each trial's directory a run), in a directory of its own that
    Kustomize renders and `validate` accepts alone. It selects its pod by the sweep, so that
    pod is no job's (`status` reads pods labelled with a job as that job's)."""
    jobs = build(run_cli, sweep_job(spec_lines=BOARD), tmp_path)
    trials = [name for name in jobs if name != "grid-tensorboard"]
    assert len(trials) == 6 and "grid-tensorboard" in jobs
    for name in trials:
        files = [path.name for path in (tmp_path / "output" / name).iterdir()]
        assert not [file for file in files if "tensorboard" in file], files
    board = tmp_path / "output" / "grid-tensorboard"
    assert sorted(path.name for path in board.iterdir()) == [
        "deployment-grid-tensorboard.yaml", "kustomization.yaml",
        "service-grid-tensorboard.yaml"]
    objects = parse_manifests(render(board))
    assert [(item["kind"], item["metadata"]["name"]) for item in objects] == [
        ("Service", "grid-tensorboard"), ("Deployment", "grid-tensorboard")]
    service, deployment = objects
    selector = {"tfcompile.dev/sweep": "grid", "tfcompile.dev/component": "tensorboard"}
    assert deployment["spec"]["selector"]["matchLabels"] == selector
    assert service["spec"]["selector"] == selector
    assert all("tfcompile.dev/job" not in labels for labels in [
        service["metadata"]["labels"], deployment["metadata"]["labels"],
        deployment["spec"]["template"]["metadata"]["labels"]])
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"][:3] == ["tensorboard", "--logdir", "/mnt/shared/logs"]
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "grid-logs",
                                                          "readOnly": True}
    assert [str(problem) for problem in validate(board).problems] == []


def test_the_sweeps_tensorboard_stays_as_trials_change_and_goes_with_the_sweep(
        run_cli: Callable[..., Result], tmp_path: Path) -> None:
    """Adding a value leaves the TensorBoard byte for byte; removing `tensorboard:` prunes it
    and changes no trial (it is in no trial's revision); a spec that is no sweep prunes it."""
    build(run_cli, sweep_job(spec_lines=BOARD), tmp_path)
    board = tmp_path / "output" / "grid-tensorboard"
    texts = {path: path.read_bytes() for path in board.iterdir()}
    more = build(run_cli, sweep_job(SWEEP.replace('"0.1"]', '"0.1", "1.0"]'),
                                    spec_lines=BOARD), tmp_path)
    assert len(more) == 9 and {path: path.read_bytes() for path in texts} == texts
    trials = {path: path.read_bytes() for path in (tmp_path / "output").rglob("*.yaml")
              if path.parent != board}
    without = build(run_cli, sweep_job(SWEEP.replace('"0.1"]', '"0.1", "1.0"]'),
                                       spec_lines=BOARD.split("tensorboard:")[0]), tmp_path)
    assert "grid-tensorboard" not in without and not board.exists() and len(without) == 8
    assert {path: path.read_bytes() for path in trials} == trials
    build(run_cli, sweep_job(spec_lines=BOARD), tmp_path)
    assert board.is_dir()
    plain = job_text("grid", command="[python, train.py]", spec_lines=BOARD)
    assert build(run_cli, plain, tmp_path) == ["grid"]


def test_a_job_named_as_a_sweeps_tensorboard_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]) -> None:
    """`<sweep>-tensorboard` is the directory of the sweep's TensorBoard: a job of that name
    would share it, and is refused at its name, saying whose name it is."""
    monkeypatch.chdir(tmp_path)
    text = "---\n".join([sweep_job(spec_lines=BOARD), job_text("grid-tensorboard")])
    _refused_at(run_cli, text, "grid-tensorboard", "metadata.name",
                "is also defined at job.yaml:4:9 (the TensorBoard of sweep 'grid' is named so)")


def test_a_sweeps_load_balancer_tensorboard_takes_the_jobs_components(
        run_cli: Callable[..., Result], tmp_path: Path) -> None:
    """The TensorBoard's directory names the spec's components as a trial's does, so a
    `LoadBalancer` that the azure component makes internal is internal there too."""
    shutil.copytree(OVERLAYS, tmp_path / "overlays")
    board = BOARD.replace("/logs}", "/logs, serviceType: LoadBalancer}") + "overlays: [azure]\n"
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job.yaml").write_text(sweep_job(spec_lines=board))
    result = run_cli("build", str(tmp_path / "jobs"), "-o", str(tmp_path / "output"),
                     "--overlays", str(tmp_path / "overlays"))
    assert result.status == 0, result.stderr
    directory = tmp_path / "output" / "grid-tensorboard"
    (service,) = [item for item in parse_manifests(render(directory))
                  if item["kind"] == "Service"]
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["metadata"]["annotations"][
        "service.beta.kubernetes.io/azure-load-balancer-internal"] == "true"
    assert [str(problem) for problem in validate(directory).problems] == []


def test_a_trial_sees_its_values_before_the_jobs_own_variables(
        run_cli: Callable[..., Result], tmp_path: Path) -> None:
    text = sweep_job(spec_lines='env: {A_FLAG: "--lr=$(LEARNING_RATE)"}\n')
    build(run_cli, text, tmp_path)
    name = "grid-" + TRIALS[("6", "0.01")]
    statefulset = load(tmp_path / "output" / name / f"statefulset-{name}-worker.yaml")
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    names = [entry["name"] for entry in container["env"]]
    values = {entry["name"]: entry.get("value") for entry in container["env"]}
    assert values["LEARNING_RATE"] == "0.01" and values["HIDDEN_LAYERS"] == "6"
    assert values["TFCOMPILE_TRIAL"] == name
    assert values["TFCOMPILE_RESULT_FILE"] == "/opt/tfcompile/state/result.json"
    # $(VAR) refers only to variables defined before it: the point comes before the job's env
    assert names.index("LEARNING_RATE") < names.index("A_FLAG")
    assert container["args"] == ["python", "train.py", "--rate", "$(LEARNING_RATE)"]
    labels = statefulset["metadata"]["labels"]
    assert labels["tfcompile.dev/sweep"] == "grid" and labels["tfcompile.dev/job"] == name
    assert "tfcompile.dev/sweep" not in statefulset["spec"]["selector"]["matchLabels"]
    state = load(tmp_path / "output" / name / f"configmap-{name}-state.yaml")
    annotations = state["metadata"]["annotations"]
    assert json.loads(annotations["tfcompile.dev/sweep-values"]) == {
        "HIDDEN_LAYERS": "6", "LEARNING_RATE": "0.01"}
    assert annotations["tfcompile.dev/sweep-objective"] == "accuracy maximize"


def test_a_swept_home_replaces_the_default_one(run_cli: Callable[..., Result],
                                               tmp_path: Path) -> None:
    sweep = 'sweep:\n  parameters: {HOME: ["/home/a", "/home/b"]}\n'
    for name in build(run_cli, sweep_job(sweep), tmp_path):
        statefulset = load(tmp_path / "output" / name / f"statefulset-{name}-worker.yaml")
        env = statefulset["spec"]["template"]["spec"]["containers"][0]["env"]
        assert [entry["value"] for entry in env if entry["name"] == "HOME"] in (
            ["/home/a"], ["/home/b"])


def test_a_job_without_sweep_gets_no_trial_variables(run_cli: Callable[..., Result],
                                                     tmp_path: Path) -> None:
    (name,) = build(run_cli, job_text("plain"), tmp_path)
    statefulset = load(tmp_path / "output" / name / f"statefulset-{name}-worker.yaml")
    env = statefulset["spec"]["template"]["spec"]["containers"][0]["env"]
    assert not {entry["name"] for entry in env} & {"TFCOMPILE_TRIAL", "TFCOMPILE_RESULT_FILE"}


def test_two_sweeps_in_one_file_and_a_job_beside_them(run_cli: Callable[..., Result],
                                                      tmp_path: Path) -> None:
    text = "---\n".join([sweep_job(name="first"), sweep_job(name="second"), job_text("alone")])
    jobs = build(run_cli, text, tmp_path)
    assert len(jobs) == 13 and "alone" in jobs
    assert len([name for name in jobs if name.startswith("first-")]) == 6


MANY = ", ".join(f'"{index}"' for index in range(11))


@pytest.mark.parametrize(("sweep", "place", "field", "says"), [
    ("sweep:\n  parameters: {}\n", "parameters: {}", "spec.sweep.parameters",
     "give at least one parameter"),
    ("sweep:\n  parameters:\n    RATE: []\n", "RATE: []", "spec.sweep.parameters.RATE",
     "give at least one value"),
    ('sweep:\n  parameters:\n    RATE: ["1", "2", "1"]\n', '"1"]', "spec.sweep.parameters.RATE[2]",
     "also at [0]"),
    ("sweep:\n  parameters:\n    RATE: [0.1]\n", "0.1]", "spec.sweep.parameters.RATE[0]",
     "quote numbers"),
    ('sweep:\n  parameters:\n    TF_CONFIG: ["1"]\n', "TF_CONFIG",
     "spec.sweep.parameters.TF_CONFIG", "set by tfcompile"),
    ('sweep:\n  parameters:\n    EPOCHS: ["1"]\n', "EPOCHS: [", "spec.sweep.parameters.EPOCHS",
     "also set in spec.env"),
    ('sweep:\n  parameters:\n    "1BAD": ["1"]\n', '"1BAD"', "spec.sweep.parameters.1BAD",
     "must be an environment variable name"),
    (f"sweep:\n  parameters:\n    A: [{MANY}]\n    B: [{MANY}]\n", "parameters:",
     "spec.sweep.parameters", f"the grid has 121 points (11 x 11); a sweep may have at most "
     f"{MAXIMUM_TRIALS} trials"),
    ('sweep:\n  parameters: {A: ["1"]}\n  objective: {metric: "a b"}\n', '"a b"',
     "spec.sweep.objective.metric", "must be a metric name"),
    ('sweep:\n  parameters: {A: ["1"]}\n  objective: {metric: a, goal: best}\n', "best",
     "spec.sweep.objective.goal", "maximize"),
    ('storage:\n  shared: {mountPath: /mnt/shared, size: 1Gi}\n'
     'tensorboard: {logDir: /mnt/shared/logs}\nsweep:\n  parameters: {A: ["1"]}\n',
     "tensorboard:", "spec.tensorboard", "give storage.shared.existingClaim instead"),
], ids=["no parameter", "no value", "a value twice", "a number", "a variable tfcompile sets",
        "a variable the job sets", "not a variable name", "too many trials", "a bad metric",
        "a bad goal", "a TensorBoard over a claim per trial"])
def test_each_sweep_mistake_is_located(sweep: str, place: str, field: str, says: str,
                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       run_cli: Callable[..., Result]) -> None:
    monkeypatch.chdir(tmp_path)
    text = job_text(spec_lines='env: {EPOCHS: "3"}\n' + sweep)
    result = _refused_at(run_cli, text, place, f"{field}", says)
    assert "Traceback" not in result.stderr


def test_a_name_too_long_for_the_trials_is_said_once_with_the_length_allowed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]) -> None:
    monkeypatch.chdir(tmp_path)
    name = "a" * 40  # fine alone (a-…-worker is 47), too long with -<8 digits> (56 > 52)
    text = job_text(name, spec_lines=SWEEP)
    result = _refused_at(run_cli, text, name, "metadata.name",
                         "shorten the job name to at most 36 characters")
    assert len([line for line in result.stderr.splitlines() if "metadata.name" in line]) == 1


def test_a_file_defines_at_most_a_hundred_jobs_trials_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]) -> None:
    """Each trial is a job a build compiles into a dozen files: the file's limit counts them."""
    monkeypatch.chdir(tmp_path)
    ten, nine = (", ".join(f'"{index}"' for index in range(count)) for count in (10, 9))
    grid = f"sweep:\n  parameters:\n    A: [{ten}]\n    B: [{nine}]\n"  # 90 trials
    text = "---\n".join([job_text("first", spec_lines=grid), job_text("second", spec_lines=grid)])
    _refused_at(run_cli, text, "parameters:", "spec.sweep.parameters",
                "the file defines 180 jobs up to here, a sweep's trials counted; a file may "
                "define at most 100 jobs", occurrence=2)


RUN_LOCAL_STAND_IN = """\
import os, sys
print("stand-in:", os.environ["TFCOMPILE_TRIAL"], sys.argv[1:], os.environ["HIDDEN_LAYERS"],
      flush=True)
"""


@pytest.mark.end_to_end
@pytest.mark.usefixtures("podman_images")
def test_run_local_runs_the_trial_it_is_given(tmp_path: Path) -> None:
    """`run-local --job <trial>`: the trial's values reach its training (a stand-in program);
    without `--job`, a sweep's file is refused naming its trials."""
    (tmp_path / "train.py").write_text(RUN_LOCAL_STAND_IN)
    (tmp_path / "job.yaml").write_text(job_text(
        "grid", image="python:3.11", script="train.py", command=None,
        spec_lines='args: [--rate, $(LEARNING_RATE)]\nsweep:\n  parameters: '
                   '{LEARNING_RATE: ["0.1", "0.01"], HIDDEN_LAYERS: ["5"]}\n',
        roles="worker: {replicas: 1}"))
    trial = "grid-" + TRIALS[("5", "0.01")]
    command = [str(Path(sys.executable).parent / "tfcompile"), "run-local",
               str(tmp_path / "job.yaml"), "--overlays", str(OVERLAYS)]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode != 0
    assert "holds 2 jobs" in refused.stderr and trial in refused.stderr
    completed = subprocess.run([*command, "--job", trial], capture_output=True, text=True,
                               timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr
    assert (f"{trial}-worker-0 | stand-in: {trial} ['--rate', '0.01'] 5"
            in completed.stdout + completed.stderr)


@pytest.mark.end_to_end
@pytest.mark.usefixtures("podman_images")
def test_a_trial_of_the_workshop_sweep_trains_with_its_values(tmp_path: Path) -> None:
    """The example's trial (learning rate 0.01, 5 hidden layers) trains with real TensorFlow,
    logs under its own directory of the shared claim, and learns the picture."""
    trial = "sweep-" + TRIALS[("5", "0.01")]
    completed = subprocess.run(
        [str(Path(sys.executable).parent / "tfcompile"), "run-local",
         str(EXAMPLES / "sweep" / "job.yaml"), "--overlays", str(OVERLAYS), "--job", trial,
         "--claims-directory", str(tmp_path / "claims"), "--timeout", "600"],
        capture_output=True, text=True, timeout=900, check=False)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-3000:]
    (line,) = [line for line in output.splitlines()
               if f"{trial}-worker-0 | learning rate 0.01, 5 hidden layers: loss " in line]
    loss = float(line.rsplit(" ", 1)[1])
    assert loss < 0.05, line  # the best constant colour scores 0.10
    logs = tmp_path / "claims" / "sweep-logs" / "logs" / trial / "train"
    assert list(logs.glob("events.out.tfevents.*")), sorted(tmp_path.rglob("*"))


def test_a_grid_of_100_points_is_allowed_and_one_of_101_is_refused() -> None:
    """In process: 4 x 25 points are a sweep's most; 101 values of one parameter are not."""
    from tfcompile.spec.models import TrainingJob
    from tfcompile.spec.sweep import check_sweep

    def problems(parameters: dict[str, list[str]]) -> list[str]:
        job = TrainingJob.model_validate({
            "apiVersion": "tfcompile.dev/v1alpha1", "kind": "TrainingJob",
            "metadata": {"name": "grid"},
            "spec": {"image": "trainer:1", "command": ["python", "train.py"],
                     "roles": {"worker": {"replicas": 1}}, "sweep": {"parameters": parameters}}})
        return [problem.message for problem in check_sweep(job, ())]

    assert problems({"A": [str(index) for index in range(4)],
                     "B": [str(index) for index in range(25)]}) == []
    assert problems({"A": [str(index) for index in range(101)]}) == [
        "the grid has 101 points (101); a sweep may have at most 100 trials, each a job with "
        "its own pods: give fewer values or split it into several jobs"]
