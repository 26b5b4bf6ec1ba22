"""`tfcompile status` shows every job, whatever one job's records hold.

A job's records are written by its pods, which run the user's code with a token that may patch
them: the launcher policy holds them to the launcher's formats (a result only as `<revision>
{…}` of bounded size, which still admits deep nesting, numbers beyond a double and malformed
JSON), and a cluster without the policy holds them to nothing. `status` reads them all from one
`kubectl get` per namespace, so one odd record must cost that record, never the listing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_sweep_status import REVISION, succeeded, trial_objects
from tfcompile.compiler.checking import status


def job_objects(name: str, records: dict[str, Any]) -> list[dict[str, Any]]:
    """What kubectl returns for a job of one worker that is not a trial."""
    labels = {"tfcompile.dev/job": name}
    return [
        {"kind": "ConfigMap", "metadata": {
            "name": f"{name}-state", "namespace": "ml", "labels": labels,
            "annotations": {"tfcompile.dev/success-tasks": "worker-0"}}, "data": records},
        {"kind": "StatefulSet",
         "metadata": {"name": f"{name}-worker", "namespace": "ml",
                      "labels": {**labels, "tfcompile.dev/role": "worker"}},
         "spec": {"replicas": 1, "template": {"metadata": {"annotations": {
             "tfcompile.dev/revision": REVISION}}}}},
    ]


def listed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
           items: list[dict[str, Any]]) -> str:
    """`tfcompile status`'s text for a namespace whose `kubectl get` returns `items`."""
    for item in items:
        item["metadata"].setdefault("namespace", "ml")
    monkeypatch.setattr(status, "_kubectl_items", lambda namespace, everywhere: items)
    monkeypatch.setattr(status, "_context_namespace", lambda: "ml")
    statuses = status.read_status([], tmp_path / "output")
    json.loads(status.as_json(statuses))  # the JSON output holds too
    return status.as_text(statuses)


NESTED = '{"loss":' + "[" * 2000 + "]" * 2000 + "}"


@pytest.mark.parametrize(("result", "shown"), [
    (NESTED, "unreadable: not a JSON object of finite numbers"),
    ('{"loss":' + "9" * 400 + "}", "unreadable: not a JSON object of finite numbers"),
    ('{"loss":1e999}', "unreadable: not a JSON object of finite numbers"),
    ('{"loss":NaN}', "unreadable: not a JSON object of finite numbers"),
    ('{"loss":0.5', "unreadable: not JSON"),
    ('{"' + "\U0001f600" * 4000 + '":1}', "unreadable: larger than 4096 bytes"),
    ("refused: not JSON", "refused: not JSON"),
], ids=["nested", "400-digit-integer", "1e999", "nan", "malformed", "16-kilobytes",
        "refused"])
def test_an_odd_result_is_marked_and_every_other_job_is_shown(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, result: str, shown: str) -> None:
    """Each of these results passes the launcher policy as it was (`<revision> {…}`, at most
    4109 characters); the trial shows why it has no result, the others as they are."""
    assert len(f"{REVISION} {result}") <= 12 + 1 + 4096  # characters, as CEL's size() counts
    items = [*trial_objects("grid-aaaaaaaa", {"RATE": "1"}, succeeded(result)),
             *trial_objects("grid-bbbbbbbb", {"RATE": "2"}, succeeded('{"loss":0.25}')),
             *job_objects("plain", {"worker-0": f"succeeded {REVISION}"})]
    text = listed(monkeypatch, tmp_path, items)
    rows = {line.split()[0]: line for line in text.splitlines()[2:4]}
    assert rows["grid-bbbbbbbb"].split()[-1] == "loss=0.25"
    assert rows["grid-aaaaaaaa"].split(None, 3)[-1] == shown
    assert rows["grid-aaaaaaaa"].split()[2] == "Succeeded"
    assert "plain (ml): Succeeded" in text


def test_a_record_that_is_not_text_is_marked_and_the_job_shown(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Records that are not text (no API server returns them, but status does not count on
    it) are left out, named; the job's other records still make its phase."""
    items = [*job_objects("odd", {"worker-0": f"succeeded {REVISION}", "worker-1": 5,
                                  "note": {"a": [1]}}),
             *job_objects("plain", {"worker-0": f"succeeded {REVISION}"})]
    text = listed(monkeypatch, tmp_path, items)
    assert "odd (ml): Succeeded" in text
    assert "  unreadable, left out: note: not text; worker-1: not text" in text
    assert "plain (ml): Succeeded" in text


def test_a_job_whose_objects_are_past_reading_is_shown_as_unreadable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Should a job's objects still be past reading (a StatefulSet without a spec, a state
    whose data is no map), that job is Unreadable and the others are shown."""
    broken = job_objects("broken", {})
    del broken[1]["spec"]
    no_map = job_objects("nomap", {})
    no_map[0]["data"] = ["worker-0"]
    items = [*broken, *no_map, *job_objects("plain", {"worker-0": f"succeeded {REVISION}"})]
    text = listed(monkeypatch, tmp_path, items)
    assert "broken (ml): Unreadable; revision deployed -" in text
    assert "  unreadable, left out: its objects (KeyError)" in text
    assert "  unreadable, left out: data: not a map" in text
    assert "plain (ml): Succeeded" in text
