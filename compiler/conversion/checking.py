"""The converted job held to the spec's own checks, so `convert` writes only what `build`
accepts, and says at the TFJob's line what it could not carry over.

Three checks run, as the loader runs them: the literal-secret scan, the models, the rules. A
literal value under a secret's name in `env` (which a TFJob allowed) is left out with a note
saying to put it in a Secret, or in `spec.notSecret` if it is not one: convert never decides
that a value is not a secret. Any other problem is reported at the TFJob field the refused
value came from (`Findings.source_of`) and stops the conversion.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tfcompile.spec.models import TrainingJob
from tfcompile.spec.problems import escape_text
from tfcompile.spec.rules import check_rules
from tfcompile.spec.secrets import find_literal_secrets

from .notes import Findings

ENVIRONMENT_SECRET = (
    "a literal value under a name that means a secret; left out of the job: put the value in a "
    "Secret and reference it (env: {NAME: {secretKeyRef: {name, key}}}), or, when it is not a "
    "secret (a path to a mounted key file), keep it and list the name in spec.notSecret"
)


def _environment_entry(path: tuple[str | int, ...]) -> bool:
    return (len(path) == 3 and path[:2] == ("spec", "env")) or (
        len(path) == 5 and path[:2] == ("spec", "roles") and path[3] == "env")


def _without(job: dict[str, Any], path: tuple[str | int, ...]) -> None:
    holder: Any = job
    for part in path[:-1]:
        holder = holder[part]
    holder.pop(path[-1], None)
    if not holder and path[-2] == "env":
        _without(job, path[:-1])


def hold_to_spec(job: dict[str, Any], findings: Findings) -> dict[str, Any] | None:
    """The job as the spec accepts it, or None with problems in `findings`."""
    for problem in list(find_literal_secrets(job)):
        where = findings.source_of(problem.path)
        if _environment_entry(problem.path):
            name = "(hidden key)" if problem.hidden_key else escape_text(str(problem.path[-1]))
            findings.note(where, f"{name}: {ENVIRONMENT_SECRET}")
            _without(job, problem.path)
        else:
            findings.problem(where, "a literal credential: " + problem.message)
    if findings.problems:
        return None
    try:
        model = TrainingJob.model_validate(job)
    except ValidationError as error:
        from tfcompile.spec.messages import describe_validation_error

        for path, message, _ in describe_validation_error(error, job):
            findings.problem(findings.source_of(path), f"as {_shown(path)}: {message}")
        return None
    for problem in check_rules(model):
        findings.problem(findings.source_of(problem.path),
                         f"as {_shown(problem.path)}: {problem.message}")
    return None if findings.problems else job


def _shown(path: tuple[str | int, ...]) -> str:
    from tfcompile.spec.problems import format_path

    return format_path(path)
