"""`validate --server` and `status` say when the cluster does not enforce the launcher policy
this tfcompile writes, and what a job's pods may do then (the notes are judged here from what a
cluster would answer; tests/cluster/test_validate_server.py asks a real API server)."""

from __future__ import annotations

import copy
from typing import Any

from tfcompile.compiler.checking.launcher_policy_check import (
    Found,
    Lookup,
    launcher_policy_notes,
)
from tfcompile.compiler.objects.builders.launcher_policy import launcher_policy_objects

WHAT_PODS_MAY_DO = "may then write any task's record in their job's state (a forged success"


def served(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The objects as the API server returns them: with the fields it defaults."""
    found = {}
    for item in copy.deepcopy(objects):
        spec = item["spec"]
        if item["kind"] == "ValidatingAdmissionPolicy":
            spec["matchConstraints"]["matchPolicy"] = "Equivalent"
            spec["matchConstraints"]["namespaceSelector"] = {}
            spec["matchConstraints"]["objectSelector"] = {}
            for rule in spec["matchConstraints"]["resourceRules"]:
                rule["scope"] = "*"
        item["metadata"]["uid"] = "0f0e"
        item["status"] = {"observedGeneration": 1}
        found[(item["kind"], item["metadata"]["name"])] = item
    return found


def lookup_in(cluster: dict[tuple[str, str], dict[str, Any]],
              answer: Found = Found.MISSING) -> Lookup:
    def lookup(kind: str, name: str) -> tuple[Found, dict[str, Any] | None]:
        item = cluster.get((kind, name))
        return (Found.PRESENT, item) if item is not None else (answer, None)

    return lookup


def test_a_cluster_with_this_versions_policy_gets_no_note() -> None:
    assert launcher_policy_notes(lookup_in(served(launcher_policy_objects()))) == []


def test_a_missing_binding_says_what_pods_may_do_and_how_to_apply_the_policy() -> None:
    cluster = served(launcher_policy_objects())
    del cluster[("ValidatingAdmissionPolicyBinding", "tfcompile-launcher-records")]
    (note,) = launcher_policy_notes(lookup_in(cluster))
    assert note.startswith("the cluster lacks the launcher policy "
                           "(ValidatingAdmissionPolicyBinding tfcompile-launcher-records): a "
                           "job's pods")
    assert WHAT_PODS_MAY_DO in note
    assert "scale its StatefulSets to any number of replicas" in note
    assert "kubectl apply --server-side -f deploy/cluster/launcher-policy.yaml" in note


def test_a_cluster_without_any_of_it_names_all_four_objects() -> None:
    (note,) = launcher_policy_notes(lookup_in({}))
    assert note.count("tfcompile-launcher-") == 4


def test_an_older_or_edited_policy_is_named() -> None:
    cluster = served(launcher_policy_objects())
    policy = cluster[("ValidatingAdmissionPolicy", "tfcompile-launcher-scale")]
    policy["spec"]["matchConditions"][0]["expression"] = "false"
    binding = cluster[("ValidatingAdmissionPolicyBinding", "tfcompile-launcher-records")]
    binding["spec"]["validationActions"] = ["Warn"]
    (note,) = launcher_policy_notes(lookup_in(cluster))
    assert note.startswith("the cluster's launcher policy (ValidatingAdmissionPolicy "
                           "tfcompile-launcher-scale, ValidatingAdmissionPolicyBinding "
                           "tfcompile-launcher-records) is not the one this tfcompile writes")


def test_a_context_that_may_not_read_policies_is_told_it_is_unknown() -> None:
    (note,) = launcher_policy_notes(lookup_in({}, Found.FORBIDDEN))
    assert note.startswith("this context may not read ValidatingAdmissionPolicy")
    assert "is unknown; without it a job's pods" in note


def test_a_cluster_before_admission_policies_says_it_cannot_be_enforced() -> None:
    (note,) = launcher_policy_notes(lookup_in({}, Found.NO_API))
    assert note.startswith("the cluster serves no ValidatingAdmissionPolicy of "
                           "admissionregistration.k8s.io/v1 (Kubernetes 1.30 or later has it)")
    assert WHAT_PODS_MAY_DO in note
