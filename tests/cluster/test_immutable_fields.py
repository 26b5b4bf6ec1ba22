"""The StatefulSet changes `build` refuses are exactly those the API server refuses.

Each row starts from output a StatefulSet had before (an older tfcompile, or a hand edit), applies
it, then builds the job again: `build` refuses or writes, and the API server refuses or accepts
the new output. Both must agree; after the recreate `build` asks for (delete with
`--cascade=orphan`, build with `--allow-recreate`) the API server accepts the new output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import Cluster
from tests.conftest import job_text
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests

pytestmark = pytest.mark.cluster

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")
STATEFUL_SET_FILE = "statefulset-recreate-worker.yaml"
JOB = job_text("recreate")


def _selector(spec: dict[str, Any]) -> None:
    spec["selector"]["matchLabels"]["tfcompile.dev/generation"] = "old"
    spec["template"]["metadata"]["labels"]["tfcompile.dev/generation"] = "old"


def _claim_templates(spec: dict[str, Any]) -> None:
    spec["volumeClaimTemplates"] = [{
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }]


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        spec[field] = value
    return change


def _template_annotation(spec: dict[str, Any]) -> None:
    spec["template"]["metadata"]["annotations"]["tfcompile.dev/revision"] = "000000000000"


# How the StatefulSet looked before: one spec field differs from what `build` makes now.
CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "selector": _selector,
    "serviceName": _set("serviceName", "recreate-old"),
    "podManagementPolicy": _set("podManagementPolicy", "OrderedReady"),
    "volumeClaimTemplates": _claim_templates,
    "replicas": _set("replicas", 5),
    "template": _template_annotation,
    "updateStrategy": _set("updateStrategy", {"type": "OnDelete"}),
    "minReadySeconds": _set("minReadySeconds", 10),
    "revisionHistoryLimit": _set("revisionHistoryLimit", 3),
    "persistentVolumeClaimRetentionPolicy": _set(
        "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Delete", "whenScaled": "Delete"}),
    "ordinals": _set("ordinals", {"start": 1}),
}


def build(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TFCOMPILE, "build", "jobs", "-o", "output", *options], cwd=root,
                          capture_output=True, text=True, check=False, timeout=120)


def server_side_apply(cluster: Cluster, directory: Path, namespace: str) -> (
        subprocess.CompletedProcess[str]):
    objects = parse_manifests(render(directory))
    return cluster.kubectl(
        "apply", "--server-side", "--field-manager=gitops-controller", "--namespace", namespace,
        "--filename=-", input_text="\n".join(json.dumps(o) for o in objects), check=False)


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_build_refuses_what_the_api_server_refuses(
    cluster: Cluster, field: str, tmp_path: Path
) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job.yaml").write_text(JOB, encoding="utf-8")
    assert build(tmp_path).returncode == 0
    current = (tmp_path / "output" / "recreate" / STATEFUL_SET_FILE).read_text(encoding="utf-8")
    before = json.loads(json.dumps(parse_manifests(current)[0]))
    CHANGES[field](before["spec"])
    (tmp_path / "output" / "recreate" / STATEFUL_SET_FILE).write_text(
        json.dumps(before, indent=1) + "\n", encoding="utf-8")
    namespace = cluster.fresh_namespace()
    old = server_side_apply(cluster, tmp_path / "output" / "recreate", namespace)
    assert old.returncode == 0, old.stderr

    rebuilt = build(tmp_path)
    refused_by_build = rebuilt.returncode != 0
    if refused_by_build:
        assert f"changes spec.{field} of StatefulSet recreate-worker" in rebuilt.stderr, \
            rebuilt.stderr
        assert (tmp_path / "output" / "recreate" / STATEFUL_SET_FILE).read_text(
            encoding="utf-8") != current, "a refused build wrote the output"
        assert build(tmp_path, "--allow-recreate").returncode == 0
    assert (tmp_path / "output" / "recreate" / STATEFUL_SET_FILE).read_text(
        encoding="utf-8") == current
    new = server_side_apply(cluster, tmp_path / "output" / "recreate", namespace)
    refused_by_server = new.returncode != 0

    assert (field, refused_by_build) == (field, refused_by_server), new.stderr
    if refused_by_server:
        assert "Forbidden: updates to statefulset spec for fields other than" in new.stderr
        cluster.kubectl("delete", "statefulset", "recreate-worker", "--cascade=orphan",
                        "--namespace", namespace)
        again = server_side_apply(cluster, tmp_path / "output" / "recreate", namespace)
        assert again.returncode == 0, again.stderr
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
