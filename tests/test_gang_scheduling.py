"""Gang scheduling: one gang for every pod of a job, in each scheduler's own vocabulary, checked
against that project's own sources (CRDs, Go types and constants fetched at test time)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

from tests.conftest import Result, job_text
from tests.go_modules import (
    KUEUE,
    SCHEDULER_PLUGINS,
    coscheduling_pod_group_label,
    go_string_constant,
    go_struct_schema,
    kueue_names,
    module_directory,
    scheduler_plugins_crd_file,
    volcano_source,
)
from tfcompile.compiler.objects.compile import build_objects
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.spec.loading import load_jobs

JOB_NAME = "gang"
ROLES = ("gang-chief", "gang-worker", "gang-ps")


def gang_job(scheduling: str, namespace: str = "research",
             roles: str = "chief: {replicas: 1}\nworker: {replicas: 3, gpus: 1}\n"
                          "ps: {replicas: 2}") -> str:
    """The job `gang` in `namespace`, its pods one gang under `scheduling`."""
    return job_text(JOB_NAME, metadata_lines=f"namespace: {namespace}",
                    spec_lines=f"scheduling: {scheduling}", roles=roles)


def compile_with(tmp_path: Path, scheduling: str) -> list[dict[str, Any]]:
    path = tmp_path / "job.yaml"
    path.write_text(gang_job(scheduling))
    (loaded,) = load_jobs(path)
    return build_objects(loaded, shipped_launcher())


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [item for item in objects if item["kind"] == kind]


def strict(schema: Any) -> Any:
    """A CRD's structural schema as the API server's strict field validation applies it:
    fields a schema does not declare are errors."""
    if isinstance(schema, dict):
        result = {key: strict(value) for key, value in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            result["additionalProperties"] = False
        return result
    if isinstance(schema, list):
        return [strict(value) for value in schema]
    return schema


def crd_schema(crd_file: Path, version: str) -> dict[str, Any]:
    crd = YAML(typ="safe").load(crd_file.read_text())
    (served,) = [entry for entry in crd["spec"]["versions"] if entry["name"] == version]
    schema: dict[str, Any] = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


@pytest.mark.slow
def test_volcano_gets_one_pod_group_of_every_pod(tmp_path: Path) -> None:
    objects = compile_with(tmp_path, "{gang: volcano, queue: gpu-queue}")
    (group,) = of_kind(objects, "PodGroup")
    source = volcano_source()
    group_name = go_string_constant(source / "register.go", "GroupName")
    assert group["apiVersion"] == f"{group_name}/v1beta1"
    # No CRD file ships with volcano.sh/apis: the schema is derived from its Go types.
    jsonschema.validate(group["spec"], go_struct_schema(source / "types.go", "PodGroupSpec"))
    assert group["spec"] == {"minMember": 6, "queue": "gpu-queue"}
    assert group["metadata"]["name"] == "gang"
    assert group["metadata"]["namespace"] == "research"
    annotation = go_string_constant(source / "labels.go", "KubeGroupNameAnnotationKey")
    sets = of_kind(objects, "StatefulSet")
    assert [item["metadata"]["name"] for item in sets] == list(ROLES)
    for item in sets:
        template = item["spec"]["template"]
        assert template["metadata"]["annotations"][annotation] == "gang"
        assert template["spec"]["schedulerName"] == "volcano"
        assert item["spec"]["podManagementPolicy"] == "Parallel"


def test_pod_groups_come_a_sync_wave_before_the_rest_of_the_job(tmp_path: Path) -> None:
    """Argo CD applies kinds it does not know after known ones of the same wave: the group's
    earlier wave makes it exist before the StatefulSets' pods (tests/gitops/ shows it)."""
    for scheduling in ("{gang: volcano}", "{gang: coscheduling}"):
        (group,) = of_kind(compile_with(tmp_path, scheduling), "PodGroup")
        assert group["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "-1"
    path = tmp_path / "job.yaml"
    path.write_text(gang_job("{gang: volcano}").replace(
        "  namespace: research\n",
        "  namespace: research\n  annotations: {argocd.argoproj.io/sync-wave: '-3'}\n"))
    (loaded,) = load_jobs(path)
    objects = build_objects(loaded, shipped_launcher())
    (group,) = of_kind(objects, "PodGroup")
    assert group["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "-4"
    assert {item["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
            for item in of_kind(objects, "StatefulSet")} == {"-3"}


@pytest.mark.slow
def test_coscheduling_gets_its_pod_group_and_pod_label(tmp_path: Path) -> None:
    objects = compile_with(tmp_path, "{gang: coscheduling}")
    (group,) = of_kind(objects, "PodGroup")
    plugins = module_directory(SCHEDULER_PLUGINS)
    schema = crd_schema(scheduler_plugins_crd_file(), "v1alpha1")
    jsonschema.validate(group, schema)
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["spec"] == {"minMember": 6}
    label = coscheduling_pod_group_label()
    values = YAML(typ="safe").load(
        (plugins / "manifests" / "install" / "charts" / "as-a-second-scheduler" /
         "values.yaml").read_text())
    for item in of_kind(objects, "StatefulSet"):
        template = item["spec"]["template"]
        assert template["metadata"]["labels"][label] == "gang"
        assert template["spec"]["schedulerName"] == values["scheduler"]["name"]
    # A misspelt field would be refused by the CRD's strict schema.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**group, "spec": {"minMembers": 6}}, schema)


@pytest.mark.slow
def test_kueue_gets_one_pod_group_across_all_roles(tmp_path: Path) -> None:
    objects = compile_with(tmp_path, "{gang: kueue, queue: team-a}")
    assert not of_kind(objects, "PodGroup")
    kueue = module_directory(KUEUE)
    names = kueue_names()
    for item in of_kind(objects, "StatefulSet"):
        # On the StatefulSet, the queue label would make Kueue admit each role on its own.
        assert names.queue_label not in item["metadata"]["labels"]
        metadata = item["spec"]["template"]["metadata"]
        assert metadata["labels"][names.queue_label] == "team-a"
        assert metadata["labels"][names.group_label] == "gang"
        assert metadata["annotations"][names.total_count] == "6"
        assert metadata["annotations"][names.serving] == names.serving_value
        assert "schedulerName" not in item["spec"]["template"]["spec"]
    # The LocalQueue the label names is a Kueue object; its name must be one Kueue accepts.
    local_queue = YAML(typ="safe").load(
        (kueue / "config" / "components" / "crd" / "bases" /
         "kueue.x-k8s.io_localqueues.yaml").read_text())
    assert local_queue["spec"]["names"]["kind"] == "LocalQueue"


@pytest.mark.slow
@pytest.mark.parametrize(("level", "constant"), [
    ("required", "PodSetRequiredTopologyAnnotation"),
    ("preferred", "PodSetPreferredTopologyAnnotation"),
])
def test_kueue_topology_is_on_every_pod_in_kueues_words(
    tmp_path: Path, level: str, constant: str,
) -> None:
    label = "cloud.provider.com/topology-rack"
    objects = compile_with(tmp_path, f"{{gang: kueue, queue: team-a, topology: {{{level}: "
                                     f"{label}}}}}")
    kueue = module_directory(KUEUE)
    key = go_string_constant(kueue / "apis" / "kueue" / "v1beta2" / "topology_types.go",
                             constant)
    for item in of_kind(objects, "StatefulSet"):
        assert item["spec"]["template"]["metadata"]["annotations"][key] == label
        assert key not in item["metadata"].get("annotations", {})
    # Kueue copies the level into its Workload's pod sets, and a Topology names it by node label:
    # what a job may say must fit both CRDs (the Workload keeps at most 63 characters).
    crds = kueue / "config" / "components" / "crd" / "bases"
    workload = crd_schema(crds / "kueue.x-k8s.io_workloads.yaml", "v1beta2")
    request = workload["properties"]["spec"]["properties"]["podSets"]["items"]["properties"][
        "topologyRequest"]
    topology = crd_schema(crds / "kueue.x-k8s.io_topologies.yaml", "v1beta2")
    longest = "a" * 63
    for value in (label, longest):
        compile_with(tmp_path, f"{{gang: kueue, queue: team-a, topology: {{{level}: {value}}}}}")
        jsonschema.validate({level: value}, request)
        jsonschema.validate({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
                             "metadata": {"name": "racks"},
                             "spec": {"levels": [{"nodeLabel": value}]}}, topology)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({level: longest + "a"}, request)
    (tmp_path / "job.yaml").write_text(gang_job(
        f"{{gang: kueue, queue: team-a, topology: {{{level}: {longest}a}}}}"))
    with pytest.raises(Exception, match="at most 63"):
        load_jobs(tmp_path / "job.yaml")


@pytest.mark.parametrize(
    ("scheduling", "field", "says"),
    [
        ("{gang: kueue}", "spec.scheduling", "set scheduling.queue"),
        ("{gang: coscheduling, queue: a}", "spec.scheduling.queue", "has no queues"),
        ("{queue: a}", "spec.scheduling.queue", "set scheduling.gang"),
        ("{gang: yunikorn}", "spec.scheduling.gang", "volcano"),
    ],
)
def test_scheduling_mistakes(write_job: Callable[..., Path], run_cli: Callable[..., Result],
                             tmp_path: Path, scheduling: str, field: str, says: str) -> None:
    result = run_cli("build", str(write_job(gang_job(scheduling))),
                     "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert any(f": {field}: " in line and says in line for line in result.stderr.splitlines()), \
        result.stderr


def test_scheduler_name_in_a_pod_template_points_at_scheduling(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    text = gang_job("{gang: volcano}") + "  podTemplate: {spec: {schedulerName: volcano}}\n"
    result = run_cli("build", str(write_job(text)), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert "spec.podTemplate.spec.schedulerName: not allowed in podTemplate: set " \
           "spec.scheduling" in result.stderr


@pytest.mark.parametrize(
    ("scheduling", "requires"),
    [
        ("{gang: volcano, queue: gpu-queue}", "requires: Queue/gpu-queue: used by PodGroup/gang"),
        ("{gang: kueue, queue: team-a}",
         "requires: LocalQueue/team-a in namespace research: used by StatefulSet/gang-chief, "
         "StatefulSet/gang-ps, StatefulSet/gang-worker"),
    ],
)
def test_validate_lists_the_queue_to_create_first(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
    scheduling: str, requires: str,
) -> None:
    output = tmp_path / "out"
    assert run_cli("build", str(write_job(gang_job(scheduling))), "-o",
                   str(output)).status == 0
    result = run_cli("validate", str(output / "gang"))
    assert result.status == 0, result.stdout
    assert requires in result.stdout
