"""What the compiled examples do in a real control plane: accepted, the right pods, suspend, prune.

tfcompile's own checks model Kubernetes; these ask Kubernetes. Every example is applied the way
Argo CD and Flux do it (server-side apply, an ApplySet for pruning) into a fresh namespace that
enforces Pod Security (`POD_SECURITY_LEVEL`), and the StatefulSet controller's pods are compared
with the `TF_CONFIG` they carry. There is no node, so pods stay Pending: enough for what is
checked here.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import Cluster
from tests.cluster.waiting import wait_for
from tests.conftest import EXAMPLES, OUTPUT, OVERLAYS
from tfcompile.compiler.rendering.environment import (
    DownwardApi,
    EnvironmentSources,
    build_environment,
)
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import KubernetesObject, parse_manifests
from tfcompile.compiler.rendering.quantities import parse_quantity

pytestmark = pytest.mark.cluster


def example_of(job: str) -> str:
    """The example a job of output/ comes from: a sweep's trials (`sweep-<digest>`) come from
    examples/sweep."""
    return job if (EXAMPLES / job).is_dir() else job.rsplit("-", 1)[0]


def one_trial_per_sweep(jobs: list[str]) -> list[str]:
    """Every job of output/, but one trial of a sweep: its trials differ only in values."""
    seen: set[str] = set()
    chosen = []
    for job in jobs:
        if example_of(job) not in seen:
            seen.add(example_of(job))
            chosen.append(job)
    return chosen


JOBS = one_trial_per_sweep(sorted(
    path.name for path in OUTPUT.iterdir() if (path / "kustomization.yaml").is_file()))
TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")
FIELD_MANAGER = "gitops-controller"
WAIT_SECONDS = 90.0
# What the examples say must exist before they sync (examples/tf-spawner/job.yaml).
PREREQUISITES = {
    "tf-spawner": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-credentials"},
                    "stringData": {"access-key": "example", "secret-key": "example"}}],
}


def rendered(directory: Path) -> list[KubernetesObject]:
    return parse_manifests(render(directory), source=str(directory))


def in_namespace(objects: list[KubernetesObject], namespace: str) -> list[KubernetesObject]:
    """The objects as a namespace overlay (or Argo CD's destination) puts them into `namespace`."""
    return [{**o, "metadata": {**o["metadata"], "namespace": namespace}} for o in objects]


def apply(cluster: Cluster, objects: list[KubernetesObject], namespace: str,
          applyset: str = "training-jobs") -> None:
    """Server-side apply with prune, as Argo CD and Flux sync a directory."""
    cluster.kubectl(
        "apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "--namespace", namespace,
        "--prune", f"--applyset={applyset}", "--filename=-",
        input_text="\n".join(json.dumps(o) for o in objects),
        environment={"KUBECTL_APPLYSET": "true"},
    )


def stored(cluster: Cluster, kubernetes_object: KubernetesObject, namespace: str) -> Any:
    return cluster.get_json(f"{kubernetes_object['kind']}/{kubernetes_object['metadata']['name']}",
                            "--namespace", namespace)


def differences(sent: Any, kept: Any, path: str = "") -> list[str]:
    """Where the stored object lacks or changes what was sent, modulo what the API's encoding
    normalizes: fields the server adds (defaults), empty values it omits (`value: ""`), and
    quantities it stores as canonical strings (`nvidia.com/gpu: 1` → `"1"`)."""
    if isinstance(sent, dict):
        if not isinstance(kept, dict):
            return [f"{path}: sent an object, stored {kept!r}"]
        found = []
        for key, value in sent.items():
            if key not in kept:
                if value not in ("", [], {}):
                    found.append(f"{path}.{key}: not stored")
            else:
                found.extend(differences(value, kept[key], f"{path}.{key}"))
        return found
    if isinstance(sent, int | float) and not isinstance(sent, bool) and isinstance(kept, str):
        try:
            same = parse_quantity(str(sent)) == parse_quantity(kept)
        except ValueError:
            same = False
        return [] if same else [f"{path}: sent {sent!r}, stored {kept!r}"]
    if isinstance(sent, list):
        if not isinstance(kept, list) or len(kept) != len(sent):
            return [f"{path}: sent {sent!r}, stored {kept!r}"]
        return [d for i, (a, b) in enumerate(zip(sent, kept, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    return [] if sent == kept else [f"{path}: sent {sent!r}, stored {kept!r}"]


def stateful_set_pods(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    pods = cluster.get_json("pods", "--namespace", namespace,
                            f"--selector=tfcompile.dev/job={job}")["items"]
    return [p for p in pods if any(owner.get("kind") == "StatefulSet"
                                   for owner in p["metadata"].get("ownerReferences", []))]


def expected_pod_count(objects: list[KubernetesObject]) -> int:
    return sum(int(o["spec"].get("replicas", 1)) for o in objects if o["kind"] == "StatefulSet")


@dataclass(frozen=True)
class Deployed:
    job: str
    namespace: str
    objects: list[KubernetesObject]


def deploy(cluster: Cluster, job: str, directory: Path, *others: Path) -> Deployed:
    namespace = cluster.fresh_namespace()
    for prerequisite in PREREQUISITES.get(job, []):
        cluster.kubectl("apply", "--namespace", namespace, "--filename=-",
                        input_text=json.dumps(prerequisite))
    objects = in_namespace(rendered(directory), namespace)
    everything = objects + [o for other in others for o in in_namespace(rendered(other), namespace)]
    apply(cluster, everything, namespace)
    return Deployed(job, namespace, objects)


@pytest.fixture(scope="module", params=JOBS)
def deployed(request: pytest.FixtureRequest, cluster: Cluster) -> Iterator[Deployed]:
    job = str(request.param)
    result = deploy(cluster, job, OUTPUT / job)
    wait_for(f"the StatefulSet controller to create the pods of {job}",
             lambda: len(stateful_set_pods(cluster, result.namespace, job))
             == expected_pod_count(result.objects), WAIT_SECONDS)
    yield result
    cluster.kubectl("delete", "namespace", result.namespace, "--wait=false")


def test_what_is_stored_is_what_was_sent(cluster: Cluster, deployed: Deployed) -> None:
    found = {
        f"{o['kind']}/{o['metadata']['name']}":
            differences(o, stored(cluster, o, deployed.namespace))
        for o in deployed.objects
    }
    assert {name: d for name, d in found.items() if d} == {}


def test_the_statefulset_controller_creates_the_pods_tf_config_names(
    cluster: Cluster, deployed: Deployed
) -> None:
    namespace = deployed.namespace
    pods = stateful_set_pods(cluster, namespace, deployed.job)
    config_maps = {c["metadata"]["name"]: c.get("data") or {}
                   for c in cluster.get_json("configmaps", "--namespace", namespace)["items"]}
    secrets = {(s["metadata"]["name"], key): base64.b64decode(value).decode()
               for s in cluster.get_json("secrets", "--namespace", namespace)["items"]
               for key, value in (s.get("data") or {}).items()}
    services = {s["metadata"]["name"]: s
                for s in cluster.get_json("services", "--namespace", namespace)["items"]}
    assert pods, f"no pods of {deployed.job}"
    hosts: set[str] = set()
    for pod in pods:
        metadata, spec = pod["metadata"], pod["spec"]
        name, labels = metadata["name"], metadata["labels"]
        ordinal = name.rsplit("-", 1)[1]
        assert labels["apps.kubernetes.io/pod-index"] == ordinal, name
        assert spec["hostname"] == name
        service = services[spec["subdomain"]]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"].items() <= labels.items()
        container = next(c for c in spec["containers"] if c["name"] == "tensorflow")
        environment = build_environment(
            container,
            DownwardApi(name=name, namespace=namespace, labels=labels,
                        annotations=metadata.get("annotations") or {},
                        service_account_name=spec.get("serviceAccountName", "default"),
                        containers={c["name"]: c for c in spec["containers"]}),
            EnvironmentSources(config_maps=config_maps, secrets=secrets),
        )
        assert environment.unresolved == [], name
        if "TF_CONFIG" not in environment.variables:  # a job of one pod has no cluster
            assert len(pods) == 1, f"{name}: no TF_CONFIG in a job of {len(pods)} pods"
            continue
        tf_config = json.loads(environment.variables["TF_CONFIG"])
        assert tf_config["task"] == {"type": labels["tfcompile.dev/role"], "index": int(ordinal)}
        own_host = tf_config["cluster"][tf_config["task"]["type"]][int(ordinal)]
        assert own_host.split(":")[0] == f"{name}.{spec['subdomain']}"
        hosts.update(h.split(".")[0] for role in tf_config["cluster"].values() for h in role)
    if hosts:
        assert sorted(hosts) == sorted(p["metadata"]["name"] for p in pods)


def suspended_copy(job: str, directory: Path) -> Path:
    """The example of `job` with `suspend: true`, built like the user would: returns the job's
    output."""
    jobs = directory / "jobs"
    example = example_of(job)
    shutil.copytree(EXAMPLES / example, jobs / example)
    spec = jobs / example / "job.yaml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("\nspec:\n", "\nspec:\n  suspend: true\n"), encoding="utf-8")
    built = subprocess.run(
        [TFCOMPILE, "build", str(jobs), "-o", str(directory / "output"), "--overlays",
         str(OVERLAYS)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    return directory / "output" / job


@pytest.mark.parametrize("job", JOBS)
def test_suspend_keeps_the_claim_and_prune_removes_everything(
    cluster: Cluster, job: str, tmp_path: Path
) -> None:
    other = "tf-spawner" if job != "tf-spawner" else "mnist"
    first = deploy(cluster, job, OUTPUT / job, OUTPUT / other)
    namespace = first.namespace
    others = in_namespace(rendered(OUTPUT / other), namespace)
    wait_for(f"the pods of {job}", lambda: len(stateful_set_pods(cluster, namespace, job))
             == expected_pod_count(first.objects), WAIT_SECONDS)

    suspended = in_namespace(rendered(suspended_copy(job, tmp_path)), namespace)
    apply(cluster, suspended + others, namespace)
    wait_for(f"the pods of suspended {job} to go",
             lambda: stateful_set_pods(cluster, namespace, job) == [], WAIT_SECONDS)
    claims = [o for o in first.objects if o["kind"] == "PersistentVolumeClaim"]
    for claim in claims:
        assert stored(cluster, claim, namespace)["metadata"].get("deletionTimestamp") is None

    apply(cluster, others, namespace)  # the job's directory is gone from output/

    def leftovers() -> list[str]:
        found = [f"{o['kind']}/{o['metadata']['name']}" for o in suspended
                 if cluster.kubectl("get", f"{o['kind']}/{o['metadata']['name']}",
                                    "--namespace", namespace, check=False).returncode == 0]
        owned = cluster.kubectl("get", "pods,replicasets,controllerrevisions", "--namespace",
                                namespace, f"--selector=tfcompile.dev/job={job}", "--output=name")
        return found + owned.stdout.split()

    wait_for(f"pruning {job} to leave no objects behind", lambda: leftovers() == [],
             WAIT_SECONDS)
    for kubernetes_object in others:  # the other job is untouched
        stored(cluster, kubernetes_object, namespace)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
