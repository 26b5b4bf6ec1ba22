"""The Argo CD health check `init` writes, run by a real Lua 5.1 interpreter.

Argo CD runs health checks with gopher-lua, a Lua 5.1; the check only uses Lua 5.1's base and
string/table libraries, so `lua5.1` runs it the same way. Each case is a state ConfigMap as
tfcompile compiles it, with records as the launcher writes them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import job_text
from tfcompile.compiler.scaffold.repository import HEALTH_KEY, scaffold

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")
HEALTH_LUA = resources.files("tfcompile.compiler.scaffold").joinpath("files/health.lua")

JOB = job_text(image="tf", command="[python, train.py]",
               roles="chief: {replicas: 1}\nworker: {replicas: 2}")


def lua_literal(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"[{lua_literal(k)}] = {lua_literal(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(item) for item in value) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a valid Lua string for this text


def health(kubernetes_object: dict[str, Any]) -> tuple[str, str]:
    """(status, message) of the health check for an object, as Argo CD would compute it."""
    interpreter = shutil.which("lua5.1")
    if interpreter is None:
        pytest.fail("the Argo CD health check is tested with a Lua 5.1 interpreter: install "
                    "lua5.1 (Debian/Ubuntu: apt-get install lua5.1)", pytrace=False)
    harness = (f"obj = {lua_literal(kubernetes_object)}\n"
               f"local check = assert(loadstring({json.dumps(HEALTH_LUA.read_text())}))\n"
               "local hs = check()\nio.write(hs.status, '\\n', hs.message or '')\n")
    completed = subprocess.run([interpreter, "-"], input=harness, capture_output=True,
                               text=True, timeout=30, check=True)
    status, _, message = completed.stdout.partition("\n")
    return status, message


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The state ConfigMap of the job, running and suspended."""
    found = {}
    for variant, text in (("running", JOB), ("suspended", JOB + "  suspend: true\n")):
        directory = tmp_path_factory.mktemp(variant)
        (directory / "job.yaml").write_text(text)
        subprocess.run([TFCOMPILE, "build", str(directory), "-o", str(directory / "output")],
                       check=True, capture_output=True, timeout=120)
        found[variant] = YAML(typ="safe").load(
            (directory / "output" / "demo" / "configmap-demo-state.yaml").read_text())
    return found


def with_records(state: dict[str, Any], records: dict[str, str]) -> dict[str, Any]:
    return {**state, "data": records}


def test_a_job_in_training_is_progressing(compiled: dict[str, dict[str, Any]]) -> None:
    state = compiled["running"]
    revision = state["metadata"]["annotations"]["tfcompile.dev/revision"]
    assert health(state) == ("Progressing", f"training revision {revision}: 0 of 1 tasks that "
                                            "end the job succeeded")
    workers_done = with_records(state, {"worker-0": f"succeeded {revision}",
                                        "worker-1": f"succeeded {revision}"})
    assert health(workers_done)[0] == "Progressing"  # the chief ends this job
    earlier = with_records(state, {"chief-0": "succeeded 0123456789ab"})
    assert health(earlier)[0] == "Progressing"  # success of an earlier revision


def test_a_succeeded_job_is_healthy(compiled: dict[str, dict[str, Any]]) -> None:
    state = compiled["running"]
    revision = state["metadata"]["annotations"]["tfcompile.dev/revision"]
    assert health(with_records(state, {"chief-0": f"succeeded {revision}"})) == (
        "Healthy", f"succeeded at revision {revision}")


def test_a_job_whose_task_stopped_retrying_is_degraded(
        compiled: dict[str, dict[str, Any]]) -> None:
    state = compiled["running"]
    revision = state["metadata"]["annotations"]["tfcompile.dev/revision"]
    failed = with_records(state, {"worker-1": f"failed {revision} exit 2 after 0 restarts",
                                  "chief-0": f"succeeded {revision}"})
    assert health(failed) == ("Degraded", "failed for good: worker-1 (exit 2 after 0 restarts)")
    old = with_records(state, {"worker-1": "failed 0123456789ab exit 2 after 0 restarts"})
    assert health(old)[0] == "Progressing"  # a failure of an earlier revision is history


def test_a_suspended_job_is_suspended(compiled: dict[str, dict[str, Any]]) -> None:
    assert health(compiled["suspended"]) == ("Suspended", "suspended")


def test_other_config_maps_stay_healthy() -> None:
    assert health({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                   "data": {"chief-0": "failed abc exit 1"}})[0] == "Healthy"
    assert health({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "x", "labels": {"app.kubernetes.io/managed-by":
                                                        "tfcompile"}}})[0] == "Healthy"


def test_init_ships_the_check_as_an_argocd_cm_patch() -> None:
    files = scaffold("tfcompile==1.0")
    assert files["deploy/argocd/health.lua"] == HEALTH_LUA.read_text()
    patch = YAML(typ="safe").load(files["deploy/argocd/argocd-cm-health.yaml"])
    assert patch == {"data": {HEALTH_KEY: HEALTH_LUA.read_text()}}
