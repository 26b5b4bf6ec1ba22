"""`run-local` runs each container in its image as the user and groups its pod asks for (needs
root and the project's podman), makes a shared claim writable for `fsGroup` as the kubelet does,
and runs a job that opts into root as root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import job_text

pytestmark = [pytest.mark.end_to_end, pytest.mark.usefixtures("podman_images")]


SCRIPT = """\
import os, pathlib
print("identity", os.getuid(), os.getgid(), sorted(os.getgroups()), flush=True)
home = pathlib.Path(os.environ["HOME"], ".keras")
home.mkdir()
pathlib.Path("/tmp/scratch-file").write_text("x")
pathlib.Path("/mnt/shared", os.environ["TASK_INDEX"]).write_text("checkpoint")
with open("/proc/self/status") as status:
    print(next(line.strip() for line in status if line.startswith("NoNewPrivs")), flush=True)
"""


def run_local(tmp_path: Path, extra: str = "") -> tuple[int, str, Path]:
    job = tmp_path / "job.yaml"
    job.write_text(job_text("who", image="python:3.11", script="train.py", command=None,
                            spec_lines=extra)
                   + "  storage:\n    shared: {mountPath: /mnt/shared, size: 1Gi}\n")
    (tmp_path / "train.py").write_text(SCRIPT)
    claims = tmp_path / "claims"
    process = subprocess.run(
        [sys.executable, "-m", "tfcompile.compiler.cli", "run-local", str(job),
         "--claims-directory", str(claims), "--timeout", "600"],
        capture_output=True, text=True, timeout=900, check=False)
    return process.returncode, process.stdout + process.stderr, claims


def test_containers_run_as_the_pods_user_and_write_where_they_should(tmp_path: Path) -> None:
    status, output, claims = run_local(tmp_path)
    assert status == 0, output
    for pod in ("who-worker-0", "who-worker-1"):
        assert f"{pod} | identity 1000 1000 [1000]" in output
        # allowPrivilegeEscalation: false (the console prints the tab escaped, as every
        # control character of a pod's output)
        assert f"{pod} | NoNewPrivs:\\t1" in output
    files = sorted((claims / "who-shared").iterdir())
    assert [path.name for path in files] == ["0", "1"]
    # The pods run with this machine's IDs, as a node runs a pod without hostUsers: false; the
    # claim's folder belongs to the fsGroup, set-group-ID, so new files join the group.
    assert {path.stat().st_uid for path in files} == {1000}
    assert {path.stat().st_gid for path in files} == {1000}
    shared = (claims / "who-shared").stat()
    assert (shared.st_gid, shared.st_mode & 0o2070) == (1000, 0o2070)


def test_a_job_that_opts_into_root_runs_as_root(tmp_path: Path) -> None:
    status, output, _ = run_local(tmp_path, """\
        podTemplate:
          spec:
            securityContext: {runAsUser: 0, runAsGroup: 0, runAsNonRoot: false}
        """)
    assert status == 0, output
    assert "who-worker-0 | identity 0 0 [0, 1000]" in output
