"""A reviewer's diff stays small: one role's `replicas` changes only the lines that must change.

Each example is compiled as it is and with one role's replicas raised by one; every line of the
output that differs must be one of: that count (the StatefulSet's `replicas` and its
`tfcompile.dev/replicas` annotation), the hosts in `TF_CONFIG`, the compatibility variables of a
job that asks for them, the tasks that make the job succeed (when they are that role's), or the
revision (pod templates, the state record and the launcher's settings, one line of JSON). The
number of changed lines per case is pinned too, so that a new line that changes with the count
shows here.
"""

from __future__ import annotations

import difflib
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES
from tfcompile.compiler.objects.compile import build_objects, file_name
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.compiler.yaml_output import dump
from tfcompile.spec.loading import load_jobs
from tfcompile.spec.models import Compatibility

COUNTING = {  # the compatibility variables that change with a role's replicas, by tool
    Compatibility.TF_SPAWNER: ("TOT_WORKERS",),
    Compatibility.ELASTICDL: ("NUM_WORKERS",),
    Compatibility.TF1_FLAGS: ("PS_HOSTS", "WORKER_HOSTS"),
}

WHY = [
    ("the count", re.compile(r"^\s*replicas: \d+$|^\s*tfcompile\.dev/replicas: '\d+'$")),
    ("TF_CONFIG", re.compile(r"^\s*value: '\{\"cluster\":")),
    ("the revision", re.compile(
        r"^\s*tfcompile\.dev/revision: '?[0-9a-f]{12}'?$|^\s*\"revision\": \"[0-9a-f]{12}\",?$")),
    ("the success tasks", re.compile(
        r"^\s*tfcompile\.dev/success-tasks: |^\s*\"(worker|chief)-\d+\",?$")),
    ("the launcher's settings (their revision, the success tasks)", re.compile(
        r"^\s*settings\.json: '\{.*\}'$")),
]

CASES = {
    # (example, role, replicas before): (changed lines, removed + added; the compatibility
    # variables among them)
    ("mnist", "worker", 2): (14, set()),
    ("parameter-server", "worker", 2): (24, set()),
    ("parameter-server", "ps", 1): (24, set()),
    ("tensorflow1", "worker", 2): (28, {"WORKER_HOSTS"}),
    ("tensorflow1", "ps", 1): (26, {"PS_HOSTS"}),
    ("tf-spawner", "worker", 2): (16, {"TOT_WORKERS"}),
}


def compiled(directory: Path) -> tuple[dict[str, list[str]], set[str]]:
    """The job's files as lines, and the compatibility variables it asks for that count."""
    (loaded,) = load_jobs(directory / "job.yaml")
    asked = {name for tool in loaded.job.spec.compatibility for name in COUNTING[tool]}
    return {file_name(document): dump(document).splitlines()
            for document in build_objects(loaded, shipped_launcher())}, asked


def why(lines: list[str], index: int, asked: set[str]) -> str | None:
    """Why line `index` of a file may change with a role's replicas, or None."""
    line = lines[index]
    previous = lines[index - 1] if index else ""
    for reason, pattern in WHY:
        if pattern.search(line):
            return reason
    variable = re.match(r"^\s*- name: (\w+)$", previous)
    if variable and variable.group(1) in asked and line.lstrip().startswith("value: "):
        return f"compatibility variable {variable.group(1)}"
    return None


def changed_lines(before: dict[str, list[str]], after: dict[str, list[str]],
                  asked: set[str]) -> list[tuple[str, str, str | None]]:
    """(file, line, why) of every removed and added line."""
    assert sorted(before) == sorted(after)  # no file is added, removed or renamed
    found = []
    for name in sorted(before):
        matcher = difflib.SequenceMatcher(a=before[name], b=after[name], autojunk=False)
        for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
            if tag == "equal":
                continue
            for index in range(old_start, old_end):
                found.append((name, "-" + before[name][index], why(before[name], index, asked)))
            for index in range(new_start, new_end):
                found.append((name, "+" + after[name][index], why(after[name], index, asked)))
    return found


@pytest.mark.parametrize(("example", "role", "replicas"), list(CASES),
                         ids=[f"{example}-{role}" for example, role, _ in CASES])
def test_one_role_s_replicas_change_only_the_lines_that_must(
        tmp_path: Path, example: str, role: str, replicas: int) -> None:
    directory = tmp_path / example
    shutil.copytree(EXAMPLES / example, directory)
    before, asked = compiled(directory)
    job = directory / "job.yaml"
    text = job.read_text()
    old = f"    {role}:\n      replicas: {replicas}\n"
    assert old in text
    job.write_text(text.replace(old, f"    {role}:\n      replicas: {replicas + 1}\n"))
    after, _ = compiled(directory)
    changes = changed_lines(before, after, asked)
    unexplained = [(name, line) for name, line, reason in changes if reason is None]
    assert unexplained == []
    reasons = {reason for _, _, reason in changes}
    assert {"the count", "the revision"} <= reasons
    assert "TF_CONFIG" in reasons
    count, variables = CASES[(example, role, replicas)]
    assert {reason for reason in reasons if reason and reason.startswith("compatibility")} == {
        f"compatibility variable {name}" for name in variables}
    assert len(changes) == count, "\n".join(
        f"{name}: {line}  [{reason}]" for name, line, reason in changes)
