"""`tfcompile status` without a cluster: the committed revision, and a clean failure.

What it shows for live jobs is tested against a real API server in tests/cluster/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.conftest import OUTPUT
from tfcompile.compiler.checking.status import committed_revisions

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")


def test_the_committed_revision_is_read_from_the_compiled_output() -> None:
    found = committed_revisions(OUTPUT)
    assert [name for name in sorted(found) if not name.startswith("sweep-")] == [
        "mnist", "parameter-server", "tensorflow1", "tf-spawner"]
    worker = YAML(typ="safe").load((OUTPUT / "mnist" / "statefulset-mnist-worker.yaml").read_text())
    assert found["mnist"] == (None, worker["spec"]["template"]["metadata"]["annotations"][
        "tfcompile.dev/revision"])


def test_symlinked_jobs_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "elsewhere").symlink_to(OUTPUT / "mnist")
    assert committed_revisions(tmp_path / "output") == {}


@pytest.mark.slow
def test_an_unreachable_cluster_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n"
        "clusters: [{name: nowhere, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: nobody, user: {}}]\n"
        "contexts: [{name: nowhere, context: {cluster: nowhere, user: nobody}}]\n")
    completed = subprocess.run(
        [TFCOMPILE, "status", "-o", str(OUTPUT)], capture_output=True, text=True, timeout=120,
        check=False, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    assert completed.returncode == 1
    assert completed.stderr.startswith("tfcompile: status: kubectl get failed: ")
    assert "Traceback" not in completed.stderr


def test_each_task_s_progress_at_the_deployed_revision_is_shown(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What the launchers recorded of their trainings' progress, per task; a line of an earlier
    revision is history, and a line holding a terminal's escape is shown escaped."""
    from tests.test_status_odd_records import job_objects, listed
    from tests.test_sweep_status import REVISION

    items = job_objects("demo", {
        "worker-0": f"training {REVISION} since 1795000000 stops 0",
        "worker-0.progress": "epoch 3/8, loss 0.21", "worker-0.progress-revision": REVISION,
        "worker-1.progress": "epoch 1/8", "worker-1.progress-revision": "ba9876543210",
        "chief-0.progress": "step 9\x1b]0;owned\x07", "chief-0.progress-revision": REVISION})
    text = listed(monkeypatch, tmp_path, items)
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("progress")]
    assert lines == ["progress chief-0: step 9\\x1b]0;owned\\x07",
                     "progress worker-0: epoch 3/8, loss 0.21"]
