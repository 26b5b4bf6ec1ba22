"""Rendering a compiled job with real Kustomize and deriving the pods a cluster would run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tfcompile.compiler.rendering.kustomize import (
    Renderer,
    RenderError,
    find_renderer,
    kustomize_message,
    render,
)
from tfcompile.compiler.rendering.manifests import (
    ManifestError,
    find_object,
    object_reference,
    objects_of_kind,
    parse_manifests,
)
from tfcompile.compiler.rendering.pods import (
    POD_INDEX_LABEL,
    ContainerPort,
    EnvironmentReference,
    VolumeMount,
)
from tfcompile.compiler.rendering.stateful_set_pods import POD_NAME_LABEL, pods_of

FIXTURE = Path(__file__).parent / "fixtures" / "validation" / "mnist"


@pytest.fixture(scope="module")
def rendered() -> str:
    return render(FIXTURE)


def overlay(tmp_path: Path, kustomization: str) -> Path:
    """A user kustomization that includes the compiled job as a resource."""
    job = tmp_path / "mnist"
    shutil.copytree(FIXTURE, job)
    user = tmp_path / "user"
    user.mkdir()
    (user / "kustomization.yaml").write_text("resources: [../mnist]\n" + kustomization)
    return user


def test_render_is_deterministic(rendered: str) -> None:
    assert render(FIXTURE) == rendered
    assert rendered.startswith("apiVersion: v1\n")


@pytest.mark.parametrize("which", ["kubectl kustomize", "the renderer tfcompile finds"])
def test_render_failure_carries_kustomize_message(tmp_path: Path, which: str) -> None:
    """Kustomize's own message, without kubectl's klog wrapping or a standalone kustomize's
    `Error:`: both renderers are tried (the suite puts a standalone kustomize on PATH, which
    tfcompile then prefers)."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is needed on PATH"
    renderer = (Renderer(command=(kubectl, "kustomize")) if which == "kubectl kustomize"
                else find_renderer())
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(RenderError) as failure:
        render(tmp_path, renderer)
    message = str(failure.value)
    assert "missing.yaml" in message
    assert "run.go" not in message
    assert "command failed" not in message and "failed: Error" not in message


def test_render_refuses_directory_without_kustomization(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=r"no kustomization\.yaml"):
        render(tmp_path)
    with pytest.raises(RenderError, match="not a directory"):
        render(tmp_path / "absent")


def test_kubectl_klog_prefix_is_removed() -> None:
    standard_error = (
        'E1126 00:40:29.575349    6729 run.go:72] "command failed" '
        'err="accumulating resources: \\"x\\" missing"\n'
    )
    assert kustomize_message(standard_error) == 'accumulating resources: "x" missing'
    assert kustomize_message("Error: bad patch\n") == "bad patch"


def test_parse_manifests_gives_plain_objects(rendered: str) -> None:
    objects = parse_manifests(rendered)
    assert [object_reference(item) for item in objects] == [
        "ConfigMap/mnist-script-5f2c9d8e1a",
        "Service/mnist-chief",
        "Service/mnist-worker",
        "PersistentVolumeClaim/mnist-shared",
        "StatefulSet/mnist-chief",
        "StatefulSet/mnist-worker",
    ]
    assert find_object(objects, "Service", "mnist-worker") is objects[2]
    assert find_object(objects, "Service", "mnist-worker", namespace="ml") is None
    assert len(objects_of_kind(objects, "StatefulSet")) == 2
    assert json.loads(json.dumps(objects)) == objects


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [", "not valid YAML"),
        ("- 1\n- 2\n", "not a Kubernetes object"),
        ("apiVersion: v1\nkind: ConfigMap\n", "metadata.name"),
    ],
)
def test_parse_manifests_rejects_non_objects(text: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        parse_manifests(text)


def test_timestamps_become_strings() -> None:
    objects = parse_manifests(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {when: 2024-01-02}\n"
    )
    assert objects[0]["data"]["when"] == "2024-01-02"


def test_pods_are_named_and_labelled_as_the_controller_does(rendered: str) -> None:
    pods = pods_of(parse_manifests(rendered))
    assert [pod.name for pod in pods] == ["mnist-chief-0", "mnist-worker-0", "mnist-worker-1"]
    worker = pods[2]
    assert worker.owner_kind == "StatefulSet"
    assert worker.owner_name == "mnist-worker"
    assert worker.index == 1
    assert worker.hostname == "mnist-worker-1"
    assert worker.subdomain == "mnist-worker"
    assert worker.namespace is None
    assert worker.labels[POD_INDEX_LABEL] == "1"
    assert worker.labels[POD_NAME_LABEL] == "mnist-worker-1"
    assert worker.labels["tfcompile.dev/role"] == "worker"
    assert worker.annotations == {"tfcompile.dev/revision": "3b8e1f0c2d4a"}
    assert worker.restart_policy == "Always"
    assert worker.termination_grace_period_seconds == 30


def test_pod_environment_is_expanded_from_its_own_index(rendered: str) -> None:
    pods = pods_of(parse_manifests(rendered))
    container = pods[2].containers[0]
    tf_config = json.loads(container.environment["TF_CONFIG"])
    assert tf_config["task"] == {"type": "worker", "index": 1}
    assert container.environment["WORKER_NUMBER"] == "1"
    assert list(container.environment)[:2] == ["TASK_INDEX", "JOB_NAME"]
    assert container.unresolved == [
        EnvironmentReference("Secret", "s3-credentials", "secret", optional=False)
    ]
    assert container.command[:2] == ["/bin/sh", "-c"]
    assert container.args == ["python", "/opt/tfcompile/script/train.py", "--epochs", "3"]
    assert container.ports == [ContainerPort("tfjob-port", 2222, "TCP")]
    assert container.volume_mounts[0] == VolumeMount(
        "script", "/opt/tfcompile/script", read_only=True, sub_path=None
    )
    assert [(volume.name, volume.kind) for volume in pods[2].volumes] == [
        ("script", "configMap"),
        ("tfcompile-state", "emptyDir"),
        ("shared", "persistentVolumeClaim"),
    ]
    assert pods[2].volumes[2].source == {"claimName": "mnist-shared"}


def test_supplied_secrets_and_pod_ips_reach_the_environment(tmp_path: Path) -> None:
    user = overlay(
        tmp_path,
        """patches:
- target: {kind: StatefulSet, name: mnist-worker}
  patch: |
    - op: add
      path: /spec/template/spec/containers/0/env/-
      value: {name: MY_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
""",
    )
    pods = pods_of(
        parse_manifests(render(user)),
        secrets={("s3-credentials", "secret"): "hunter2"},
        pod_ips={"mnist-worker-0": "10.0.0.5"},
    )
    worker = pods[1].containers[0]
    assert worker.environment["AWS_SECRET_ACCESS_KEY"] == "hunter2"
    assert worker.environment["MY_IP"] == "10.0.0.5"
    assert worker.unresolved == []
    assert pods[2].containers[0].unresolved == [
        EnvironmentReference("Field", "status.podIP", None, optional=False)
    ]


def test_rendered_secret_and_config_map_feed_env_from() -> None:
    objects = parse_manifests(
        """apiVersion: v1
kind: Secret
metadata: {name: tokens, namespace: ml}
data: {TOKEN: aHVudGVyMg==}
stringData: {OTHER: plain}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: ml}
data: {MODE: fast}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: job-worker, namespace: ml}
spec:
  replicas: 1
  ordinals: {start: 3}
  serviceName: job-worker
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
      - name: main
        image: busybox
        envFrom: [{secretRef: {name: tokens}}, {configMapRef: {name: settings}, prefix: CM_}]
        env:
        - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        command: [run, "$(CM_MODE)", "$(TOKEN)"]
        volumeMounts: [{name: data, mountPath: /data, subPathExpr: "$(POD)"}]
      volumes: [{name: data, emptyDir: {}}]
"""
    )
    pods = pods_of(objects, secrets={("tokens", "TOKEN"): "ignored: the manifests create it"})
    assert [pod.name for pod in pods] == ["job-worker-3"]
    assert pods[0].labels[POD_INDEX_LABEL] == "3"
    container = pods[0].containers[0]
    assert container.environment == {
        "OTHER": "plain",
        "TOKEN": "hunter2",
        "CM_MODE": "fast",
        "POD": "job-worker-3",
        "NS": "ml",
    }
    assert container.command == ["run", "fast", "hunter2"]
    assert container.volume_mounts[0].sub_path == "job-worker-3"


def test_replicas_zero_creates_no_pods(tmp_path: Path) -> None:
    user = overlay(
        tmp_path,
        """patches:
- target: {kind: StatefulSet}
  patch: |
    - {op: replace, path: /spec/replicas, value: 0}
""",
    )
    assert pods_of(parse_manifests(render(user))) == []


def test_renderer_falls_back_to_kubectl(monkeypatch: pytest.MonkeyPatch) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None or (Path(kubectl).parent / "kustomize").exists():
        pytest.skip("needs kubectl without a standalone kustomize beside it")
    monkeypatch.setenv("PATH", str(Path(kubectl).parent))
    assert find_renderer().description == "kubectl kustomize"


def test_no_renderer_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RenderError, match="neither `kustomize` nor `kubectl` is on PATH"):
        render(FIXTURE)


def test_a_digest_kustomize_leaves_unquoted_is_read_as_the_string_it_is(tmp_path: Path) -> None:
    """Kustomize, like every Go tool of Kubernetes, reads `459292e26177` as a string (it overflows
    a float) and writes it unquoted; YAML 1.2 alone would read infinity."""
    (tmp_path / "kustomization.yaml").write_text("resources: [config.yaml]\n")
    (tmp_path / "config.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: digest\n"
        "  annotations: {revision: '459292e26177', small: '1e3'}\n")
    rendered = render(tmp_path)
    assert "revision: 459292e26177\n" in rendered
    (config,) = parse_manifests(rendered)
    assert config["metadata"]["annotations"] == {"revision": "459292e26177", "small": "1e3"}


def test_a_server_that_stops_with_no_command_beside_it_is_named_in_the_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`tfcompile-kustomize` is on PATH but stops at once, and there is no `kustomize` or
    `kubectl` to render instead: the error says which program stopped and what to install."""
    (tmp_path / "tfcompile-kustomize").write_text("#!/bin/sh\nread request\nexit 3\n")
    (tmp_path / "tfcompile-kustomize").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RenderError) as stopped:
        render(FIXTURE)
    assert str(stopped.value) == (
        f"{FIXTURE}: `tfcompile-kustomize` stopped without an answer, and neither `kustomize` "
        "nor `kubectl` is on PATH: install one of them "
        "(https://kubectl.docs.kubernetes.io/installation/kustomize/) to render the output")
