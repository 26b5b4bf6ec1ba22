"""Gang objects on a real API server with each gang scheduler's own CRDs installed.

tests/test_gang_scheduling.py checks the compiled gang objects against each project's schemas in
Python; this asks the API server. The projects' CRDs come from their Go modules (the Go module
cache, never committed), are installed while this module runs and deleted after it, so the other
cluster tests see a cluster without them. Each job is compiled by `tfcompile build`, passes
`tfcompile validate --server`, and is applied server-side (strict field validation) into a fresh
namespace that enforces Pod Security "restricted". No gang scheduler or Kueue controller runs:
what is checked is that the API accepts the objects and keeps what the schedulers read.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.cluster.conftest import Cluster
from tests.cluster.waiting import wait_for
from tests.go_modules import (
    KUEUE,
    coscheduling_pod_group_label,
    go_string_constant,
    go_struct_schema,
    kueue_crd_files,
    kueue_names,
    module_directory,
    scheduler_plugins_crd_file,
    volcano_source,
)
from tests.test_gang_scheduling import JOB_NAME, gang_job

pytestmark = pytest.mark.cluster

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")
FIELD_MANAGER = "gitops-controller"
ROLES = {"chief": 1, "worker": 3, "ps": 2}
EVERY_POD = sum(ROLES.values())
WAIT_SECONDS = 60.0


def volcano_crd(kind: str, plural: str) -> dict[str, Any]:
    """A CRD for one of Volcano's `scheduling` kinds, derived from its Go types.

    volcano.sh/apis ships Go types but no CRD file, and the module that does (volcano.sh/volcano)
    cannot be downloaded as a Go module; so the CRD is what can be had: group and version from
    register.go, scope from the `+genclient:nonNamespaced` marker, and a structural schema of the
    spec's fields and their scalar types. Undeclared spec fields are refused by strict field
    validation as with the real CRD; the insides of map and struct fields are not checked.
    """
    source = volcano_source()
    types = (source / "types.go").read_text()
    markers = re.search(rf"((?:^//[^\n]*\n)*)^type {kind} struct", types, re.MULTILINE)
    assert markers is not None, f"no type {kind} in {source / 'types.go'}"
    scope = "Cluster" if "+genclient:nonNamespaced" in markers.group(1) else "Namespaced"
    spec = go_struct_schema(source / "types.go", f"{kind}Spec")
    properties = {
        name: ({"type": "object", "x-kubernetes-preserve-unknown-fields": True}
               if field["type"] == "object" else field)
        for name, field in spec["properties"].items()
    }
    group = go_string_constant(source / "register.go", "GroupName")
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower()},
            "scope": scope,
            "versions": [{
                "name": "v1beta1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": properties},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }}},
            }],
        },
    }


def crd_documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> Iterator[None]:
    """Every project's CRDs installed and Established; deleted when the module is done."""
    definitions = [crd for path in [*kueue_crd_files(), scheduler_plugins_crd_file()]
                   for crd in crd_documents(path)]
    definitions += [volcano_crd("PodGroup", "podgroups"), volcano_crd("Queue", "queues")]
    names = [f"customresourcedefinition/{crd['metadata']['name']}" for crd in definitions]
    try:
        cluster.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                        "--filename=-",
                        input_text="\n".join(json.dumps(crd) for crd in definitions))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
        yield
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "--timeout=60s", *names,
                        check=False)


def tfcompile(cluster: Cluster, *arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TFCOMPILE, *arguments], capture_output=True, text=True, check=False,
                          env=cluster.environment, cwd=cwd, timeout=300)


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = cluster.fresh_namespace()
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def build_validate_apply(cluster: Cluster, root: Path, namespace: str,
                         scheduling: str) -> None:
    """Compile a job with `scheduling` into `namespace`, validate it on the server, sync it."""
    job = root / "jobs" / JOB_NAME
    job.mkdir(parents=True)
    roles = "\n".join(f"{role}: {{replicas: {count}}}" for role, count in ROLES.items())
    (job / "job.yaml").write_text(gang_job(scheduling, namespace, roles), encoding="utf-8")
    built = tfcompile(cluster, "build", "jobs", "-o", "output", cwd=root)
    assert built.returncode == 0, built.stderr
    output = root / "output" / JOB_NAME

    validated = tfcompile(cluster, "validate", "--server", str(output), cwd=root)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "no problems" in validated.stdout, validated.stdout

    manifests = cluster.kubectl("kustomize", str(output)).stdout
    cluster.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                    "--namespace", namespace, "--filename=-", input_text=manifests)


def refuses_a_misspelt_field(cluster: Cluster, group: dict[str, Any]) -> None:
    """The CRD's schema is in force: the API server refuses a field it does not declare."""
    misspelt = {"apiVersion": group["apiVersion"], "kind": group["kind"],
                "metadata": {key: group["metadata"][key] for key in ("name", "namespace")},
                "spec": {"minMembers": EVERY_POD}}
    refused = cluster.kubectl("apply", "--server-side", "--dry-run=server",
                              f"--field-manager={FIELD_MANAGER}", "--filename=-",
                              input_text=json.dumps(misspelt), check=False)
    assert refused.returncode != 0, refused.stdout
    assert ".spec.minMembers: field not declared in schema" in refused.stderr, refused.stderr


def stateful_sets(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get_json(
        "statefulsets", "--namespace", namespace, f"--selector=tfcompile.dev/job={JOB_NAME}",
    )["items"]
    assert sorted(item["metadata"]["name"] for item in items) == sorted(
        f"{JOB_NAME}-{role}" for role in ROLES)
    return items


def pods_when_all_created(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    """The job's pods once the StatefulSet controller created every one (Pod Security admission
    judges pods, so this is where "restricted" is enforced); no scheduler places them."""
    def pods() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = cluster.get_json(
            "pods", "--namespace", namespace, f"--selector=tfcompile.dev/job={JOB_NAME}",
        )["items"]
        return found

    def all_created() -> list[dict[str, Any]] | None:
        found = pods()
        return found if len(found) == EVERY_POD else None

    def created() -> str:
        events = cluster.kubectl("get", "events", "--namespace", namespace).stdout
        return f"{len(pods())} of {EVERY_POD} pods were created:\n{events}"

    return wait_for(f"all {EVERY_POD} pods of the job", all_created, WAIT_SECONDS, created)


@pytest.mark.usefixtures("crds")
def test_volcano_pod_group_is_accepted_with_every_pod(
    cluster: Cluster, namespace: str, tmp_path: Path,
) -> None:
    source = volcano_source()
    annotation = go_string_constant(source / "labels.go", "KubeGroupNameAnnotationKey")
    cluster.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "--filename=-",
                    input_text=json.dumps({
                        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                        "metadata": {"name": f"gpu-queue-{namespace}"}, "spec": {"weight": 1},
                    }))
    try:
        build_validate_apply(cluster, tmp_path, namespace,
                             f"{{gang: volcano, queue: gpu-queue-{namespace}}}")

        group = cluster.get_json(f"podgroups.scheduling.volcano.sh/{JOB_NAME}",
                                 "--namespace", namespace)
        assert group["spec"] == {"minMember": EVERY_POD, "queue": f"gpu-queue-{namespace}"}
        refuses_a_misspelt_field(cluster, group)
        for item in stateful_sets(cluster, namespace):
            template = item["spec"]["template"]
            assert template["metadata"]["annotations"][annotation] == JOB_NAME
            assert template["spec"]["schedulerName"] == "volcano"
        for pod in pods_when_all_created(cluster, namespace):
            assert pod["metadata"]["annotations"][annotation] == JOB_NAME
            assert pod["spec"]["schedulerName"] == "volcano"
    finally:
        cluster.kubectl("delete", f"queues.scheduling.volcano.sh/gpu-queue-{namespace}",
                        "--ignore-not-found", check=False)


@pytest.mark.usefixtures("crds")
def test_coscheduling_pod_group_is_accepted_with_every_pod(
    cluster: Cluster, namespace: str, tmp_path: Path,
) -> None:
    label = coscheduling_pod_group_label()
    build_validate_apply(cluster, tmp_path, namespace, "{gang: coscheduling}")

    group = cluster.get_json(f"podgroups.scheduling.x-k8s.io/{JOB_NAME}", "--namespace", namespace)
    assert group["spec"]["minMember"] == EVERY_POD
    refuses_a_misspelt_field(cluster, group)
    for item in stateful_sets(cluster, namespace):
        template = item["spec"]["template"]
        assert template["metadata"]["labels"][label] == JOB_NAME
        assert template["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    for pod in pods_when_all_created(cluster, namespace):
        assert pod["metadata"]["labels"][label] == JOB_NAME


@pytest.mark.usefixtures("crds")
def test_kueue_pod_group_labels_are_accepted_next_to_its_queues(
    cluster: Cluster, namespace: str, tmp_path: Path,
) -> None:
    names = kueue_names()
    cluster_queue = f"cluster-{namespace}"
    # The level the job names is a node label of a Kueue Topology, which the queue's
    # ResourceFlavor names: both are checked by Kueue's CRDs (their schemas and CEL rules).
    rack = "cloud.provider.com/topology-rack"
    required = go_string_constant(
        module_directory(KUEUE) / "apis" / "kueue" / "v1beta2" / "topology_types.go",
        "PodSetRequiredTopologyAnnotation")
    queues = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
         "metadata": {"name": cluster_queue},
         "spec": {"levels": [{"nodeLabel": "cloud.provider.com/topology-block"},
                             {"nodeLabel": rack}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": cluster_queue},
         "spec": {"nodeLabels": {"pool": "training"}, "topologyName": cluster_queue}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": cluster_queue},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory"],
             "flavors": [{"name": cluster_queue, "resources": [
                 {"name": "cpu", "nominalQuota": "64"},
                 {"name": "memory", "nominalQuota": "256Gi"}]}],
         }]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "team-a", "namespace": namespace},
         "spec": {"clusterQueue": cluster_queue}},
    ]
    cluster.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "--filename=-",
                    input_text="\n".join(json.dumps(item) for item in queues))
    try:
        build_validate_apply(cluster, tmp_path, namespace,
                             f"{{gang: kueue, queue: team-a, topology: {{required: {rack}}}}}")

        local_queue = cluster.get_json("localqueues.kueue.x-k8s.io/team-a",
                                       "--namespace", namespace)
        assert local_queue["spec"]["clusterQueue"] == cluster_queue
        for item in stateful_sets(cluster, namespace):
            # On a StatefulSet, the queue label would make Kueue admit each role on its own.
            assert not any(key.startswith("kueue.x-k8s.io/")
                           for key in item["metadata"].get("labels", {}))
            metadata = item["spec"]["template"]["metadata"]
            assert metadata["labels"][names.queue_label] == "team-a"
            assert metadata["labels"][names.group_label] == JOB_NAME
            assert metadata["annotations"][names.total_count] == str(EVERY_POD)
            # No scheduler of its own: Kueue gates the pods, the default scheduler places them.
            assert item["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"
        for pod in pods_when_all_created(cluster, namespace):
            assert pod["metadata"]["labels"][names.queue_label] == "team-a"
            assert pod["metadata"]["labels"][names.group_label] == JOB_NAME
            assert pod["metadata"]["annotations"][names.total_count] == str(EVERY_POD)
            # Every pod of the gang asks Kueue for one rack.
            assert pod["metadata"]["annotations"][required] == rack
    finally:
        cluster.kubectl("delete", f"clusterqueues.kueue.x-k8s.io/{cluster_queue}",
                        f"resourceflavors.kueue.x-k8s.io/{cluster_queue}",
                        f"topologies.kueue.x-k8s.io/{cluster_queue}", "--ignore-not-found",
                        "--wait=false", check=False)
