"""Every TFJob fixture (written by others, each naming its source) converts, builds and
validates with no hand edit, and its compiled TF_CONFIG names the roles and counts the TFJob
operator's would: `genClusterSpec` (training-operator 1.9,
pkg/controller.v1/tensorflow/tensorflow.go) keys the cluster by the replica type lowercased,
every type with its replicas, and `isDistributed` writes no TF_CONFIG for a job of one pod.
Two differences are tfcompile's, and documented: a Master is the role `chief`, and a type of 0
replicas is left out instead of listed with no hosts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import OVERLAYS, REPOSITORY

pytestmark = pytest.mark.slow

FIXTURES = REPOSITORY / "tests" / "fixtures" / "tfjobs"
DOCUMENTED_RENAMES = {"master": "chief"}


def tfcompile(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tfcompile.compiler.cli", *arguments],
                          capture_output=True, text=True, timeout=300, check=False)


def operator_cluster(tfjob: dict[str, Any]) -> dict[str, int] | None:
    """The cluster keys and their task counts the operator would write, or None when it
    writes no TF_CONFIG (one pod); with tfcompile's documented differences applied."""
    counts = {str(kind).lower(): (spec or {}).get("replicas", 1)
              for kind, spec in tfjob["spec"]["tfReplicaSpecs"].items()}
    if sum(counts.values()) == 1:
        return None
    return {DOCUMENTED_RENAMES.get(kind, kind): count for kind, count in counts.items()
            if count > 0}


def compiled_clusters(job_directory: Path) -> dict[str, dict[str, int] | None]:
    """Per StatefulSet, the cluster its TF_CONFIG names (keys and task counts), or None."""
    clusters: dict[str, dict[str, int] | None] = {}
    for path in sorted(job_directory.glob("statefulset-*.yaml")):
        statefulset = yaml.safe_load(path.read_text(encoding="utf-8"))
        container = statefulset["spec"]["template"]["spec"]["containers"][0]
        values = {entry["name"]: entry.get("value") for entry in container.get("env", [])}
        text = values.get("TF_CONFIG")
        if text is None:
            clusters[path.name] = None
            continue
        config = json.loads(re.sub(r"\$\(TASK_INDEX\)", "0", text))
        clusters[path.name] = {kind: len(hosts) for kind, hosts in config["cluster"].items()}
    return clusters


@pytest.mark.parametrize("fixture", sorted(path.name for path in FIXTURES.glob("*.yaml")))
def test_a_converted_tfjob_builds_validates_and_names_the_operators_cluster(
    fixture: str, tmp_path: Path
) -> None:
    source = FIXTURES / fixture
    converted = tfcompile("convert", str(source), "-o", str(tmp_path / "jobs"))
    assert converted.returncode == 0, converted.stderr
    output = tmp_path / "output"
    built = tfcompile("build", str(tmp_path / "jobs"), "-o", str(output), "--overlays",
                      str(OVERLAYS))
    assert built.returncode == 0, built.stderr
    (job_directory,) = [path for path in output.iterdir() if path.is_dir()]
    validated = tfcompile("validate", str(job_directory))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    tfjob = next(document for document in yaml.safe_load_all(source.read_text(encoding="utf-8"))
                 if document)
    expected = operator_cluster(tfjob)
    clusters = compiled_clusters(job_directory)
    assert clusters, "the job has StatefulSets"
    assert set(clusters.values()) == {None} if expected is None else all(
        cluster == expected for cluster in clusters.values()), (clusters, expected)


def test_the_comparison_sees_a_wrong_count(tmp_path: Path) -> None:
    """The comparison above can fail: a cluster of other counts is not the operator's."""
    tfjob = {"spec": {"tfReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2},
                                         "PS": {}}}}
    assert operator_cluster(tfjob) == {"chief": 1, "worker": 2, "ps": 1}
    assert operator_cluster(tfjob) != {"chief": 1, "worker": 3, "ps": 1}
    assert operator_cluster({"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1}}}}) is None


def _paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(data, dict):
        for key, value in data.items():
            found.extend(_paths(value, (*path, key)))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found.extend(_paths(value, (*path, index)))
    return found


def test_a_fixture_with_any_value_replaced_converts_or_is_refused_never_a_crash() -> None:
    """2,000 derandomized mutations of the fixtures (a value replaced by one of another kind)
    convert, or stop with problems; none raises."""
    import copy
    import random

    from tfcompile.compiler.conversion.checking import hold_to_spec
    from tfcompile.compiler.conversion.mapping import convert_tfjob

    sources = [next(document for document in yaml.safe_load_all(path.read_text()) if document)
               for path in sorted(FIXTURES.glob("*.yaml"))]
    replacements: list[Any] = [None, 1, -1, "x", [], {}, [1], {"a": 1}, True, "tensorflow",
                               [{"name": "tensorflow"}], 2**40]
    chance = random.Random(20240601)
    for _ in range(2000):
        data = copy.deepcopy(chance.choice(sources))
        for _ in range(chance.randint(1, 3)):
            place = chance.choice(_paths(data)[1:])  # of the data as it is now
            holder = data
            for part in place[:-1]:
                holder = holder[part]
            holder[place[-1]] = copy.deepcopy(chance.choice(replacements))
        converted = convert_tfjob(data)
        if converted.job is not None:
            hold_to_spec(converted.job, converted.findings)
