"""Names, TF_CONFIG and the environment every TensorFlow container gets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tfcompile.compiler.objects import names, topology
from tfcompile.spec.models import RoleName, TrainingJob
from tfcompile.spec.rules import RESERVED_ENVIRONMENT


def make_job(roles: dict[str, Any], name: str = "mnist", **spec: Any) -> TrainingJob:
    return TrainingJob.model_validate(
        {
            "apiVersion": "tfcompile.dev/v1alpha1",
            "kind": "TrainingJob",
            "metadata": {"name": name},
            "spec": {"image": "tf", "command": ["python"], "roles": roles, **spec},
        }
    )


def test_names_derive_from_the_job_name() -> None:
    assert names.object_name("mnist", "worker", "0") == "mnist-worker-0"
    assert names.role_name("mnist", RoleName.PS) == "mnist-ps"
    assert names.pod_name("mnist", RoleName.WORKER, 3) == "mnist-worker-3"
    assert names.pod_host("mnist", RoleName.WORKER, 1, 2222) == "mnist-worker-1.mnist-worker:2222"
    assert names.shared_claim_name("mnist") == "mnist-shared"
    assert names.tensorboard_name("mnist") == "mnist-tensorboard"


def test_statefulset_names_up_to_52_characters_pass_and_longer_are_refused() -> None:
    fits = make_job({"evaluator": {"replicas": 1}, "worker": {}}, name="a" * 42)
    assert list(names.check_name_lengths(fits)) == []
    too_long = make_job({"evaluator": {"replicas": 1}, "worker": {}}, name="a" * 43)
    problems = list(names.check_name_lengths(too_long))
    assert len(problems) == 1
    assert problems[0].path == ("metadata", "name")
    assert "53 characters" in problems[0].message and "at most 42" in problems[0].message


def test_the_longest_allowed_statefulset_keeps_pod_names_within_dns_labels() -> None:
    job = make_job({"ps": {"replicas": 10000}}, name="b" * 49)
    assert len(names.role_name(job.metadata.name, RoleName.PS)) == 52
    assert list(names.check_name_lengths(job)) == []
    assert len(names.pod_name(job.metadata.name, RoleName.PS, 9999)) <= 63


def test_tf_config_lists_every_role_sorted_and_uses_the_index_variable() -> None:
    job = make_job({"worker": {"replicas": 2}, "ps": {"replicas": 1},
                    "chief": {"replicas": 1}, "evaluator": {"replicas": 1}})
    template = topology.tf_config_template(job, RoleName.WORKER)
    assert '"index":$(TASK_INDEX)' in template
    expanded = json.loads(template.replace("$(TASK_INDEX)", "1"))
    assert list(expanded["cluster"]) == ["chief", "evaluator", "ps", "worker"]
    assert expanded["cluster"]["worker"] == ["mnist-worker-0.mnist-worker:2222",
                                             "mnist-worker-1.mnist-worker:2222"]
    assert expanded["task"] == {"type": "worker", "index": 1}
    assert expanded["environment"] == "cloud"
    assert " " not in template  # compact JSON


def test_roles_without_replicas_are_not_in_the_cluster() -> None:
    job = make_job({"worker": {"replicas": 2}, "evaluator": {"replicas": 0}})
    assert list(topology.cluster(job)) == ["worker"]


def test_a_job_of_one_pod_has_no_tf_config() -> None:
    single = make_job({"worker": {"replicas": 1}})
    variables = [entry["name"] for entry in topology.environment(single, RoleName.WORKER)]
    assert "TF_CONFIG" not in variables
    assert "TASK_INDEX" in variables


def test_environment_order_defines_the_index_before_its_users() -> None:
    job = make_job({"worker": {"replicas": 3}, "ps": {"replicas": 2}},
                   compatibility=["elasticdl", "tf1-flags", "tf-spawner"])
    entries = topology.environment(job, RoleName.PS)
    names_in_order = [entry["name"] for entry in entries]
    assert names_in_order == ["TASK_INDEX", "JOB_NAME", "WORKER_NUMBER", "TOT_WORKERS",
                              "NUM_WORKERS", "PS_HOSTS", "WORKER_HOSTS", "TF_CONFIG"]
    # what the spec refuses in env: these, the launcher's revision, and a trial's two
    assert (*names_in_order, "TFCOMPILE_REVISION", "TFCOMPILE_TRIAL",
            "TFCOMPILE_RESULT_FILE") == RESERVED_ENVIRONMENT
    values = {entry["name"]: entry.get("value") for entry in entries}
    assert entries[0]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}}
    assert values["JOB_NAME"] == "ps"
    assert values["WORKER_NUMBER"] == "$(TASK_INDEX)"
    assert values["TOT_WORKERS"] == values["NUM_WORKERS"] == "3"
    assert values["PS_HOSTS"] == "mnist-ps-0.mnist-ps:2222,mnist-ps-1.mnist-ps:2222"
    assert str(values["WORKER_HOSTS"]).count(",") == 2


@pytest.mark.parametrize(("asked", "variables"), [
    ([], []),
    (["tf-spawner"], ["WORKER_NUMBER", "TOT_WORKERS"]),
    (["elasticdl"], ["NUM_WORKERS"]),
    (["tf1-flags"], ["JOB_NAME", "PS_HOSTS", "WORKER_HOSTS"]),
    (["tf1-flags", "elasticdl"], ["JOB_NAME", "NUM_WORKERS", "PS_HOSTS", "WORKER_HOSTS"]),
], ids=["none", "tf-spawner", "elasticdl", "tf1-flags", "two"])
def test_compatibility_variables_are_set_only_for_the_tools_a_job_names(
        asked: list[str], variables: list[str]) -> None:
    job = make_job({"worker": {"replicas": 3}, "ps": {"replicas": 2}}, compatibility=asked)
    names_in_order = [entry["name"] for entry in topology.environment(job, RoleName.WORKER)]
    assert names_in_order == ["TASK_INDEX", *variables, "TF_CONFIG"]


def test_the_port_reaches_every_host() -> None:
    job = make_job({"worker": {"replicas": 2}}, port=5000)
    assert all(host.endswith(":5000") for host in topology.cluster(job)["worker"])


def test_tf_config_size_counts_the_expanded_value_and_says_how_many_tasks_fit() -> None:
    fits = make_job({"worker": {"replicas": 1000}}, name="c" * 40)
    assert list(topology.check_tf_config_size(fits)) == []
    too_big = make_job({"worker": {"replicas": 1500}}, name="c" * 40)
    problems = list(topology.check_tf_config_size(too_big))
    assert len(problems) == 1
    message = problems[0].message
    fitting = int(message.split("about ")[1].split(" tasks fit")[0])
    assert 1000 <= fitting < 1500
    exact = make_job({"worker": {"replicas": fitting}}, name="c" * 40)
    assert list(topology.check_tf_config_size(exact)) == []
