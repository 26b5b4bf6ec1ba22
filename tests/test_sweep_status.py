"""A sweep in `tfcompile status`: a table of trials, best first by the objective; the result a
trial's launcher records (and only that of the deployed revision). The table from a live
cluster is shown in tests/cluster/test_sweep.py; here from the objects kubectl would return."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tfcompile.compiler.checking.status import JobStatus, as_json, as_text, job_status
from tfcompile.compiler.checking.sweep_status import committed_trials
from tfcompile.compiler.launcher import protocol, records, results

REVISION = "0123456789ab"
OLD = "ba9876543210"


def trial_objects(name: str, values: dict[str, str], records: dict[str, str],
                  objective: str = "loss minimize") -> list[dict[str, Any]]:
    """What kubectl returns for a trial of one succeeded worker."""
    labels = {"tfcompile.dev/job": name, "tfcompile.dev/sweep": "grid"}
    annotations = {"tfcompile.dev/revision": REVISION,
                   "tfcompile.dev/success-tasks": "worker-0",
                   "tfcompile.dev/sweep-values": json.dumps(values)}
    if objective:
        annotations["tfcompile.dev/sweep-objective"] = objective
    return [
        {"kind": "ConfigMap", "metadata": {"name": f"{name}-state", "labels": labels,
                                           "annotations": annotations}, "data": records},
        {"kind": "StatefulSet",
         "metadata": {"name": f"{name}-worker", "labels": {**labels, "tfcompile.dev/role":
                                                           "worker"}},
         "spec": {"replicas": 1, "template": {"metadata": {"annotations": {
             "tfcompile.dev/revision": REVISION}}}}},
        {"kind": "Pod", "metadata": {"name": f"{name}-worker-0", "labels": {
            **labels, "tfcompile.dev/role": "worker"}}, "status": {"phase": "Running"}},
    ]


def status_of(name: str, values: dict[str, str], records: dict[str, str],
              objective: str = "loss minimize") -> JobStatus:
    return job_status(name, "ml", trial_objects(name, values, records, objective), REVISION)


def succeeded(result: str | None, revision: str = REVISION) -> dict[str, str]:
    records = {"worker-0": f"succeeded {REVISION}"}
    if result is not None:
        records["result"] = f"{revision} {result}"
    return records


def table_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[2:]]


def test_the_trials_are_one_table_lowest_loss_first_for_minimize() -> None:
    statuses = [
        status_of("grid-aaaaaaaa", {"RATE": "0.1"}, succeeded('{"loss":0.5}')),
        status_of("grid-bbbbbbbb", {"RATE": "0.01"}, succeeded('{"loss":0.125}')),
        status_of("grid-cccccccc", {"RATE": "0.001"}, {}),  # still training: no result
        status_of("grid-dddddddd", {"RATE": "1"}, succeeded('{"loss":0.25,"epochs":3}')),
    ]
    text = as_text(statuses)
    lines = text.splitlines()
    assert lines[0] == "sweep grid (ml): 4 trials, best first by loss (minimize)"
    assert lines[1].split() == ["TRIAL", "RATE", "PHASE", "RESULT"]
    assert table_rows(text) == [
        ["grid-bbbbbbbb", "0.01", "Succeeded", "loss=0.125"],
        ["grid-dddddddd", "1", "Succeeded", "epochs=3,", "loss=0.25"],
        ["grid-aaaaaaaa", "0.1", "Succeeded", "loss=0.5"],
        ["grid-cccccccc", "0.001", "Running", "-"],
    ]
    (first, *_) = json.loads(as_json(statuses))
    assert first["sweep"] == "grid" and first["values"] == {"RATE": "0.1"}
    assert first["result"] == {"loss": 0.5}


def test_maximize_puts_the_highest_first_and_no_objective_orders_by_values() -> None:
    def grid(objective: str) -> list[JobStatus]:
        return [status_of("grid-aaaaaaaa", {"RATE": "2"}, succeeded('{"accuracy":0.7}'),
                          objective),
                status_of("grid-bbbbbbbb", {"RATE": "1"}, succeeded('{"accuracy":0.9}'),
                          objective)]

    assert [row[0] for row in table_rows(as_text(grid("accuracy maximize")))] == [
        "grid-bbbbbbbb", "grid-aaaaaaaa"]
    assert [row[0] for row in table_rows(as_text(grid("accuracy minimize")))] == [
        "grid-aaaaaaaa", "grid-bbbbbbbb"]
    without = as_text(grid(""))
    assert without.splitlines()[0].endswith("no objective: ordered by values")
    assert [row[1] for row in table_rows(without)] == ["1", "2"]


def test_a_result_of_another_revision_or_not_numbers_is_not_shown() -> None:
    """Another revision's result is none; one that is not a JSON object of finite numbers
    (the launcher's rule, whoever wrote it) is shown as unreadable, not in part."""
    stale = status_of("grid-aaaaaaaa", {"RATE": "1"}, succeeded('{"loss":0.1}', revision=OLD))
    assert stale.result is None and stale.result_note == ""
    broken = status_of("grid-bbbbbbbb", {"RATE": "2"}, succeeded('{"loss":"low"'))
    assert broken.result is None and broken.result_note == "unreadable: not JSON"
    mixed = status_of("grid-cccccccc", {"RATE": "3"}, succeeded('{"loss":0.2,"note":"x"}'))
    assert mixed.result is None
    assert mixed.result_note == "unreadable: not a JSON object of finite numbers"


def test_a_failed_trials_reason_is_in_the_table() -> None:
    """Why a trial has no result is in the table, not only in --json: its tasks' failure
    records of the deployed revision, after any note about its result."""
    failed = status_of("grid-aaaaaaaa", {"RATE": "1"},
                       {"worker-0": f"failed {REVISION} exit 3 after 2 restarts"})
    stale = status_of("grid-bbbbbbbb", {"RATE": "2"},
                      {"worker-0": f"failed {OLD} exit 1 after 0 restarts"})
    lines = as_text([failed, stale]).splitlines()
    assert lines[2].split(None, 3) == ["grid-aaaaaaaa", "1", "Failed",
                                       "failed: worker-0: exit 3 after 2 restarts"]
    assert lines[3].split() == ["grid-bbbbbbbb", "2", "Running", "-"]
    refused = status_of("grid-cccccccc", {"RATE": "3"}, {
        "worker-0": f"failed {REVISION} deadline 1h passed",
        "result": f"{REVISION} refused: not JSON"})
    assert as_text([refused]).splitlines()[2].split(None, 3)[3] == (
        "refused: not JSON; failed: worker-0: deadline 1h passed")


def test_text_from_the_cluster_is_printed_escaped() -> None:
    hostile = status_of("grid-aaaaaaaa", {"RATE": "\x1b[2J"}, succeeded('{"\x1b]0;x":1}'))
    text = as_text([hostile])
    assert "\x1b" not in text and "\\x1b[2J" in text
    failed = status_of("grid-bbbbbbbb", {"RATE": "1"},
                       {"worker-0": f"failed {REVISION} exit 3\x1b]0;owned\x07"})
    text = as_text([failed])
    assert "\x1b" not in text and "\x07" not in text
    assert "failed: worker-0: exit 3\\x1b]0;owned\\x07" in text


def test_the_committed_output_names_each_trials_sweep_and_point() -> None:
    trials = committed_trials(Path(__file__).resolve().parent.parent / "output")
    assert len(trials) == 9 and {info.sweep for info in trials.values()} == {"sweep"}
    points = sorted((info.values["LEARNING_RATE"], info.values["HIDDEN_LAYERS"])
                    for info in trials.values())
    assert points == sorted((rate, layers) for rate in ("0.001", "0.01", "0.1")
                            for layers in ("5", "6", "7"))
    assert {info.objective for info in trials.values()} == {"loss minimize"}


def test_the_launcher_reads_a_result_of_numbers_as_compact_json(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text('{ "loss": 0.25, "accuracy": 1 }')
    assert results.read_result(str(path)) == '{"accuracy":1,"loss":0.25}'
    assert results.read_result(str(tmp_path / "none.json")) is None
    assert results.read_result("") is None


@pytest.mark.parametrize(("text", "reason"), [
    ("[1, 2]", protocol.NOT_NUMBERS), ("{}", protocol.NOT_NUMBERS),
    ('{"loss": "low"}', protocol.NOT_NUMBERS), ('{"loss": true}', protocol.NOT_NUMBERS),
    ('{"loss": NaN}', protocol.NOT_NUMBERS), ("not json", protocol.NOT_JSON),
    ('{"loss": 1, "padding": "' + "x" * protocol.RESULT_MAXIMUM_BYTES + '"}', protocol.TOO_LARGE),
])
def test_the_launcher_refuses_a_result_that_is_not_an_object_of_numbers(
        tmp_path: Path, text: str, reason: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "result.json"
    path.write_text(text)
    assert results.read_result(str(path)) == f"refused: {reason}"
    assert "is not recorded" in capsys.readouterr().err


def test_the_launcher_follows_no_link_to_a_result(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.json").write_text('{"loss": 1}')
    (tmp_path / "result.json").symlink_to(tmp_path / "elsewhere.json")
    assert results.read_result(str(tmp_path / "result.json")) == f"refused: {protocol.NOT_A_FILE}"
    results.remove_result(str(tmp_path / "result.json"))
    assert not (tmp_path / "result.json").is_symlink()


class RefusingResults:
    """An API server whose launcher policy predates results: it refuses a patch of `result`."""

    def __init__(self) -> None:
        self.patches: list[dict[str, str]] = []

    def record(self, name: str, entries: dict[str, str]) -> None:
        if protocol.RESULT_KEY in entries:
            raise OSError("HTTP 403 Forbidden")
        self.patches.append(entries)


def test_a_policy_that_predates_results_refuses_only_the_result(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The success is recorded in a request of its own, before the result."""
    where = {"role": "worker", "state": str(tmp_path), "account": str(tmp_path / "none")}
    state = records.State({"stateConfigMap": "grid-state"}, where, REVISION, "worker-0")
    api = RefusingResults()
    state.api = api  # type: ignore[assignment]
    state.record(protocol.SUCCEEDED, result='{"loss":0.5}')
    assert api.patches == [{"worker-0": f"succeeded {REVISION}"}]
    said = capsys.readouterr().err
    assert "could not record the result" in said and "launcher-policy.yaml" in said
