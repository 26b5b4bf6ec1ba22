"""`run-local` runs each container as the user and groups its pod asks for (needs root), inside a
user namespace whose IDs are no account's of this machine, makes a shared claim writable for
`fsGroup` as the kubelet does, and runs a job that opts into root as root (of the namespace)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import job_text
from tfcompile.compiler.local_run.user_namespace import unused_range

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="the local runtime needs root on Linux",
)]


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
    job.write_text(job_text("who", script="train.py", command=None, spec_lines=extra)
                   + "  storage:\n    shared: {mountPath: /mnt/shared, size: 1Gi}\n")
    (tmp_path / "train.py").write_text(SCRIPT)
    claims = tmp_path / "claims"
    process = subprocess.run(
        [sys.executable, "-m", "tfcompile.compiler.cli", "run-local", str(job),
         "--claims-directory", str(claims)],
        capture_output=True, text=True, timeout=300, check=False)
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
    ids = unused_range()
    assert ids is not None
    # On the host the files belong to the IDs 1000 maps to, which no account of it has.
    assert {path.stat().st_uid for path in files} == {ids.host_id(1000)}
    assert {path.stat().st_gid for path in files} == {ids.host_id(1000)}
    assert (claims / "who-shared").stat().st_gid == ids.host_id(1000)
    accounts = {line.split(":")[2] for line in Path("/etc/passwd").read_text().splitlines()
                if line.count(":") >= 2}
    assert str(ids.host_id(1000)) not in accounts


def test_a_job_that_opts_into_root_runs_as_root(tmp_path: Path) -> None:
    status, output, _ = run_local(tmp_path, """\
        podTemplate:
          spec:
            securityContext: {runAsUser: 0, runAsGroup: 0, runAsNonRoot: false}
        """)
    assert status == 0, output
    assert "who-worker-0 | identity 0 0 [0, 1000]" in output
