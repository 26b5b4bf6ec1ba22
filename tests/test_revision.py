"""The revision covers only what the training pods run.

A change that does not reach a training pod (TensorBoard, the NetworkPolicy, the claim's size,
`suspend`) must leave every StatefulSet as it was, so Argo CD restarts no training and a
succeeded revision stays succeeded; a change that does (script, env, image, launcher settings)
must change the revision of every role together. Compiled with the `tfcompile` command.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.conftest import job_text

pytestmark = pytest.mark.slow

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")

JOB = job_text(metadata_lines="labels: {team: vision}", image="tf:1", script="train.py",
               command=None, spec_lines='env: {EPOCHS: "3"}',
               roles="chief: {replicas: 1}\nworker: {replicas: 2}\nevaluator: {replicas: 1}") + (
    "  storage:\n    shared: {mountPath: /mnt/shared, size: 10Gi}\n"
    "  tensorboard: {logDir: /mnt/shared/logs}\n")


def compiled(tmp_path: Path, text: str, script: str = "print('train')\n") -> dict[str, str]:
    """The files of output/demo/ as `tfcompile build` writes them."""
    source = tmp_path / "jobs"
    source.mkdir(exist_ok=True)
    (source / "job.yaml").write_text(text)
    (source / "train.py").write_text(script)
    output = tmp_path / "output"
    subprocess.run([TFCOMPILE, "build", str(source), "-o", str(output)], check=True,
                   capture_output=True, timeout=120)
    return {path.name: path.read_text() for path in sorted((output / "demo").iterdir())}


def statefulsets(files: dict[str, str]) -> dict[str, str]:
    return {name: text for name, text in files.items() if name.startswith("statefulset-")}


def revisions(files: dict[str, str]) -> set[str]:
    return {YAML(typ="safe").load(text)["spec"]["template"]["metadata"]["annotations"]
            ["tfcompile.dev/revision"] for text in statefulsets(files).values()}


@pytest.mark.parametrize("change", [
    ("  tensorboard: {logDir: /mnt/shared/logs}",
     "  tensorboard: {logDir: /mnt/shared/other, serviceType: LoadBalancer, image: tb:2,\n"
     "                loadBalancerSourceRanges: [10.0.0.0/8]}"),
    ("  tensorboard: {logDir: /mnt/shared/logs}\n", ""),
    ("  tensorboard:", "  networkPolicy: false\n  tensorboard:"),
    ("size: 10Gi", "size: 50Gi, storageClassName: fast"),
], ids=["tensorboard-settings", "tensorboard-removed", "network-policy", "claim-size"])
def test_changes_that_reach_no_training_pod_leave_every_statefulset_byte_identical(
        tmp_path: Path, change: tuple[str, str]) -> None:
    before = compiled(tmp_path, JOB)
    after = compiled(tmp_path, JOB.replace(*change))
    assert statefulsets(after) == statefulsets(before)
    launchers = [name for name in before if name.startswith("configmap-demo-launcher-")]
    assert len(launchers) == 1 and after[launchers[0]] == before[launchers[0]]
    assert after != before  # the change itself did reach the output


def test_suspend_keeps_the_revision_so_a_resumed_job_stays_succeeded(tmp_path: Path) -> None:
    running = compiled(tmp_path, JOB)
    suspended = compiled(tmp_path, JOB.replace("  storage:", "  suspend: true\n  storage:"))
    assert revisions(suspended) == revisions(running)
    assert len(revisions(running)) == 1  # one revision for every role
    worker = YAML(typ="safe").load(suspended["statefulset-demo-worker.yaml"])
    assert worker["spec"]["replicas"] == 0
    assert worker["metadata"]["annotations"]["tfcompile.dev/replicas"] == "0"


@pytest.mark.parametrize("change", [
    ('EPOCHS: "3"', 'EPOCHS: "4"'),
    ("image: tf:1", "image: tf:2"),
    ("worker: {replicas: 2}", "worker: {replicas: 3}"),
    ("  storage:", "  failurePolicy: {maxRestarts: 3}\n  storage:"),
    ("  storage:", "  onSuccess: release\n  storage:"),
], ids=["env", "image", "workers", "failure-policy", "on-success"])
def test_changes_to_what_the_pods_run_change_every_role_s_revision(
        tmp_path: Path, change: tuple[str, str]) -> None:
    before = revisions(compiled(tmp_path, JOB))
    after = revisions(compiled(tmp_path, JOB.replace(*change)))
    assert len(before) == len(after) == 1
    assert before != after


def test_the_script_is_part_of_the_revision(tmp_path: Path) -> None:
    assert (revisions(compiled(tmp_path, JOB, "print(1)\n"))
            != revisions(compiled(tmp_path, JOB, "print(2)\n")))


def test_the_state_record_names_the_committed_revision(tmp_path: Path) -> None:
    files = compiled(tmp_path, JOB)
    state = YAML(typ="safe").load(files["configmap-demo-state.yaml"])
    assert state["metadata"]["annotations"]["tfcompile.dev/revision"] in revisions(files)
    assert state["metadata"]["annotations"]["tfcompile.dev/success-tasks"] == "chief-0"
    assert "data" not in state  # the launchers own the data; a sync never resets it
