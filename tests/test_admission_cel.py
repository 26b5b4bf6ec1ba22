"""The offline CEL evaluator (tests/admission_cel.py) on cases whose answer Kubernetes
documents, so a table of policy decisions built on it rests on the API server's semantics and
not on the evaluator's mistakes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.admission_cel import (
    POD_NAME_EXTRA,
    CannotEvaluate,
    Failed,
    Request,
    evaluate,
    validating_decision,
)

TASK_SUFFIX = "-(chief|worker|ps|evaluator)-(0|[1-9][0-9]*)$"
NOTHING: dict[str, Any] = {"object": None}


def test_find_is_the_first_match_or_nothing_as_in_kubernetes_regex_library() -> None:
    # The examples of the Kubernetes CEL documentation (library `regex`).
    assert evaluate("'abc 123'.find('[0-9]+')", NOTHING) == "123"
    assert evaluate("'abc'.find('[0-9]+')", NOTHING) == ""
    assert evaluate("'a1b22'.find('[0-9]+')", NOTHING) == "1"


@pytest.mark.parametrize("name", [
    "mnist-worker-0", "mnist-worker-12", "mnist-worker-01", "mnist-worker-", "worker-0",
    "a-ps-3-chief-0", "a-chief-0-x", "a-evaluator-0", "a-master-0", "", "-worker-0",
])
def test_find_agrees_with_re2_matches(name: str) -> None:
    """`matches` runs in the library's RE2: the adapter's `find` finds exactly where it
    matches, and what it finds ends the name."""
    bindings = {"name": name}
    found = evaluate(f"name.find('{TASK_SUFFIX}')", bindings)
    assert (found != "") == evaluate(f"name.matches('{TASK_SUFFIX}')", bindings)
    assert name.endswith(found)


@pytest.mark.parametrize("expression", [
    r"'a\nb'.find('b$')",  # Python's `$` matches before a final line break, RE2's does not
    r"'a1'.find('\\d')",
    "'a'.find('(?i)A')",
])
def test_find_refuses_what_re2_might_read_otherwise(expression: str) -> None:
    with pytest.raises(CannotEvaluate, match="may differ from RE2"):
        evaluate(expression, NOTHING)


def test_matches_is_re2() -> None:
    """A look-ahead, which Python's `re` has, is no RE2: an error, as on the API server."""
    assert isinstance(evaluate("'a'.matches('(?=a)a')", NOTHING), Failed)


@pytest.mark.parametrize("expression", [
    "'a'.findAll('a')",  # a Kubernetes function the evaluator does not have
    "object.spec.(",
])
def test_an_expression_that_does_not_compile_raises(expression: str) -> None:
    with pytest.raises(CannotEvaluate):
        evaluate(expression, NOTHING)


def test_what_the_policies_use_beside_find() -> None:
    scale: dict[str, Any] = {"object": {"spec": {}}}
    assert evaluate("object.?spec.?replicas.orValue(0)", scale) == 0
    assert evaluate("object.?spec[?'replicas'].orValue(7)", scale) == 7
    assert evaluate("'a,b'.split(',')", NOTHING) == ["a", "b"]
    assert evaluate("'worker-0'.substring(7)", NOTHING) == "0"
    assert evaluate("'\U0001f600a'.substring(1)", NOTHING) == "a"  # code points, as in cel-go
    assert evaluate("[size('\U0001f600'), size(bytes('\U0001f600'))]", NOTHING) == [1, 4]
    assert evaluate("{'a': '1', 'b': '2'}.filter(k, k != 'a')", NOTHING) == ["b"]
    assert isinstance(evaluate("object.spec", NOTHING), Failed)  # a field of null


def request(**changes: Any) -> Request:
    fields: dict[str, Any] = {
        "operation": "UPDATE", "name": "x", "namespace": "ml",
        "username": "system:serviceaccount:ml:a-launcher", "object": {}, "old_object": {},
        "pods": ("a-worker-0",)}
    return Request(**{**fields, **changes})


def policy(validations: list[dict[str, Any]], variables: list[dict[str, str]] | None = None,
           conditions: list[str] | None = None) -> dict[str, Any]:
    return {"spec": {"failurePolicy": "Fail", "validations": validations,
                     "variables": variables or [],
                     "matchConditions": [{"name": f"c{index}", "expression": expression}
                                         for index, expression in enumerate(conditions or [])]}}


def test_the_request_carries_the_user_and_the_pod_of_a_bound_token() -> None:
    bound = request().bindings()["request"]
    assert evaluate(f"request.userInfo.extra['{POD_NAME_EXTRA}']", {"request": bound}) \
        == ["a-worker-0"]
    unbound = request(pods=None).bindings()["request"]
    assert evaluate("request.userInfo.?extra.hasValue()", {"request": unbound}) is False
    assert evaluate("'system:serviceaccounts:ml' in request.userInfo.groups",
                    {"request": bound}) is True


def test_every_validation_is_evaluated_and_the_first_refusal_is_the_server_s_message() -> None:
    decision = validating_decision(policy([
        {"expression": "true", "message": "never"},
        {"expression": "request.name == 'y'", "messageExpression": "'not ' + request.name"},
        {"expression": "false", "message": "fixed"},
        {"expression": "false", "messageExpression": "''", "message": "empty falls back"},
        {"expression": "object.missing == 1"},
    ]), request())
    assert decision.matched and not decision.admitted
    assert [refusal.validation for refusal in decision.refusals] == [1, 2, 3, 4]
    assert decision.messages[:3] == ["not x", "fixed", "empty falls back"]
    assert decision.messages[3].startswith("expression 'object.missing == 1' resulted in error")


def test_match_conditions_skip_on_any_false_and_refuse_on_a_failure_under_fail() -> None:
    admit = [{"expression": "true"}]
    assert not validating_decision(policy(admit, conditions=["true", "false"]), request()).matched
    assert not validating_decision(policy(admit, conditions=["object.missing", "false"]),
                                   request()).matched
    failed = validating_decision(policy(admit, conditions=["object.missing"]), request())
    assert failed.matched and failed.messages[0].startswith("match condition failed")
    ignored = policy(admit, conditions=["object.missing"])
    ignored["spec"]["failurePolicy"] = "Ignore"
    assert not validating_decision(ignored, request()).matched


def test_match_conditions_have_no_variables() -> None:
    with pytest.raises(CannotEvaluate):
        validating_decision(policy([{"expression": "true"}], [{"name": "v", "expression": "1"}],
                                   ["variables.v == 1"]), request())


def test_variables_see_those_before_them_and_a_failed_one_fails_where_it_is_read() -> None:
    variables = [{"name": "first", "expression": "request.name + '1'"},
                 {"name": "second", "expression": "variables.first + '2'"},
                 {"name": "broken", "expression": "object.missing"}]
    decision = validating_decision(policy([
        {"expression": "variables.second == 'x12'", "message": "in order"},
        {"expression": "true || variables.broken", "message": "short-circuit absorbs it"},
        {"expression": "variables.broken == 1", "message": "read"},
    ], variables), request())
    assert len(decision.refusals) == 1 and "resulted in error" in decision.messages[0]
