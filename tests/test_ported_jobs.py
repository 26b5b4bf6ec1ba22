"""Jobs ported from Kubeflow's TFJob examples, TF-Spawner and a Helm chart, with the settings
real jobs need (node selectors per role, tolerations, affinity, service account, image pull
secrets, priority class, init container, sidecar, more volumes, labels per role): each compiles
with no component but the shipped ones, validates, and its pods carry what the job said."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import OVERLAYS, Result, job_directories
from tfcompile.compiler.cli import main
from tfcompile.compiler.rendering.kustomize import render

PORTED = Path(__file__).parent / "fixtures" / "ported"
JOBS = sorted(path.stem for path in PORTED.glob("*.yaml"))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every ported job, built with `tfcompile build` and rendered by kubectl kustomize."""
    output = tmp_path_factory.mktemp("ported") / "output"
    assert main(["build", str(PORTED), "-o", str(output), "--overlays", str(OVERLAYS)]) == 0
    documents: dict[str, dict[str, Any]] = {}
    for directory in job_directories(output):
        for document in YAML(typ="safe").load_all(render(directory)):
            documents[f"{document['kind']}/{document['metadata']['name']}"] = document
    return documents


def pod_spec(documents: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    spec: dict[str, Any] = documents[f"StatefulSet/{name}"]["spec"]["template"]["spec"]
    return spec


def test_there_are_twelve_ported_jobs_using_only_shipped_components() -> None:
    assert len(JOBS) == 12
    for name in JOBS:
        job = YAML(typ="safe").load((PORTED / f"{name}.yaml").read_text())
        assert set(job["spec"].get("overlays", [])) <= {"gpu", "azure"}, name


@pytest.mark.parametrize("name", JOBS)
def test_each_ported_job_validates(name: str, tmp_path: Path,
                                   run_cli: Callable[..., Result]) -> None:
    output = tmp_path / "output"
    assert run_cli("build", str(PORTED / f"{name}.yaml"), "-o", str(output), "--overlays",
                   str(OVERLAYS)).status == 0
    (directory,) = job_directories(output)
    result = run_cli("validate", str(directory))
    assert result.status == 0, result.stdout
    assert "error:" not in result.stdout
    if name == "private-registry":
        assert "requires: PriorityClass/batch-high: used by" in result.stdout
        assert "requires: ServiceAccount/resnet-trainer: used by" in result.stdout
    assert 'not "restricted"' not in result.stdout


def test_the_settings_reach_the_pods(rendered: dict[str, dict[str, Any]]) -> None:
    helm_ps, helm_worker = (pod_spec(rendered, f"helm-tf1-{role}") for role in ("ps", "worker"))
    assert helm_ps["nodeSelector"] == {"node-pool": "cpu"}
    assert helm_worker["nodeSelector"] == {"node-pool": "gpu"}

    private = pod_spec(rendered, "private-registry-worker")
    assert private["serviceAccountName"] == "resnet-trainer"
    assert private["imagePullSecrets"] == [{"name": "registry-credentials"}]
    assert private["priorityClassName"] == "batch-high"
    assert "automountServiceAccountToken" not in private  # the named account needs its token

    staged = pod_spec(rendered, "dataset-init-worker")
    assert [c["name"] for c in staged["initContainers"]] == ["stage-dataset"]
    claims = {v["name"]: v.get("persistentVolumeClaim") for v in staged["volumes"]}
    assert claims["dataset"] == {"claimName": "imagenet", "readOnly": True}

    sidecar = pod_spec(rendered, "metrics-sidecar-worker")
    assert [c["name"] for c in sidecar["containers"]] == ["tensorflow", "dcgm-exporter"]
    policy = rendered["NetworkPolicy/metrics-sidecar-tensorflow"]["spec"]
    assert policy["ingress"][1]["ports"] == [{"port": 9400, "protocol": "TCP"}]

    spread = pod_spec(rendered, "spread-spot-worker")
    assert [t["key"] for t in spread["tolerations"]] == [
        "kubernetes.azure.com/scalesetpriority", "dedicated", "sku", "nvidia.com/gpu"]
    assert "podAntiAffinity" in spread["affinity"]

    labels = {role: rendered[f"StatefulSet/credentials-volume-{role}"]["spec"]["template"][
        "metadata"]["labels"]["cost-center"] for role in ("chief", "worker", "ps")}
    assert labels == {"chief": "ml-coordination", "worker": "ml-compute", "ps": "ml-compute"}
    tensorflow = pod_spec(rendered, "credentials-volume-worker")["containers"][0]
    assert {"name": "google-key", "mountPath": "/var/secrets/google", "readOnly": True} in \
        tensorflow["volumeMounts"]

    spawner = rendered["StatefulSet/tf-spawner-gpu-worker"]["spec"]["template"]
    assert spawner["metadata"]["labels"]["training_attempt"] == "1"
    assert rendered["PodGroup/distributed-training"]["spec"] == {"minMember": 3}
