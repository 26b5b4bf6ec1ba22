"""What the compiler emits for a job: the objects of design §4, checked field by field."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import job_text
from tfcompile.compiler.objects.compile import build_objects
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.spec.loading import load_jobs

FULL_JOB = job_text(metadata_lines="""\
    namespace: ml
    labels: {team: vision}
    annotations: {owner: ana}
    """, image="tf:1", script="train.py", command=None, spec_lines="""\
    args: [--epochs, "3"]
    env:
      EPOCHS: "3"
      KEY: {secretKeyRef: {name: s3, key: secret}}
    envFrom: [{configMapRef: {name: settings}}]
    strategy: ParameterServer
    """, roles="""\
    chief: {replicas: 1}
    worker: {replicas: 2, gpus: 1, env: {EPOCHS: "4"}}
    ps: {replicas: 1, image: tf:cpu, command: [python, -m, server], args: [--port, "1"]}
    evaluator: {replicas: 1}
    """) + """\
  storage:
    shared: {mountPath: /mnt/shared, size: 10Gi, storageClassName: nfs}
    scratch: {mountPath: /mnt/scratch, sizeLimit: 20Gi}
  tensorboard: {logDir: /mnt/shared/logs}
"""


def compile_text(tmp_path: Path, text: str, script: str = "print('hi')\n") -> list[dict[str, Any]]:
    (tmp_path / "job.yaml").write_text(textwrap.dedent(text))
    (tmp_path / "train.py").write_text(script)
    [loaded] = load_jobs(tmp_path / "job.yaml")
    return build_objects(loaded, shipped_launcher())


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name} not found once"
    return matches[0]


def container(statefulset: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = statefulset["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["tensorflow"]
    return containers[0]


def env_of(statefulset: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(statefulset)["env"]}


@pytest.fixture
def objects(tmp_path: Path) -> list[dict[str, Any]]:
    return compile_text(tmp_path, FULL_JOB)


def test_one_statefulset_and_headless_service_per_role(objects: list[dict[str, Any]]) -> None:
    for role in ("chief", "worker", "ps", "evaluator"):
        service = find(objects, "Service", f"demo-{role}")
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["publishNotReadyAddresses"] is True
        assert service["spec"]["ports"][0]["name"] == "tfjob-port"
        assert service["spec"]["selector"] == {"tfcompile.dev/job": "demo",
                                               "tfcompile.dev/role": role}
        statefulset = find(objects, "StatefulSet", f"demo-{role}")
        spec = statefulset["spec"]
        assert spec["serviceName"] == f"demo-{role}"
        assert spec["podManagementPolicy"] == "Parallel"
        assert spec["selector"]["matchLabels"] == service["spec"]["selector"]
        assert container(statefulset)["ports"] == [
            {"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"},
            {"name": "tfjob-revision", "containerPort": 2223, "protocol": "TCP"}]
        assert statefulset["metadata"]["namespace"] == "ml"


def test_labels_never_enter_selectors(objects: list[dict[str, Any]]) -> None:
    worker = find(objects, "StatefulSet", "demo-worker")
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert labels["team"] == "vision"
    assert labels["app.kubernetes.io/managed-by"] == "tfcompile"
    assert labels["app.kubernetes.io/instance"] == "demo"
    assert labels["app.kubernetes.io/component"] == "worker"
    assert "team" not in worker["spec"]["selector"]["matchLabels"]
    for item in objects:
        assert item["metadata"]["labels"]["team"] == "vision"
        annotations = item["metadata"]["annotations"]
        assert annotations["owner"] == "ana"
        # The shared claim also carries what keeps it when the job is deleted (Retain).
        keeping = ({"argocd.argoproj.io/sync-options", "kustomize.toolkit.fluxcd.io/prune"}
                   if item["kind"] == "PersistentVolumeClaim" else set())
        assert all(key == "owner" or key.startswith("tfcompile.dev/") or key in keeping
                   for key in annotations)


def test_roles_override_image_command_args_and_env(objects: list[dict[str, Any]]) -> None:
    ps = container(find(objects, "StatefulSet", "demo-ps"))
    assert ps["image"] == "tf:cpu"
    assert ps["args"] == ["python", "-m", "server", "--port", "1"]
    worker = find(objects, "StatefulSet", "demo-worker")
    assert container(worker)["image"] == "tf:1"
    assert container(worker)["args"] == ["python", "/opt/tfcompile/script/train.py",
                                         "--epochs", "3"]
    assert env_of(worker)["EPOCHS"] == "4"
    assert env_of(find(objects, "StatefulSet", "demo-chief"))["EPOCHS"] == "3"
    assert env_of(worker)["KEY"] == {"secretKeyRef": {"name": "s3", "key": "secret"}}
    assert container(worker)["envFrom"] == [{"configMapRef": {"name": "settings"}}]


def test_user_env_comes_after_tfcompile_variables_sorted_by_name(
    objects: list[dict[str, Any]],
) -> None:
    names = [e["name"] for e in container(find(objects, "StatefulSet", "demo-chief"))["env"]]
    assert names[:3] == ["TASK_INDEX", "TF_CONFIG", "TFCOMPILE_REVISION"]
    assert names[3:] == ["HOME", "EPOCHS", "KEY"]


def test_gpus_go_into_limits_and_mark_the_statefulset(objects: list[dict[str, Any]]) -> None:
    worker = find(objects, "StatefulSet", "demo-worker")
    assert container(worker)["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert worker["metadata"]["labels"]["tfcompile.dev/gpu"] == "true"
    assert "tfcompile.dev/gpu" not in worker["spec"]["template"]["metadata"]["labels"]
    chief = find(objects, "StatefulSet", "demo-chief")
    assert "tfcompile.dev/gpu" not in chief["metadata"]["labels"]


def volumes_of(statefulset: dict[str, Any]) -> dict[str, Any]:
    return {v["name"]: v for v in statefulset["spec"]["template"]["spec"]["volumes"]}


def test_volumes_script_state_shared_and_scratch(objects: list[dict[str, Any]]) -> None:
    worker = find(objects, "StatefulSet", "demo-worker")
    mounts = {m["name"]: m["mountPath"] for m in container(worker)["volumeMounts"]}
    assert mounts == {"tfcompile-launcher": "/opt/tfcompile/launcher",
                      "script": "/opt/tfcompile/script", "tfcompile-state": "/opt/tfcompile/state",
                      "tfcompile-home": "/opt/tfcompile/home", "tfcompile-tmp": "/tmp",
                      "shared": "/mnt/shared", "scratch": "/mnt/scratch"}
    assert volumes_of(worker)["tfcompile-launcher"]["configMap"]["name"].startswith(
        "demo-launcher-")
    volumes = {v["name"]: v for v in worker["spec"]["template"]["spec"]["volumes"]}
    assert volumes["shared"]["persistentVolumeClaim"] == {"claimName": "demo-shared"}
    assert volumes["scratch"]["emptyDir"] == {"sizeLimit": "20Gi"}
    assert volumes["tfcompile-state"]["emptyDir"] == {}
    claim = find(objects, "PersistentVolumeClaim", "demo-shared")
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"],
                             "resources": {"requests": {"storage": "10Gi"}},
                             "storageClassName": "nfs"}
    assert claim["metadata"]["labels"]["tfcompile.dev/shared-storage"] == "true"


def test_existing_claim_is_mounted_not_created(tmp_path: Path) -> None:
    objects = compile_text(tmp_path, FULL_JOB.replace(
        "shared: {mountPath: /mnt/shared, size: 10Gi, storageClassName: nfs}",
        "shared: {mountPath: /mnt/shared, existingClaim: datasets}"))
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    volumes = find(objects, "StatefulSet", "demo-chief")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": "datasets"}} in volumes


def test_script_config_map_name_follows_its_content(tmp_path: Path) -> None:
    first = compile_text(tmp_path, FULL_JOB, script="print(1)\n")
    second = compile_text(tmp_path, FULL_JOB, script="print(2)\n")
    [map_one] = [o for o in first if o["metadata"]["name"].startswith("demo-script-")]
    [map_two] = [o for o in second if o["metadata"]["name"].startswith("demo-script-")]
    assert map_one["metadata"]["name"].startswith("demo-script-")
    assert map_one["metadata"]["name"] != map_two["metadata"]["name"]
    assert map_one["data"] == {"train.py": "print(1)\n"}
    annotation = "tfcompile.dev/revision"
    revisions = [find(objs, "StatefulSet", "demo-worker")["spec"]["template"]["metadata"]
                 ["annotations"][annotation] for objs in (first, second)]
    assert revisions[0] != revisions[1]


def test_any_change_restarts_every_role_together(tmp_path: Path) -> None:
    before = compile_text(tmp_path, FULL_JOB)
    after = compile_text(tmp_path, FULL_JOB.replace("evaluator: {replicas: 1}",
                                                    "evaluator: {replicas: 0}"))
    def revisions(objects: list[dict[str, Any]]) -> set[str]:
        return {o["spec"]["template"]["metadata"]["annotations"]["tfcompile.dev/revision"]
                for o in objects if o["kind"] == "StatefulSet"}
    assert len(revisions(before)) == 1 and len(revisions(after)) == 1
    assert revisions(before) != revisions(after)


def test_suspend_scales_every_role_to_zero_and_keeps_storage(tmp_path: Path) -> None:
    objects = compile_text(tmp_path, FULL_JOB.replace("  tensorboard:", "  suspend: true\n"
                                                      "  tensorboard:"))
    for item in objects:
        if item["kind"] == "StatefulSet":
            assert item["spec"]["replicas"] == 0
    find(objects, "PersistentVolumeClaim", "demo-shared")
    env = env_of(find(objects, "StatefulSet", "demo-worker"))
    assert "demo-worker-1.demo-worker:2222" in env["TF_CONFIG"]


def test_tensorboard_and_network_policy(objects: list[dict[str, Any]]) -> None:
    deployment = find(objects, "Deployment", "demo-tensorboard")
    board = deployment["spec"]["template"]["spec"]["containers"][0]
    assert board["command"][:3] == ["tensorboard", "--logdir", "/mnt/shared/logs"]
    service = find(objects, "Service", "demo-tensorboard")
    assert service["spec"]["type"] == "ClusterIP"
    policy = find(objects, "NetworkPolicy", "demo-tensorflow")
    # Every port: NCCL and the collectives open their own connections between the job's pods.
    assert policy["spec"]["ingress"] == [{
        "from": [{"podSelector": {"matchLabels": {"tfcompile.dev/job": "demo"}}}]}]
    assert policy["spec"]["policyTypes"] == ["Ingress"]


def test_network_policy_can_be_turned_off(tmp_path: Path) -> None:
    objects = compile_text(tmp_path, FULL_JOB.replace("  tensorboard:",
                                                      "  networkPolicy: false\n  tensorboard:"))
    assert not [o for o in objects if o["kind"] == "NetworkPolicy"]


def test_one_pod_job_has_no_tf_config(tmp_path: Path) -> None:
    objects = compile_text(tmp_path, job_text("solo", image="tf", command="[python, t.py]",
                                              roles="worker: {replicas: 1}"))
    assert "TF_CONFIG" not in env_of(find(objects, "StatefulSet", "solo-worker"))


def test_emitted_yaml_reads_back_as_the_objects(tmp_path: Path) -> None:
    from tfcompile.compiler.yaml_output import dump

    for item in compile_text(tmp_path, FULL_JOB):
        assert YAML(typ="safe").load(dump(item)) == item
