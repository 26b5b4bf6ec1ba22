"""Admission policies' CEL evaluated offline, as the API server evaluates it, so the fast tier
catches a policy that admits what it should refuse (the cluster tier asks a real API server,
but slowly and only where a control plane is built).

The CEL is Google's own: cel-expr-python (from PyPI) is the Python binding of cel-cpp, the
reference implementation beside cel-go, which Kubernetes runs. It has what the policies use:
`matches` with RE2 (the API server's regular expressions), optional field access (`?.`,
`[?'key']`, `.orValue()`), the strings extension (`split`, `substring`), `bytes()`, and the
`exists`, `all` and `filter` macros. It lacks one function of Kubernetes' own CEL libraries,
`<string>.find(<pattern>)` (the regex library: the first match, or '' when there is none), so
this module declares it (`find`, the one adapter). Nothing else is rewritten: every expression
is compiled as written, and one that does not compile raises `CannotEvaluate`.

What the API server does, and so `validating_decision` and `mutating_match` do:
- match conditions see `object`, `oldObject` and `request`; any false skips the policy, else
  any that fails to evaluate is a failure (`failurePolicy`: Fail refuses, Ignore skips);
- variables see those and the variables before them, as `variables.<name>`; the server computes
  one when an expression first reads it, which yields the same values as computing them in
  order up front; one that fails to evaluate is left out, so an expression that reads it fails
  (or not, past a short-circuit) as it does on the server;
- every validation is evaluated; a false one refuses with its `messageExpression` (else its
  `message`), one that fails refuses under failurePolicy Fail; the server reports the first.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]
from cel_expr_python.ext import ext_optional, ext_strings  # type: ignore[import-untyped]

POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
"""The user extra of a token bound to a pod (the projected token every pod gets)."""


class CannotEvaluate(Exception):
    """An expression this evaluator cannot compile, or a `find` it cannot answer as RE2 would:
    a test that meets one fails, never passes over it."""


_UNSUPPORTED = "cannot evaluate: "
"""How `find` says it was given what it cannot answer as RE2 would (see `evaluate`)."""


def find(text: str, pattern: str) -> str:
    """Kubernetes' `<string>.find(<pattern>)`: the leftmost match of `pattern` in `text`, or ''.

    The adapter runs Python's `re`, not RE2, so it takes only what the two read alike: no
    escape and no `(?` in the pattern (`\\d`, flags and look-arounds differ), and no line
    break in the text (Python's `$` also matches before a final one). It refuses the rest
    rather than guess; tests/test_admission_cel.py checks it on known cases and against
    `matches`, which the library runs with RE2."""
    if "\\" in pattern or "(?" in pattern or "\n" in text:
        raise ValueError(f"{_UNSUPPORTED}find({text!r}, {pattern!r}) may differ from RE2's")
    found = re.search(pattern, text)
    return found.group(0) if found else ""


_FIND = cel.FunctionDecl("find", [cel.Overload(
    "string_find_string", cel.Type.STRING, [cel.Type.STRING, cel.Type.STRING],
    is_member=True, impl=find)])
_MATCH_NAMES = ("object", "oldObject", "request")
"""What a match condition sees (no `variables`: the server gives them none)."""


@functools.cache
def _environment(names: tuple[str, ...]) -> Any:
    return cel.NewEnv(variables={name: cel.Type.DYN for name in names},
                      extensions=[ext_optional.ExtOptional(), ext_strings.ExtStrings()],
                      functions=[_FIND])


@functools.cache
def _compiled(expression: str, names: tuple[str, ...]) -> Any:
    try:
        return _environment(names).compile(expression)
    except RuntimeError as error:
        raise CannotEvaluate(f"{error}\nin: {expression}") from error


@dataclass(frozen=True)
class Failed:
    """An expression that compiled but failed to evaluate (a no such key, a wrong type)."""

    message: str


def evaluate(expression: str, bindings: Mapping[str, Any]) -> Any:
    """The plain value of `expression` with `bindings` (its free names), or `Failed`."""
    value = _compiled(expression, tuple(sorted(bindings))).eval(data=dict(bindings))
    if value.type() == cel.Type.ERROR:
        message = str(value.plain_value())
        if _UNSUPPORTED in message:
            raise CannotEvaluate(f"{message}\nin: {expression}")
        return Failed(message)
    return value.plain_value()


@dataclass(frozen=True)
class Request:
    """An admission request as a policy's CEL sees it: `request`, `object`, `oldObject`.

    `pods` is the pod-name extra of a token bound to a pod, None for a token bound to none."""

    operation: str
    name: str
    namespace: str
    username: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    pods: tuple[str, ...] | None = None

    def bindings(self) -> dict[str, Any]:
        user: dict[str, Any] = {"username": self.username, "groups": self._groups()}
        if self.pods is not None:
            user["extra"] = {POD_NAME_EXTRA: list(self.pods),
                             "authentication.kubernetes.io/pod-uid": ["0f0e"],
                             "authentication.kubernetes.io/credential-id": ["JTI=0a0b"]}
        return {"request": {"operation": self.operation, "name": self.name,
                            "namespace": self.namespace, "userInfo": user},
                "object": self.object, "oldObject": self.old_object}

    def _groups(self) -> list[str]:
        parts = self.username.split(":")
        if parts[:2] == ["system", "serviceaccount"] and len(parts) == 4:
            return ["system:serviceaccounts", f"system:serviceaccounts:{parts[2]}",
                    "system:authenticated"]
        return ["system:authenticated"]


@dataclass(frozen=True)
class Refusal:
    """A validation that refused: its index in the policy's validations, and its message
    (None for a match condition that failed to evaluate)."""

    validation: int | None
    message: str


@dataclass(frozen=True)
class Decision:
    """A ValidatingAdmissionPolicy's answer: whether it was concerned, and its refusals in the
    order of its validations (the server's message is the first)."""

    matched: bool
    refusals: list[Refusal] = field(default_factory=list)

    @property
    def admitted(self) -> bool:
        return not self.refusals

    @property
    def messages(self) -> list[str]:
        return [refusal.message for refusal in self.refusals]


def _truth(expression: str, bindings: Mapping[str, Any]) -> bool | Failed:
    value = evaluate(expression, bindings)
    if isinstance(value, Failed | bool):
        return value
    return Failed(f"{expression!r} gave {value!r}, not a bool")


def _matched(spec: Mapping[str, Any], request: Request) -> bool | Failed:
    bindings = request.bindings()
    answers = [_truth(condition["expression"], bindings)
               for condition in spec.get("matchConditions", [])]
    if False in answers:
        return False
    failed = [answer for answer in answers if isinstance(answer, Failed)]
    return failed[0] if failed else True


def _variables(spec: Mapping[str, Any], bindings: Mapping[str, Any]) -> dict[str, Any]:
    computed: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        value = evaluate(variable["expression"], {**bindings, "variables": dict(computed)})
        if not isinstance(value, Failed):
            computed[variable["name"]] = value
    return computed


def _refusal(validation: Mapping[str, Any], bindings: Mapping[str, Any]) -> str | None:
    answer = _truth(validation["expression"], bindings)
    if answer is True:
        return None
    if isinstance(answer, Failed):
        return f"expression {validation['expression']!r} resulted in error: {answer.message}"
    if "messageExpression" in validation:
        message = evaluate(validation["messageExpression"], bindings)
        if isinstance(message, str) and message.strip() and "\n" not in message:
            return message
    return str(validation.get("message") or f"failed expression: {validation['expression']}")


def validating_decision(policy: Mapping[str, Any], request: Request) -> Decision:
    """What the API server decides for `request` under the ValidatingAdmissionPolicy `policy`
    (its resource rules taken as matched: they are not CEL)."""
    spec = policy["spec"]
    fails = spec.get("failurePolicy", "Fail") == "Fail"
    matched = _matched(spec, request)
    if isinstance(matched, Failed):
        return Decision(True, [Refusal(None, f"match condition failed: {matched.message}")]) \
            if fails else Decision(False)
    if not matched:
        return Decision(False)
    bindings = request.bindings()
    bindings["variables"] = _variables(spec, bindings)
    messages = [_refusal(validation, bindings) for validation in spec["validations"]]
    return Decision(True, [Refusal(index, message) for index, message in enumerate(messages)
                           if message is not None])


def mutating_match(policy: Mapping[str, Any], request: Request) -> bool | Failed:
    """Whether the MutatingAdmissionPolicy `policy` would mutate `request` (its resource rules
    and object selector taken as matched): all its match conditions hold."""
    return _matched(policy["spec"], request)
