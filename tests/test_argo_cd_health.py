"""The Argo CD health check `init` writes, run by a real Lua 5.1 opened as Argo CD opens it.

Argo CD runs health checks with gopher-lua, a Lua 5.1, and opens only the base, table and package
libraries and an `os` with `time` and `date` (no `string`: a string has no methods either). The
check runs here in lupa's Lua 5.1 (from PyPI) with exactly those, so a check that reaches for
`string` fails here as it fails inside Argo CD (tests/gitops/ runs it inside a real Argo CD).
Each case is a state ConfigMap as tfcompile compiles it, with records as the launcher writes
them.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
from lupa import lua51  # type: ignore[import-untyped]
from ruamel.yaml import YAML

from tests.conftest import job_text
from tfcompile.compiler.cli import main
from tfcompile.compiler.scaffold.repository import HEALTH_KEY, scaffold

HEALTH_LUA = resources.files("tfcompile.compiler.scaffold").joinpath("files/health.lua")

JOB = job_text(image="tf", command="[python, train.py]",
               roles="chief: {replicas: 1}\nworker: {replicas: 2}")
WORKERS_ONLY = job_text(image="tf", command="[python, train.py]",
                        roles="worker: {replicas: 12}")

# What Argo CD's Lua VM has (argo-cd util/lua/lua.go): gopher-lua's base library, `table`,
# `package`, and its own `os` with only `time` and `date`. The string library is not opened,
# so strings have no metatable: `value:match(...)` fails as `string.match(...)` does.
ARGO_CD_VM = """
local names = {"assert", "collectgarbage", "dofile", "error", "getfenv", "getmetatable",
  "ipairs", "load", "loadfile", "loadstring", "module", "next", "pairs", "pcall", "print",
  "rawequal", "rawget", "rawset", "require", "select", "setfenv", "setmetatable", "tonumber",
  "tostring", "type", "unpack", "xpcall", "_VERSION"}
local environment = {}
for _, name in ipairs(names) do environment[name] = _G[name] end
environment._G = environment
environment.table = table
environment.package = package
environment.os = {time = os.time, date = os.date}
debug.setmetatable("", nil)
return function(source, object)
  environment.obj = object
  local check = assert(loadstring(source, "health.lua"))
  setfenv(check, environment)
  local hs = check()
  return hs.status, hs.message
end
"""


def run_in_argo_cd_vm(source: str, kubernetes_object: dict[str, Any]) -> tuple[str, str]:
    """(status, message) of a health script for an object, in a VM opened as Argo CD's is."""
    runtime = lua51.LuaRuntime(register_eval=False, register_builtins=False,
                               unpack_returned_tuples=True)
    run = runtime.execute(ARGO_CD_VM)
    status, message = run(source, runtime.table_from(kubernetes_object, recursive=True))
    return str(status), "" if message is None else str(message)


def health(kubernetes_object: dict[str, Any]) -> tuple[str, str]:
    """(status, message) of the health check for an object, as Argo CD would compute it."""
    return run_in_argo_cd_vm(HEALTH_LUA.read_text(), kubernetes_object)


def test_the_vm_has_no_string_library() -> None:
    """What broke the first health check inside Argo CD fails here too."""
    for script in ('return {status = string.match("a b", "^(%S+)")}',
                   'local value = "a b"; return {status = value:match("^(%S+)")}'):
        with pytest.raises(lua51.LuaError):
            run_in_argo_cd_vm(script, {})
    assert run_in_argo_cd_vm('return {status = table.concat({"a", "b"}, ",") .. #"xy"}',
                             {}) == ("a,b2", "")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The state ConfigMap of the job, running and suspended."""
    found = {}
    for variant, text in (("running", JOB), ("suspended", JOB + "  suspend: true\n"),
                          ("workers", WORKERS_ONLY), ("no launcher", JOB + "  launcher: none\n"),
                          ("no launcher, suspended",
                           JOB + "  launcher: none\n  suspend: true\n")):
        directory = tmp_path_factory.mktemp(variant)
        (directory / "job.yaml").write_text(text)
        assert main(["build", str(directory), "-o", str(directory / "output")]) == 0
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


def test_a_training_s_progress_is_in_the_message(compiled: dict[str, dict[str, Any]]) -> None:
    """The progress the first task that ends the job reported at the deployed revision, as
    its launcher records it (the line, and the revision it is of)."""
    state = compiled["workers"]
    revision = state["metadata"]["annotations"]["tfcompile.dev/revision"]
    reported = with_records(state, {
        "worker-0": f"training {revision} since 1700000000 stops 0",
        "worker-1.progress": "epoch 2/8, loss 0.35", "worker-1.progress-revision": revision,
        "worker-0.progress": "epoch 3/8, loss 0.21", "worker-0.progress-revision": revision})
    assert health(reported) == (
        "Progressing", f"training revision {revision}: 0 of 12 tasks that end the job "
        "succeeded; worker-0: epoch 3/8, loss 0.21")
    earlier = with_records(state, {"worker-0.progress": "epoch 8/8",
                                   "worker-0.progress-revision": "0123456789ab"})
    assert health(earlier)[1].endswith("tasks that end the job succeeded")
    chief_ends = compiled["running"]  # the chief ends this job: the workers' progress is not
    chief_revision = chief_ends["metadata"]["annotations"]["tfcompile.dev/revision"]
    assert health(with_records(chief_ends, {
        "worker-0.progress": "epoch 3/8", "worker-0.progress-revision": chief_revision,
        "chief-0.progress": "step 40", "chief-0.progress-revision": chief_revision}))[1] == (
            f"training revision {chief_revision}: 0 of 1 tasks that end the job succeeded; "
            "chief-0: step 40")


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
                                  "failed-revision": revision,
                                  "failed-task": "worker-1 (exit 2 after 0 restarts)",
                                  "chief-0": f"succeeded {revision}"})
    assert health(failed) == ("Degraded", "failed for good: worker-1 (exit 2 after 0 restarts)")
    old = with_records(state, {"worker-1": "failed 0123456789ab exit 2 after 0 restarts",
                               "failed-revision": "0123456789ab",
                               "failed-task": "worker-1 (exit 2 after 0 restarts)"})
    assert health(old)[0] == "Progressing"  # a failure of an earlier revision is history


def test_a_job_of_workers_succeeds_when_every_worker_has(
        compiled: dict[str, dict[str, Any]]) -> None:
    state = compiled["workers"]
    revision = state["metadata"]["annotations"]["tfcompile.dev/revision"]
    assert state["metadata"]["annotations"]["tfcompile.dev/success-tasks"] == ",".join(
        f"worker-{index}" for index in range(12))
    records = {f"worker-{index}": f"succeeded {revision}" for index in range(11)}
    assert health(with_records(state, records)) == (
        "Progressing", f"training revision {revision}: 11 of 12 tasks that end the job "
        "succeeded")
    records["worker-11"] = f"succeeded {revision}"
    assert health(with_records(state, records)) == ("Healthy",
                                                    f"succeeded at revision {revision}")


def test_a_suspended_job_is_suspended(compiled: dict[str, dict[str, Any]]) -> None:
    assert health(compiled["suspended"]) == ("Suspended", "suspended")


def test_a_job_without_the_launcher_leaves_its_health_to_its_statefulsets(
        compiled: dict[str, dict[str, Any]]) -> None:
    """Nothing records its outcome, so its state would be Progressing for ever otherwise."""
    assert health(compiled["no launcher"]) == (
        "Healthy", "runs without tfcompile's launcher: nothing records success or failure")
    assert health(compiled["no launcher, suspended"]) == ("Suspended", "suspended")


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
