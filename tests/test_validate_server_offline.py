"""`validate --server` when the cluster cannot be asked: the check fails, not the job.

These need kubectl but no cluster; the cluster tier (tests/cluster/) covers the real checks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import OUTPUT
from tfcompile.compiler.checking.validation.server import without_value

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")


def run(kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is needed on PATH")
    kubectl = Path(str(shutil.which("kubectl"))).parent
    path = f"{Path(sys.executable).parent}:{kubectl}:/usr/bin:/bin"
    return subprocess.run(
        [TFCOMPILE, "validate", "--server", str(OUTPUT / "mnist")], capture_output=True,
        text=True, check=False, env={"PATH": path, "KUBECONFIG": str(kubeconfig)}, timeout=120,
    )


@pytest.mark.slow
def test_an_unreachable_cluster_fails_the_check_not_the_job(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: Config
        clusters: [{name: gone, cluster: {server: "https://127.0.0.1:9"}}]
        users: [{name: someone, user: {token: not-a-secret}}]
        contexts: [{name: gone, context: {cluster: gone, user: someone}}]
        current-context: gone
        """), encoding="utf-8")
    result = run(kubeconfig)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "tfcompile: validate --server: the API server did not answer:" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_no_kubeconfig_context_is_explained(tmp_path: Path) -> None:
    empty = tmp_path / "kubeconfig"
    empty.write_text("apiVersion: v1\nkind: Config\n", encoding="utf-8")

    result = run(empty)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "tfcompile: validate --server: no usable kubeconfig context" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ('Invalid value: "train job.py": a valid config key must consist of alphanumeric '
         "characters",
         "Invalid value: a valid config key must consist of alphanumeric characters"),
        ('Invalid value: "a \\"quoted\\": value": must be no more than 63 characters',
         "Invalid value: must be no more than 63 characters"),
        ('Unsupported value: "OnFailure": supported values: "Always"',
         'Unsupported value: supported values: "Always"'),
        ("Invalid value: 70000: must be between 1 and 65535, inclusive",
         "Invalid value: must be between 1 and 65535, inclusive"),
        ("Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
         "Forbidden: activeDeadlineSeconds in StatefulSet is not Supported"),
        ('Duplicate value: "TF_CONFIG"', "Duplicate value"),
    ],
)
def test_the_servers_reasons_are_shown_without_the_refused_value(message: str, shown: str) -> None:
    assert without_value(message) == shown
