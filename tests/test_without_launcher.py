"""`launcher: none`, for images that cannot run the launcher (no Python 3.8): what it compiles
to, the fields it refuses at their place, and how status and run-local take such a job."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import Result, job_directories, job_text
from tfcompile.compiler.checking.status import as_json, as_text, job_status
from tfcompile.compiler.checking.validation import validate
from tfcompile.compiler.local_run.job import success_pods
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests
from tfcompile.compiler.rendering.stateful_set_pods import pods_of

PS_AND_WORKERS = "ps: {replicas: 1}\nworker: {replicas: 2}"


def build(tmp_path: Path, run_cli: Callable[..., Result], text: str) -> Path:
    """Build one job file; the job's output directory."""
    source = tmp_path / "jobs" / "job.yaml"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(text, encoding="utf-8")
    result = run_cli("build", str(source), "-o", str(tmp_path / "output"))
    assert result.status == 0, result.stderr
    (directory,) = job_directories(tmp_path / "output")
    return directory


def documents(directory: Path) -> dict[str, dict[str, Any]]:
    return {path.name: YAML(typ="safe").load(path.read_text())
            for path in directory.glob("*.yaml") if path.name != "kustomization.yaml"}


def tensorflow_container(statefulset: dict[str, Any]) -> dict[str, Any]:
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "tensorflow"
    return dict(container)


# launcher: none, compiled


@pytest.mark.parametrize(("spec_lines", "expected"), [
    ("launcher: none", {}), ("args: [--steps, '10']\nlauncher: none", {"args": ["--steps", "10"]})])
def test_without_the_launcher_a_job_without_a_command_runs_the_images_entrypoint(
        tmp_path: Path, run_cli: Callable[..., Result], spec_lines: str,
        expected: dict[str, Any]) -> None:
    """As a TFJob that names no command ran its image's entrypoint (and `args` in place of the
    image's own); with the launcher a command stays required (tests/test_spec_errors.py)."""
    directory = build(tmp_path, run_cli, job_text(
        image="kubeflow/tf-dist-mnist-test:1.0", command=None, spec_lines=spec_lines,
        roles=PS_AND_WORKERS))
    container = tensorflow_container(documents(directory)["statefulset-demo-worker.yaml"])
    assert {key: container[key] for key in ("command", "args") if key in container} == expected
    assert validate(directory).ok



def test_without_the_launcher_the_container_runs_the_command(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    directory = build(tmp_path, run_cli, job_text(
        image="tensorflow/tensorflow:1.15.5", spec_lines="args: [--steps, '10']\nlauncher: none",
        roles=PS_AND_WORKERS))
    files = documents(directory)
    assert sorted(files) == [
        "configmap-demo-state.yaml", "networkpolicy-demo-tensorflow.yaml",
        "service-demo-ps.yaml", "service-demo-worker.yaml", "statefulset-demo-ps.yaml",
        "statefulset-demo-worker.yaml"]
    worker = files["statefulset-demo-worker.yaml"]
    container = tensorflow_container(worker)
    assert (container["command"], container["args"]) == (["python", "/app/train.py"],
                                                         ["--steps", "10"])
    names = [entry["name"] for entry in container["env"]]
    assert names == ["TASK_INDEX", "TF_CONFIG", "HOME"]
    assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222,
                                   "protocol": "TCP"}]
    assert [mount["mountPath"] for mount in container["volumeMounts"]] == [
        "/opt/tfcompile/home", "/tmp"]
    spec = worker["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec
    revision = worker["spec"]["template"]["metadata"]["annotations"]["tfcompile.dev/revision"]
    state = files["configmap-demo-state.yaml"]["metadata"]["annotations"]
    assert state["tfcompile.dev/revision"] == revision
    assert state["tfcompile.dev/launcher"] == "none"
    report = validate(directory)
    assert report.ok and report.warnings == [], report.to_text()


def test_a_command_without_args_and_a_named_account_keep_kubernetes_defaults(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    directory = build(tmp_path, run_cli, job_text(
        image="tensorflow/tensorflow:1.15.5",
        spec_lines="launcher: none\npodTemplate: {spec: {serviceAccountName: trainer}}"))
    worker = documents(directory)["statefulset-demo-worker.yaml"]
    assert "args" not in tensorflow_container(worker)
    spec = worker["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "trainer"
    assert "automountServiceAccountToken" not in spec  # the named account's token, as asked


def test_the_default_is_the_launcher(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    explicit = build(tmp_path / "explicit", run_cli, job_text(spec_lines="launcher: python"))
    implicit = build(tmp_path / "implicit", run_cli, job_text())
    assert documents(explicit) == documents(implicit)
    assert tensorflow_container(documents(implicit)["statefulset-demo-worker.yaml"])[
        "command"][:2] == ["python", "/opt/tfcompile/launcher/tfcompile-launcher.pyz"]


def test_a_sweep_without_the_launcher_gets_no_result_file(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    source = tmp_path / "jobs" / "job.yaml"
    source.parent.mkdir(parents=True)
    source.write_text(job_text(spec_lines="launcher: none\nsweep: {parameters: {RATE: ['1']}}"))
    assert run_cli("build", str(source), "-o", str(tmp_path / "output")).status == 0
    (directory,) = job_directories(tmp_path / "output")
    worker = next(document for name, document in documents(directory).items()
                  if name.startswith("statefulset-"))
    names = [entry["name"] for entry in tensorflow_container(worker)["env"]]
    assert "TFCOMPILE_TRIAL" in names and "RATE" in names
    assert "TFCOMPILE_RESULT_FILE" not in names


REFUSED = [
    ("onSuccess: idle", "onSuccess", "the launcher idles a task that succeeded"),
    ("onSuccess: release", "onSuccess", "without it an exit 0 restarts the training"),
    ("onFailure: release", "onFailure", "the launcher idles or releases a job that gave up"),
    ("failurePolicy: {maxRestarts: 3}", "failurePolicy",
     "the kubelet restarts a failing command for ever"),
    ("deadline: 2h", "deadline", "keeps a revision's clock"),
    ("sweep: {parameters: {RATE: ['1']}, objective: {metric: loss}}", "sweep.objective",
     "records a trial's result"),
]


@pytest.mark.parametrize(("line", "field", "says"), REFUSED,
                         ids=["onSuccess-idle", "onSuccess-release", "onFailure", "failurePolicy",
                              "deadline", "sweep-objective"])
def test_fields_that_need_the_launcher_are_refused_at_their_place(
        tmp_path: Path, run_cli: Callable[..., Result], line: str, field: str, says: str) -> None:
    source = tmp_path / "job.yaml"
    text = job_text(spec_lines=f"launcher: none\n{line}")
    source.write_text(text)
    result = run_cli("build", str(source), "-o", str(tmp_path / "output"))
    assert result.status == 2
    (problem,) = [row for row in result.stderr.splitlines() if f": spec.{field}: " in row]
    row = next(number for number, text_line in enumerate(text.splitlines(), 1)
               if text_line.strip().startswith(line.split(":")[0]))
    assert f"job.yaml:{row}:" in problem
    assert "needs tfcompile's launcher, which this job turns off (launcher: none)" in problem
    assert says in problem
    assert not (tmp_path / "output").exists()


def test_every_refused_field_is_reported_at_once(tmp_path: Path,
                                                 run_cli: Callable[..., Result]) -> None:
    source = tmp_path / "job.yaml"
    source.write_text(job_text(spec_lines="launcher: none\n" + "\n".join(
        line for line, _, _ in REFUSED if not line.startswith("onSuccess: idle"))))
    result = run_cli("build", str(source), "-o", str(tmp_path / "output"))
    assert result.status == 2
    assert result.stderr.count("needs tfcompile's launcher") == 5


def test_an_unknown_launcher_is_an_error(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    source = tmp_path / "job.yaml"
    source.write_text(job_text(spec_lines="launcher: sidecar"))
    result = run_cli("build", str(source), "-o", str(tmp_path / "output"))
    assert result.status == 2 and "spec.launcher" in result.stderr
    assert "'python' or 'none'" in result.stderr


# status and run-local of a job without the launcher


def live_objects(state_annotations: dict[str, str]) -> list[dict[str, Any]]:
    """What kubectl returns for a job of one worker whose training exited 0 and restarted."""
    labels = {"tfcompile.dev/job": "old"}
    return [
        {"kind": "ConfigMap", "metadata": {"name": "old-state", "labels": labels, "annotations": {
            "tfcompile.dev/revision": "0123456789ab", "tfcompile.dev/success-tasks": "worker-0",
            **state_annotations}}},
        {"kind": "StatefulSet",
         "metadata": {"name": "old-worker", "labels": {**labels, "tfcompile.dev/role": "worker"}},
         "spec": {"replicas": 1, "template": {"metadata": {"annotations": {
             "tfcompile.dev/revision": "0123456789ab"}}}}},
        {"kind": "Pod", "metadata": {"name": "old-worker-0", "labels": {
            **labels, "tfcompile.dev/role": "worker"}}, "status": {
            "phase": "Running", "containerStatuses": [{
                "name": "tensorflow", "ready": True, "restartCount": 2,
                "lastState": {"terminated": {"exitCode": 0}}}]}},
    ]


def test_status_says_a_job_without_the_launcher_records_nothing() -> None:
    status = job_status("old", "ml", live_objects({"tfcompile.dev/launcher": "none"}),
                        "0123456789ab")
    assert status.phase == "Running" and status.launcher == "none"
    text = as_text([status])
    assert text.splitlines()[0] == (
        "old (ml): Running; revision deployed 0123456789ab, committed 0123456789ab; launcher "
        "none: nothing records success or failure, and a training that exits 0 starts again")
    assert text.splitlines()[2].split() == ["worker", "1/1", "2", "0", "-"]
    assert '"launcher": "none"' in as_json([status])
    with_launcher = job_status("old", "ml", live_objects({}), "0123456789ab")
    assert with_launcher.launcher == "python" and "launcher" not in as_text([with_launcher])


def test_run_local_waits_for_no_success_marker_without_the_launcher(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    without = build(tmp_path / "none", run_cli, job_text(spec_lines="launcher: none"))
    assert success_pods(pods_of(parse_manifests(render(without)))) == []
    with_launcher = build(tmp_path / "python", run_cli, job_text())
    assert success_pods(pods_of(parse_manifests(render(with_launcher)))) == [
        "demo-worker-0", "demo-worker-1"]
