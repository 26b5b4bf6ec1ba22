"""The admission policies `init` writes, evaluated offline as the API server evaluates them, on
the requests tests/cluster/test_launcher_policy.py sends to a real one: the fast tier catches a
policy that admits what it should refuse (a pod scaling its job to 1, another task's record)
without a control plane.

The expressions are read from the files `init` writes (deploy/cluster/launcher-policy.yaml and
deploy/flux/training-jobs.yaml), never typed again here, and run in cel-cpp's CEL
(tests/admission_cel.py). A policy weakened in memory must make a table fail: the tables are
only worth what they catch. Of Flux's MutatingAdmissionPolicy only the match conditions run
here, which decide the updates it touches: its mutation builds a typed object
(`Object{spec: Object.spec{replicas: 0}}`) that only the API server's schemas give types to.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.admission_cel import Failed, Refusal, mutating_match, validating_decision
from tests.launcher_policy_cases import (
    ADMITTED,
    MATCHED,
    NOT_MATCHED,
    Case,
    compiled_job,
    keep_released_cases,
    records_cases,
    scale_cases,
)
from tfcompile.compiler.objects.names import (
    LAUNCHER_POLICY_FILE,
    LAUNCHER_RECORDS_POLICY,
    LAUNCHER_SCALE_POLICY,
)
from tfcompile.compiler.scaffold.repository import scaffold

FLUX_FILE = "deploy/flux/training-jobs.yaml"
KEEP_RELEASED = "tfcompile-keep-released-jobs"

Policies = dict[str, dict[str, Any]]
Tables = dict[str, list[Case]]


def written_policies() -> Policies:
    """Every admission policy in the files `init` writes, by name."""
    files = scaffold("tfcompile")
    policies = {}
    for path in (LAUNCHER_POLICY_FILE, FLUX_FILE):
        for document in YAML(typ="safe").load_all(files[path]):
            if document["kind"] in ("ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"):
                policies[document["metadata"]["name"]] = document
    return policies


@pytest.fixture(scope="module")
def policies() -> Policies:
    return written_policies()


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Tables:
    directory = tmp_path_factory.mktemp("jobs")
    first = compiled_job(directory / "first", "first")
    second = compiled_job(directory / "second", "second")
    rebuilt = compiled_job(directory / "rebuilt", "first", "  env: {EPOCHS: '9'}\n")
    return {LAUNCHER_SCALE_POLICY: scale_cases(first, second),
            LAUNCHER_RECORDS_POLICY: records_cases(first, second),
            KEEP_RELEASED: keep_released_cases(first, rebuilt)}


def outcome(policy: dict[str, Any], case: Case) -> str:
    """What the server does with `case.request`: a word, or its refusal's message."""
    if policy["kind"] == "MutatingAdmissionPolicy":
        matched = mutating_match(policy, case.request)
        if isinstance(matched, Failed):
            return f"match condition failed: {matched.message}"
        return MATCHED if matched else NOT_MATCHED
    decision = validating_decision(policy, case.request)
    if not decision.matched:
        return NOT_MATCHED
    return ADMITTED if decision.admitted else decision.messages[0]


def agrees(found: str, expected: str) -> bool:
    if expected in (ADMITTED, NOT_MATCHED, MATCHED):
        return found == expected
    return found.startswith(expected)


def mismatches(policies: Policies, tables: Tables) -> list[str]:
    """Every case whose outcome is not the one expected, said with both."""
    return [f"{name}: {case.description}: expected {case.expected!r}, got {found!r}"
            for name, cases in tables.items() for case in cases
            if not agrees(found := outcome(policies[name], case), case.expected)]


def test_init_writes_the_three_policies(policies: Policies) -> None:
    assert set(policies) == {LAUNCHER_SCALE_POLICY, LAUNCHER_RECORDS_POLICY,
                                       KEEP_RELEASED}


@pytest.mark.parametrize("name", [LAUNCHER_SCALE_POLICY, LAUNCHER_RECORDS_POLICY, KEEP_RELEASED])
def test_the_policy_decides_every_case_as_the_api_server_must(
        policies: Policies, tables: Tables, name: str) -> None:
    assert mismatches(policies, {name: tables[name]}) == []


@pytest.mark.parametrize("name", [LAUNCHER_SCALE_POLICY, LAUNCHER_RECORDS_POLICY])
def test_every_validation_refuses_some_case_first(policies: Policies, tables: Tables,
                                                  name: str) -> None:
    """Each validation is the reason for at least one refusal: none stands untested behind
    another."""
    policy = policies[name]
    first: set[int | None] = set()
    for case in tables[name]:
        refusals: list[Refusal] = validating_decision(policy, case.request).refusals
        if refusals:
            first.add(refusals[0].validation)
    assert first == set(range(len(policy["spec"]["validations"])))


def _expressions(policy: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = policy["spec"]
    for part in ("matchConditions", "variables", "validations"):
        yield from spec.get(part, [])


def weakened(policies: Policies, name: str, strong: str, weak: str) -> Policies:
    """A copy of `policies` whose policy `name` says `weak` where it said `strong`, once."""
    copied = copy.deepcopy(policies)
    places = [item for item in _expressions(copied[name]) if strong in item["expression"]]
    assert len(places) == 1 and places[0]["expression"].count(strong) == 1, strong
    places[0]["expression"] = places[0]["expression"].replace(strong, weak)
    return copied


WEAKENINGS: list[tuple[str, str, str, str]] = [
    (LAUNCHER_SCALE_POLICY, "orValue(0) == 0", "orValue(0) <= 1", "1 -> 1"),
    (LAUNCHER_SCALE_POLICY, "request.name == variables.job + '-' + role",
     "request.name.endsWith('-' + role)", "another job's StatefulSet"),
    (LAUNCHER_SCALE_POLICY, "variables.suffix != '' && variables.job != ''", "true",
     "kubectl create token first-launcher token, to 0"),
    (LAUNCHER_RECORDS_POLICY, "request.userInfo.username.startsWith('system:serviceaccount:' "
     "+ request.namespace + ':') ||", "", "kubectl create token trainer token"),
    (LAUNCHER_RECORDS_POLICY, "[object, oldObject].exists", "[object].exists",
     "deleting the state"),
    (LAUNCHER_RECORDS_POLICY, "variables.old.all(key, key in variables.new) &&", "",
     "removing its record"),
    (LAUNCHER_RECORDS_POLICY, "size(bytes(variables.new['result']))",
     "size(variables.new['result'])", "the result"),
    (LAUNCHER_RECORDS_POLICY, "<= 256", "<= 257", "progress {'worker-0.progress': 'xxx"),
    (LAUNCHER_RECORDS_POLICY, "'failed ' + variables.new['failed-revision'] + ' '", "'failed '",
     "a summary saying {'failed-revision'"),
    (KEEP_RELEASED, "object.spec.template == oldObject.spec.template", "true",
     "a committed change to the pods"),
]
"""Policies a reviewer might let through, each with (the start of) a case that catches it."""


@pytest.mark.parametrize(("name", "strong", "weak", "catching"), WEAKENINGS,
                         ids=[f"{name}: {strong[:48]}" for name, strong, _, _ in WEAKENINGS])
def test_a_weakened_policy_fails_its_table(policies: Policies, tables: Tables, name: str,
                                           strong: str, weak: str, catching: str) -> None:
    found = mismatches(weakened(policies, name, strong, weak), {name: tables[name]})
    assert any(f"{name}: {catching}" in mismatch for mismatch in found), found
