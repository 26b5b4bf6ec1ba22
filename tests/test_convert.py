"""`tfcompile convert`: each TFJob field lands where docs/migrating-from-tfjob.md says, a field
without an equivalent is a note at its line, and what is not a TFJob is a located refusal."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPOSITORY, Result
from tfcompile.compiler.conversion.mapping import convert_tfjob
from tfcompile.compiler.conversion.run_policy import duration

FIXTURES = REPOSITORY / "tests" / "fixtures" / "tfjobs"


def replica(image: str = "registry.example.com/train:1", command: Any = ("python", "/t.py"),
            restart: str = "OnFailure", replicas: int = 1, **container: Any) -> dict[str, Any]:
    training: dict[str, Any] = {"name": "tensorflow", "image": image, **container}
    if command is not None:
        training["command"] = list(command)
    return {"replicas": replicas, "restartPolicy": restart,
            "template": {"spec": {"containers": [training]}}}


def tfjob(run_policy: dict[str, Any] | None = None, **replicas: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"tfReplicaSpecs": replicas or {"Worker": replica(replicas=2)}}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "census"},
            "spec": spec}


def notes_of(data: dict[str, Any]) -> dict[str, str]:
    converted = convert_tfjob(data)
    return {".".join(str(part) for part in path): message
            for path, message in converted.findings.notes}


def converted_spec(data: dict[str, Any]) -> dict[str, Any]:
    converted = convert_tfjob(data)
    assert converted.findings.problems == []
    assert converted.job is not None
    spec: dict[str, Any] = converted.job["spec"]
    return spec


def test_master_becomes_the_chief_and_the_note_says_tf_config_names_it_chief() -> None:
    data = tfjob(Master=replica(), Worker=replica(replicas=2))
    spec = converted_spec(data)
    assert spec["roles"] == {"chief": {"replicas": 1}, "worker": {"replicas": 2}}
    note = notes_of(data)["spec.tfReplicaSpecs.Master"]
    assert "TF_CONFIG names it chief (the operator wrote master)" in note


def test_replica_types_are_read_ignoring_case_as_the_operator_does() -> None:
    spec = converted_spec(tfjob(ps=replica(), WORKER=replica(replicas=3)))
    assert spec["roles"] == {"worker": {"replicas": 3}, "ps": {"replicas": 1}}


def test_chief_and_master_together_are_refused() -> None:
    converted = convert_tfjob(tfjob(Chief=replica(), Master=replica(), Worker=replica()))
    assert converted.job is None
    assert [path for path, _ in converted.findings.problems] == [
        ("spec", "tfReplicaSpecs", "Master")]


def test_what_every_role_shares_is_written_once_and_the_rest_per_role() -> None:
    spec = converted_spec(tfjob(
        Chief=replica(env=[{"name": "EPOCHS", "value": "3"}]),
        Worker=replica(image="registry.example.com/train:2", replicas=2,
                       env=[{"name": "EPOCHS", "value": "3"}],
                       resources={"limits": {"nvidia.com/gpu": 1, "memory": "8Gi"}})))
    assert spec["command"] == ["python", "/t.py"]
    assert spec["env"] == {"EPOCHS": "3"}
    assert "image" not in spec
    assert spec["roles"]["chief"]["image"] == "registry.example.com/train:1"
    assert spec["roles"]["worker"]["image"] == "registry.example.com/train:2"
    assert spec["roles"]["worker"]["gpus"] == 1
    assert spec["roles"]["worker"]["resources"] == {"limits": {"memory": "8Gi"}}


def test_the_rest_of_a_template_is_a_pod_template_with_the_tensorflow_container_first() -> None:
    worker = replica(replicas=2, workingDir="/app")
    worker["template"]["spec"]["containers"].insert(0, {"name": "proxy", "image": "envoy:1"})
    worker["template"]["spec"]["nodeSelector"] = {"pool": "gpu"}
    worker["template"]["spec"]["restartPolicy"] = "OnFailure"
    data = tfjob(Worker=worker)
    spec = converted_spec(data)
    assert spec["podTemplate"]["spec"] == {
        "containers": [{"name": "tensorflow", "workingDir": "/app"},
                       {"name": "proxy", "image": "envoy:1"}],
        "nodeSelector": {"pool": "gpu"}}
    assert "restartPolicy" in notes_of(data)["spec.tfReplicaSpecs.Worker.template.spec."
                                             "restartPolicy"]


def test_run_policy_becomes_the_launchers_fields() -> None:
    data = tfjob({"backoffLimit": 5, "activeDeadlineSeconds": 5400, "cleanPodPolicy": "All",
                  "ttlSecondsAfterFinished": 60, "suspend": True})
    spec = converted_spec(data)
    assert (spec["failurePolicy"], spec["deadline"]) == ({"maxRestarts": 5}, "1h30m")
    assert (spec["onSuccess"], spec["onFailure"], spec["suspend"]) == ("release", "release",
                                                                       True)
    assert "no equivalent" in notes_of(data)["spec.runPolicy.ttlSecondsAfterFinished"]


def test_replicas_that_never_restart_stop_at_the_first_failure() -> None:
    spec = converted_spec(tfjob(Worker=replica(restart="Never", replicas=2)))
    assert spec["failurePolicy"] == {"maxRestarts": 0}


def test_a_tfjob_without_a_command_runs_its_image_entrypoint_without_the_launcher() -> None:
    data = tfjob({"backoffLimit": 3, "cleanPodPolicy": "All"},
                 PS=replica(command=None), Worker=replica(command=None, replicas=2))
    spec = converted_spec(data)
    assert spec["launcher"] == "none"
    assert "command" not in spec and "failurePolicy" not in spec and "onSuccess" not in spec
    notes = notes_of(data)
    assert "image's entrypoint" in notes["spec.tfReplicaSpecs.PS"]
    assert "launcher" in notes["spec.runPolicy.backoffLimit"]
    assert "launcher" in notes["spec.runPolicy.cleanPodPolicy"]


def test_kueues_queue_label_and_volcanos_scheduler_become_a_gang() -> None:
    kueue = tfjob()
    kueue["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue", "team": "a"}
    assert converted_spec(kueue)["scheduling"] == {"gang": "kueue", "queue": "user-queue"}
    volcano = tfjob({"schedulingPolicy": {"queue": "research", "priorityClass": "high",
                                          "minAvailable": 3}}, Worker=replica(replicas=2))
    volcano["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = "volcano"
    spec = converted_spec(volcano)
    assert spec["scheduling"] == {"gang": "volcano", "queue": "research"}
    assert spec["podTemplate"]["spec"]["priorityClassName"] == "high"


@pytest.mark.parametrize(("seconds", "expected"), [(3600, "1h"), (90, "1m30s"), (45, "45s"),
                                                   (90061, "25h1m1s")])
def test_seconds_are_written_as_a_duration(seconds: int, expected: str) -> None:
    assert duration(seconds) == expected


def write(tmp_path: Path, text: str, name: str = "tfjob.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


SECRET_TFJOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: census}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: tensorflow
            image: registry.example.com/train:1
            command: [python, /t.py]
            env:
            - {name: DB_PASSWORD, value: hunter2-but-longer}
            - name: API_TOKEN
              valueFrom: {secretKeyRef: {name: api, key: token}}
"""


def test_a_literal_secret_is_left_out_with_a_note_and_a_reference_is_kept(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    result = run_cli("convert", str(write(tmp_path, SECRET_TFJOB)))
    assert result.status == 0, result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    assert re.search(r"tfjob\.yaml:15:15: spec\.tfReplicaSpecs\.Worker\.template\.spec\."
                     r"containers\[0\]\.env\[0\]: DB_PASSWORD: a literal value", result.stderr)
    job = yaml.safe_load(result.stdout)
    assert job["spec"]["env"] == {"API_TOKEN": {"secretKeyRef": {"name": "api", "key": "token"}}}


def test_the_notes_head_the_file_and_the_output_is_the_same_bytes_each_time(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    source = write(tmp_path, SECRET_TFJOB)
    first, second = run_cli("convert", str(source)), run_cli("convert", str(source))
    assert first.stdout == second.stdout
    assert first.stdout.startswith("# Converted by `tfcompile convert` from the Kubeflow TFJob "
                                   "tfjob.yaml.\n# What had no equivalent, by TFJob field:\n# - "
                                   "spec.tfReplicaSpecs.Worker.template.spec.containers[0]."
                                   "env[0] (line 15): DB_PASSWORD: ")


@pytest.mark.parametrize(("text", "expected"), [
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n",
     "tfjob.yaml:1:13: apiVersion: must be kubeflow.org/v1"),
    ("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\n", "tfjob.yaml:2:7: kind: must be TFJob"),
    ("- a\n- b\n", "tfjob.yaml:1:1: (document): expected a mapping"),
    ("a: [\n", "tfjob.yaml:2:1: (document): invalid YAML"),
    ("a: !!binary aGVsbG8=\n", "tfjob.yaml:1:4: a: an explicit YAML tag"),
    ("a: 1\n---\nb: 2\n", "tfjob.yaml:3:1: (document): the file has 2 documents"),
    ("apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: a}\nspec:\n  tfReplicaSpecs:\n"
     "    Launcher: {template: {spec: {containers: [{name: tensorflow, image: a}]}}}\n",
     "tfjob.yaml:6:5: spec.tfReplicaSpecs.Launcher: not a TFJob replica type"),
    ("apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: a}\nspec:\n  tfReplicaSpecs:\n"
     "    Worker: {template: {spec: {containers: [{name: main, image: a}]}}}\n",
     "containers: no container named tensorflow"),
    ("apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: a}\nspec:\n  tfReplicaSpecs:\n"
     "    Chief: {replicas: 2, template: {spec: {containers: [{name: tensorflow, image: a, "
     "command: [x]}]}}}\n",
     "tfjob.yaml:6:23: spec.tfReplicaSpecs.Chief.replicas: as spec.roles.chief.replicas: "
     "TensorFlow allows at most one chief"),
])
def test_what_is_not_a_tfjob_tfcompile_can_convert_is_a_located_refusal(
    tmp_path: Path, run_cli: Callable[..., Result], text: str, expected: str
) -> None:
    result = run_cli("convert", str(write(tmp_path, text)))
    assert (result.status, result.stdout) == (2, "")
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_output_goes_to_a_new_job_file_never_over_one_or_through_a_link(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    source = write(tmp_path, SECRET_TFJOB)
    written = run_cli("convert", str(source), "-o", str(tmp_path / "jobs" / "census"))
    assert written.status == 0, written.stderr
    job_file = tmp_path / "jobs" / "census" / "job.yaml"
    assert job_file.read_text(encoding="utf-8") == run_cli("convert", str(source)).stdout
    again = run_cli("convert", str(source), "-o", str(tmp_path / "jobs" / "census"))
    assert again.status == 2 and "exists; convert replaces no file" in again.stderr
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere" / "job.yaml", tmp_path / "linked-file")
    (tmp_path / "through-link").mkdir()
    os.symlink(tmp_path / "elsewhere" / "job.yaml", tmp_path / "through-link" / "job.yaml")
    os.symlink(tmp_path / "elsewhere", tmp_path / "linked-folder")
    for target in ("through-link", "linked-folder"):
        refused = run_cli("convert", str(source), "-o", str(tmp_path / target))
        assert refused.status == 2, refused.stderr
        assert "nothing was written" in refused.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


SOURCE_LINE = re.compile(r"# Source: https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+\n")


@pytest.mark.parametrize("fixture", sorted(path.name for path in FIXTURES.glob("*.yaml")))
def test_every_tfjob_fixture_names_its_source_and_converts(
    fixture: str, run_cli: Callable[..., Result]
) -> None:
    text = (FIXTURES / fixture).read_text(encoding="utf-8")
    assert SOURCE_LINE.match(text), "the first line names the repository, commit and path"
    result = run_cli("convert", str(FIXTURES / fixture))
    assert result.status == 0, result.stderr
    assert yaml.safe_load(result.stdout)["kind"] == "TrainingJob"


def test_there_are_at_least_ten_tfjob_fixtures() -> None:
    assert len(list(FIXTURES.glob("*.yaml"))) >= 10
