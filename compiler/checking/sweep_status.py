"""A sweep in `tfcompile status`: one table of its trials, values, phase and result, best first.

Each trial of a sweep is a job of its own, whose state ConfigMap says which sweep it belongs to
(the `tfcompile.dev/sweep` label), its point and the sweep's objective (annotations written by
the compiler), and, once its training wrote one and succeeded, its result (`result: <revision>
<JSON object of numbers>`, written by the launcher, or `<revision> refused: <reason>` when the
file was no result). A result counts only for the revision that is deployed: a trial changed
since is running again. A record is read with the launcher's own rule (`parse_result`: bounded
in bytes, no number beyond a double, no nesting), and one that breaks it, whoever wrote it, is
shown as unreadable, never an exception: one odd trial must not hide the others. A failed
trial's reason (its tasks' failure records) is in the same column, so the table says why a
trial has no result without `--json`.

"Best" is the sweep's `objective`: the trials whose result has its metric come first, highest
first for `maximize` and lowest first for `minimize`; then the others. Without an objective,
and among trials alike, the order is by values, then name. The committed output supplies the
point and objective of a trial the cluster does not run yet, so the table lists every trial git
holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompile.compiler.launcher.results import ResultRefused, parse_result
from tfcompile.compiler.objects.labels import (
    SWEEP_LABEL,
    SWEEP_OBJECTIVE_ANNOTATION,
    SWEEP_VALUES_ANNOTATION,
)
from tfcompile.compiler.objects.launcher_interface import (
    REFUSALS,
    REFUSED,
    RESULT_KEY,
    REVISION_DIGITS,
)
from tfcompile.compiler.objects.names import state_config_map_name
from tfcompile.compiler.printable import printable
from tfcompile.compiler.yaml_input import YamlInputError, read_generated_document

ABSENT = "-"
MAXIMIZE = "maximize"
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class TrialInfo:
    """What makes a job a sweep's trial: the sweep, its point, the objective (`<metric>
    <goal>`, or empty)."""

    sweep: str
    values: dict[str, str]
    objective: str


def trial_info(state: Mapping[str, Any]) -> TrialInfo | None:
    """A trial's sweep, point and objective from its state ConfigMap (live or committed);
    None for a job that is no trial, or a ConfigMap that does not say them."""
    metadata = state.get("metadata")
    if not isinstance(metadata, dict):
        return None
    labels, annotations = metadata.get("labels"), metadata.get("annotations")
    if not isinstance(labels, dict) or not isinstance(annotations, dict):
        return None
    sweep = labels.get(SWEEP_LABEL)
    try:
        values = json.loads(annotations.get(SWEEP_VALUES_ANNOTATION, ""))
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(sweep, str) or not isinstance(values, dict) or not all(
            isinstance(value, str) for value in values.values()):
        return None
    objective = annotations.get(SWEEP_OBJECTIVE_ANNOTATION, "")
    return TrialInfo(sweep, dict(values), objective if isinstance(objective, str) else "")


@dataclass(frozen=True)
class RecordedResult:
    """A trial's recorded result for the deployed revision: its numbers, or a note why there
    are none though something is recorded (`refused: <reason>`, the launcher's; `unreadable:
    <reason>`, a record that is not as the launcher writes it); neither when none is."""

    values: dict[str, float] | None = None
    note: str = ""


def recorded_result(records: Mapping[str, object], revision: str) -> RecordedResult:
    """The result recorded for `revision` (another revision's is no result)."""
    recorded = records.get(RESULT_KEY)
    if recorded is None:
        return RecordedResult()
    if not isinstance(recorded, str):
        return RecordedResult(note=f"{UNREADABLE}: not text")
    if recorded[:REVISION_DIGITS] != revision or recorded[REVISION_DIGITS:][:1] != " ":
        return RecordedResult()
    text = recorded[REVISION_DIGITS + 1:]
    reason = text.removeprefix(f"{REFUSED}: ")
    if reason != text and reason in REFUSALS:
        return RecordedResult(note=text)
    try:
        found = parse_result(text.encode("utf-8", errors="surrogatepass"))
    except ResultRefused as refusal:
        return RecordedResult(note=f"{UNREADABLE}: {refusal.reason}")
    return RecordedResult({name: float(value) for name, value in found.items()})


def committed_trials(output: Path) -> dict[str, TrialInfo]:
    """Job name -> its trial's sweep, point and objective, for every compiled trial."""
    found: dict[str, TrialInfo] = {}
    if not output.is_dir() or output.is_symlink():
        return found
    for directory in sorted(output.iterdir()):
        path = directory / f"configmap-{state_config_map_name(directory.name)}.yaml"
        if directory.is_symlink() or path.is_symlink() or not path.is_file():
            continue
        try:
            document = read_generated_document(path.read_text(encoding="utf-8"))
        except (OSError, YamlInputError, UnicodeDecodeError):
            continue
        info = trial_info(document) if isinstance(document, dict) else None
        if info is not None:
            found[directory.name] = info
    return found


@dataclass(frozen=True)
class TrialRow:
    """One trial as the table shows it."""

    name: str
    namespace: str
    phase: str
    values: dict[str, str]
    result: dict[str, float] | None
    note: str = ""
    """Why a recorded result has no numbers (`RecordedResult.note`)."""
    failures: tuple[str, ...] = ()
    """A failed trial's failure records of the deployed revision (`<task>: <reason>`)."""


def _ranked(rows: list[TrialRow], objective: str) -> list[TrialRow]:
    metric, _, goal = objective.partition(" ")
    sign = -1.0 if goal == MAXIMIZE else 1.0

    def key(row: TrialRow) -> tuple[int, float, list[str], str]:
        value = (row.result or {}).get(metric) if metric else None
        ranked = 0 if value is not None else 1
        return (ranked, sign * value if value is not None else 0.0,
                [row.values.get(name, "") for name in sorted(row.values)], row.name)

    return sorted(rows, key=key)


def _result_cell(row: TrialRow) -> str:
    """The RESULT column: the numbers, else why there are none (refused, unreadable), and a
    failed trial's reason (`failed: worker-0: exit 3 after 2 restarts`), so that one table
    says why a trial has no result; `-` when there is nothing to say."""
    parts = []
    if row.result:
        parts.append(", ".join(f"{printable(name)}={value:.6g}"
                               for name, value in sorted(row.result.items())))
    elif row.note:
        parts.append(printable(row.note))
    if row.failures:
        parts.append("failed: " + "; ".join(printable(failure) for failure in row.failures))
    return "; ".join(parts) or ABSENT


def sweep_table(sweep: str, rows: list[TrialRow], objective: str) -> list[str]:
    """The lines of one sweep's table, every text from the cluster printed escaped."""
    namespaces = sorted({row.namespace for row in rows})
    metric, _, goal = objective.partition(" ")
    order = (f"best first by {printable(metric)} ({printable(goal)})" if metric
             else "no objective: ordered by values")
    lines = [f"sweep {printable(sweep)} ({printable(', '.join(namespaces))}): {len(rows)} "
             f"trials, {order}"]
    parameters = sorted({name for row in rows for name in row.values})
    table = [("TRIAL", *parameters, "PHASE", "RESULT")]
    for row in _ranked(rows, objective):
        table.append((printable(row.name),
                      *(printable(row.values.get(name, ABSENT)) for name in parameters),
                      printable(row.phase), _result_cell(row)))
    widths = [max(len(cells[column]) for cells in table) for column in range(len(table[0]) - 1)]
    for cells in table:
        padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
        lines.append("  " + "  ".join([*padded, cells[-1]]).rstrip())
    return lines
