"""A sweep on the local node: each trial's training sees its values, records its result, and
`tfcompile status` shows the trials best first.

A 2 x 1 grid of a small stand-in program (plain Python, no TensorFlow: what is shown is what the
cluster and the launcher do with a trial) is compiled with `tfcompile build`, both trials'
directories are applied as a GitOps tool would, and the real StatefulSet controller, scheduler,
node agent (which expands `$(VAR)` in `args` as the kubelet does) and launchers (with the pods'
own tokens, under the launcher policy) do the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.cluster.local_node import (
    Job,
    LocalNode,
    build,
    fresh_namespace,
    remove_namespace,
)
from tests.cluster.waiting import wait_for
from tests.conftest import job_directories, job_text
from tests.node_fixture import RealNode
from tfcompile.compiler.objects.names import trial_name

# Every test that runs pods shares the session's real node (marker `node`).
pytestmark = [pytest.mark.cluster, pytest.mark.node]

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")
TIMEOUT = 300.0

STAND_IN = """\
import json, os, sys

rate = float(sys.argv[sys.argv.index("--rate") + 1])
layers = int(os.environ["HIDDEN_LAYERS"])
print("stand-in:", os.environ["TFCOMPILE_TRIAL"], "rate", rate, "layers", layers, flush=True)
with open(os.environ["TFCOMPILE_RESULT_FILE"], "w") as result:
    json.dump({"loss": abs(rate - 0.01) + layers / 1000}, result)
"""

SWEEP = """\
  onSuccess: release
  sweep:
    parameters:
      LEARNING_RATE: ["0.1", "0.01"]
      HIDDEN_LAYERS: ["5"]
    objective: {metric: loss, goal: minimize}
"""


@pytest.fixture
def node(real_node: RealNode) -> LocalNode:
    """The session's real node (tests/conftest.py), shared with the GitOps tier."""
    return real_node.node


def records(node: LocalNode, namespace: str, name: str) -> dict[str, str]:
    state = node.get("configmap", f"{name}-state", "-n", namespace)
    return dict(state.get("data") or {})


def test_each_trial_trains_with_its_values_and_status_ranks_their_results(
        node: LocalNode, tmp_path: Path) -> None:
    started = time.monotonic()
    sweep = f"grid-{uuid.uuid4().hex[:6]}"
    source = tmp_path / sweep
    source.mkdir()
    (source / "train.py").write_text(STAND_IN)
    (source / "job.yaml").write_text(job_text(
        sweep, image="python:3.11", script="train.py", command=None,
        spec_lines="args: [--rate, $(LEARNING_RATE)]", roles="worker: {replicas: 1}") + SWEEP)
    job = Job(sweep, source, tmp_path / "output")
    build(job)
    trials = {rate: trial_name(sweep, [("HIDDEN_LAYERS", "5"), ("LEARNING_RATE", rate)])
              for rate in ("0.1", "0.01")}
    assert [path.name for path in job_directories(job.output)] == sorted(trials.values())
    namespace = fresh_namespace(node)
    for name in trials.values():
        node.kubectl("apply", "--server-side", "-k", str(job.output / name), "-n", namespace)

    def results() -> dict[str, str] | None:
        found = {rate: records(node, namespace, name).get("result", "")
                 for rate, name in trials.items()}
        return found if all(found.values()) else None

    recorded = wait_for("both trials' results", results, TIMEOUT, lambda: node.log()[-3000:])
    took = time.monotonic() - started
    for rate, name in trials.items():
        # The kubelet's $(LEARNING_RATE) in args and HIDDEN_LAYERS in the environment.
        lines = node.pod_lines(namespace, f"{name}-worker-0")
        assert f"stand-in: {name} rate {float(rate)} layers 5" in lines, lines
        revision = records(node, namespace, name)["worker-0"].split(" ")[1]
        loss = abs(float(rate) - 0.01) + 0.005
        assert recorded[rate] == f"{revision} {json.dumps({'loss': loss}, separators=(',', ':'))}"
    # Released once succeeded (onSuccess: release): the result stays in the state.
    wait_for("both trials released", lambda: all(
        item["spec"]["replicas"] == 0 for item in node.get(
            "statefulsets", "-n", namespace, "-l", f"tfcompile.dev/sweep={sweep}")["items"]),
        120)
    completed = subprocess.run(
        [TFCOMPILE, "status", sweep, "-o", str(job.output), "-n", namespace],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "KUBECONFIG": str(node.kubeconfig)})
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0] == (f"sweep {sweep} ({namespace}): 2 trials, best first by loss "
                        "(minimize)")
    assert lines[1].split() == ["TRIAL", "HIDDEN_LAYERS", "LEARNING_RATE", "PHASE", "RESULT"]
    assert [line.split() for line in lines[2:]] == [
        [trials["0.01"], "5", "0.01", "Released", "loss=0.005"],
        [trials["0.1"], "5", "0.1", "Released", "loss=0.095"],
    ]
    print(f"two trials trained, recorded their results and were released in {took:.0f} s")
    remove_namespace(node, namespace)
