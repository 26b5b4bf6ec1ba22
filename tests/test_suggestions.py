"""The rule that picks "did you mean 'X'?": case and separator slips always, at most two edits
(a third of the candidate's length), one candidate alone at its distance, and never a cost
that grows with a long value."""

from __future__ import annotations

import time

import pytest

from tfcompile.spec.suggestions import closest, did_you_mean, edit_distance

ROLES = ["chief", "worker", "ps", "evaluator"]


@pytest.mark.parametrize(("first", "second", "distance"), [
    ("release", "release", 0),
    ("relase", "release", 1),  # a letter left out
    ("idel", "idle", 1),  # two neighbours swapped
    ("relaese", "release", 1),
    ("kueeu", "kueue", 1),
    ("ca", "abc", 3),  # optimal string alignment: no edit of a swapped pair
    ("evaluator", "ps", 3),  # lengths too far apart to compare: more than the limit
])
def test_edit_distance(first: str, second: str, distance: int) -> None:
    assert edit_distance(first, second) == distance


@pytest.mark.parametrize(("written", "allowed", "meant"), [
    ("onSucess", ["onSuccess", "onFailure"], "onSuccess"),
    ("mount_path", ["mountPath", "size"], "mountPath"),
    ("MOUNT-PATH", ["mountPath", "size"], "mountPath"),
    ("Replicas", ["replicas", "gpus"], "replicas"),
    ("Ps", ROLES, "ps"),
    ("wroker", ROLES, "worker"),
    ("evn", ["env", "envFrom"], "env"),
    ("maximise", ["maximize", "minimize"], "maximize"),
    ("gpu", ROLES, None),  # two edits from ps, which is too short for any
    ("pz", ROLES, None),
    ("ws", ROLES, None),
    ("horovod", ["tf-spawner", "elasticdl", "tf1-flags"], None),
    ("abd", ["abc", "abe", "abcd"], None),  # two candidates one edit away: neither
    ("worker", ROLES, None),  # already allowed: its spelling is not the problem
])
def test_closest(written: str, allowed: list[str], meant: str | None) -> None:
    assert closest(written, allowed) == meant


def test_the_message_names_only_the_candidate() -> None:
    assert did_you_mean("relase", ["idle", "release"]) == "; did you mean 'release'?"
    assert did_you_mean("delete", ["idle", "release"]) == ""
    assert did_you_mean(3, ["idle", "release"]) == ""


def test_a_long_value_costs_nothing() -> None:
    started = time.process_time()
    for _ in range(100):
        assert closest("r" * 200_000, ["release", "idle"]) is None
    assert time.process_time() - started < 0.5
