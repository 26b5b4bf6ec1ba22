"""`tfcompile diff`, tree against tree: what a reviewer is told merging does to each job.

Each test compiles a job twice in process (`build`, as `tfcompile build` writes it), reads both
output trees as `diff` reads the working tree, and compares them: one test per kind of change
(created, deleted, image, command or args, script, env, `TF_CONFIG`, resources, pod settings,
replicas, GPUs, immutable fields, claims, suspend, components), then the report's wording and
its safety against hostile names, the bounds of what is read, GPU counts of any length,
which BASE reaches git and how a git tree is parsed. Reading BASE from git is tested in
`test_diff_git.py`.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPOSITORY, job_text
from tfcompile.compiler.checking.diff import bounds
from tfcompile.compiler.checking.diff.comparison import (
    EXACT,
    REVISION_ONLY,
    WITH_THE_JOB,
    JobChange,
    RoleChange,
    compare,
)
from tfcompile.compiler.checking.diff.git_objects import tree_entries
from tfcompile.compiler.checking.diff.git_tree import check_base
from tfcompile.compiler.checking.diff.report import as_markdown, as_text, code
from tfcompile.compiler.checking.diff.trees import (
    DiffInputError,
    JobOutput,
    OutputTree,
    read_job,
)
from tfcompile.compiler.checking.diff.working_tree import read_working_tree
from tfcompile.compiler.objects.names import trial_name
from tfcompile.compiler.output.build import BuildSettings, build
from tfcompile.compiler.output.launcher_zip import launcher_modules, launcher_program

ROLES = """\
chief: {replicas: 1}
worker: {replicas: 2, gpus: 1, resources: {requests: {cpu: "4"}}}
ps: {replicas: 1}
"""
STORAGE = "  storage:\n    shared: {mountPath: /mnt/shared, size: 10Gi}\n"


def spec(*, image: str = "tf:1", roles: str = ROLES, spec_lines: str = 'env: {EPOCHS: "3"}',
         storage: str = STORAGE, name: str = "demo") -> str:
    return job_text(name, image=image, script="train.py", command=None, spec_lines=spec_lines,
                    roles=roles) + storage


def compiled(directory: Path, jobs: dict[str, str], script: str = "print('train')\n"
             ) -> OutputTree:
    """The output tree `tfcompile build` writes for the jobs (name -> job.yaml text)."""
    for name, text in jobs.items():
        folder = directory / "jobs" / name
        folder.mkdir(parents=True)
        (folder / "job.yaml").write_text(text)
        (folder / "train.py").write_text(script)
    build(BuildSettings(inputs=[directory / "jobs"], output=directory / "output",
                        overlays=REPOSITORY / "overlays"))
    return read_working_tree(directory / "output")


def changes(tmp_path: Path, before: dict[str, str], after: dict[str, str],
            script_after: str = "print('train')\n") -> list[JobChange]:
    return compare(compiled(tmp_path / "before", before),
                   compiled(tmp_path / "after", after, script_after))


def one(tmp_path: Path, before: str, after: str, script_after: str = "print('train')\n"
        ) -> JobChange:
    found = changes(tmp_path, {"demo": before}, {"demo": after}, script_after)
    assert [change.job for change in found] == ["demo"]
    return found[0]


def gpus(change: JobChange) -> tuple[int, int]:
    """GPUs requested before and after (small counts: the tests' jobs)."""
    return int(change.gpus_before), int(change.gpus_after)


def reasons(change: JobChange) -> dict[str, tuple[str, ...]]:
    return {role.role: role.restart_reasons for role in change.roles}


def test_the_same_output_is_no_change(tmp_path: Path) -> None:
    assert changes(tmp_path, {"demo": spec()}, {"demo": spec()}) == []
    text = as_text("main", "0" * 40, [])
    assert text.endswith("no job changes\n")


def test_an_image_restarts_its_role_and_the_others_with_the_job(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(image="tf:2"))
    assert change.state == "changed"
    assert reasons(change) == {"chief": ("image",), "ps": ("image",), "worker": ("image",)}
    roles = ROLES.replace("ps: {replicas: 1}", "ps: {replicas: 1, image: tf:9}")
    change = one(tmp_path / "one-role", spec(roles=roles), spec(
        roles=roles.replace("tf:9", "tf:10")))
    assert reasons(change) == {"chief": (WITH_THE_JOB,), "ps": ("image",),
                               "worker": (WITH_THE_JOB,)}
    assert change.roles_changed == ("ps",) and not change.roles_added_or_removed
    assert as_text("main", "a" * 40, [change]).splitlines()[2:4] == [
        "  restarts chief, worker: with the job (ps changed)", "  restarts ps: image"]
    assert change.rescaled == ()
    assert change.gpus_before == change.gpus_after == 2


def test_command_or_args(tmp_path: Path) -> None:
    change = one(tmp_path, spec(spec_lines="args: [--epochs, '3']"),
                 spec(spec_lines="args: [--epochs, '4']"))
    assert set(reasons(change).values()) == {("command or args",)}


def test_the_script(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(), script_after="print('train better')\n")
    assert set(reasons(change).values()) == {("script",)}
    assert [what for _, _, what in change.other_objects].count("added") == 1


def test_env(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(spec_lines='env: {EPOCHS: "4"}'))
    assert set(reasons(change).values()) == {("env",)}


def test_replicas_change_tf_config_and_the_size(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(roles=ROLES.replace("replicas: 2", "replicas: 3")))
    # TF_CONFIG alone: it is no env change of the job's own variables
    assert set(reasons(change).values()) == {("TF_CONFIG",)}
    assert change.rescaled == (RoleChange("worker", 2, 3, change.rescaled[0].restart_reasons),)
    assert gpus(change) == (2, 3)
    text = as_text("main", "a" * 40, [change])
    assert "  replicas: worker 2 → 3\n" in text
    assert "  GPUs requested: 2 → 3\n" in text
    assert "no pod restarts" not in text


def test_gpus_per_pod(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(roles=ROLES.replace("gpus: 1", "gpus: 4")))
    assert gpus(change) == (2, 8)
    assert reasons(change)["worker"] == ("resources",)
    assert reasons(change)["chief"] == (WITH_THE_JOB,)
    assert "  restarts chief, ps: with the job (worker changed)\n" in as_text(
        "main", "a" * 40, [change])


def test_resources(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(roles=ROLES.replace('cpu: "4"', 'cpu: "8"')))
    assert reasons(change)["worker"] == ("resources",)
    assert change.gpus_before == change.gpus_after


def test_pod_settings(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(
        spec_lines='env: {EPOCHS: "3"}\npodTemplate: {spec: {nodeSelector: {pool: train}}}'))
    assert set(reasons(change).values()) == {("pod settings",)}


def test_a_new_role_restarts_the_others_and_starts(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(roles=ROLES + "evaluator: {replicas: 1}\n"))
    assert reasons(change)["evaluator"] == ()
    assert all("TF_CONFIG" in reasons(change)[role] for role in ("chief", "ps", "worker"))
    assert [(role.role, role.replicas_before, role.replicas_after)
            for role in change.rescaled] == [("evaluator", None, 1)]
    assert "replicas: evaluator none → 1" in as_text("main", "a" * 40, [change])
    assert ("Service", "demo-evaluator", "added") in change.other_objects


def test_suspend_scales_to_zero_and_restarts_nothing(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec() + "  suspend: true\n")
    assert change.restarting == ()
    assert [(role.role, role.replicas_before, role.replicas_after)
            for role in change.rescaled] == [("chief", 1, 0), ("ps", 1, 0), ("worker", 2, 0)]
    assert gpus(change) == (2, 0)
    assert as_text("main", "a" * 40, [change]).endswith("  no pod restarts\n")


def test_a_change_outside_the_pods_says_no_pod_restarts(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(storage=STORAGE.replace("10Gi", "50Gi")))
    assert change.restarting == () and change.rescaled == ()
    assert change.other_objects == (("PersistentVolumeClaim", "demo-shared", "changed"),)
    text = as_text("main", "a" * 40, [change])
    assert text.splitlines()[1:] == [
        "demo: changed", "  also changes: PersistentVolumeClaim demo-shared changed",
        "  no pod restarts"]


def test_removing_the_shared_storage_keeps_the_claim_by_default(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(storage=""))
    assert change.deleted_claims == ()
    assert change.kept_claims == ("demo-shared",)
    assert ("  keeps claim demo-shared and the data on it (whenDeleted: Retain; Argo CD and "
            "Flux leave it: delete it with kubectl when done)\n") in as_text(
                "m", "a" * 40, [change])


def test_removing_shared_storage_that_goes_with_the_job_deletes_the_claim(
        tmp_path: Path) -> None:
    deleting = STORAGE.replace("size: 10Gi", "size: 10Gi, whenDeleted: Delete")
    change = one(tmp_path, spec(storage=deleting), spec(storage=""))
    assert change.deleted_claims == ("demo-shared",)
    assert change.kept_claims == ()
    assert "  deletes claim demo-shared and the data on it\n" in as_text("m", "a" * 40, [change])
    assert "- **deletes claim** `demo-shared` and the data on it\n" in as_markdown(
        "m", "a" * 40, [change])


def test_switching_a_claim_to_delete_with_the_job_is_no_pod_restart(tmp_path: Path) -> None:
    deleting = STORAGE.replace("size: 10Gi", "size: 10Gi, whenDeleted: Delete")
    change = one(tmp_path, spec(), spec(storage=deleting))
    assert change.restarting == ()
    assert change.other_objects == (("PersistentVolumeClaim", "demo-shared", "changed"),)


def test_created_and_deleted_jobs(tmp_path: Path) -> None:
    found = changes(tmp_path, {"old": spec(name="old")}, {"new": spec(name="new")})
    assert [(change.job, change.state) for change in found] == [("new", "created"),
                                                                ("old", "deleted")]
    created, deleted = found
    assert gpus(created) == (0, 2)
    assert created.restarting == () and deleted.restarting == ()
    assert deleted.deleted_claims == ()
    assert deleted.kept_claims == ("old-shared",)
    assert gpus(deleted) == (2, 0)
    text = as_text("main", "b" * 40, found)
    assert "new: created\n" in text
    assert "old: deleted: its pods stop and its objects are pruned\n" in text


def test_components_added(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(spec_lines='env: {EPOCHS: "3"}\noverlays: [gpu]'))
    (added,) = change.components_added
    assert added.endswith("/overlays/gpu") and change.components_removed == ()
    text = as_text("main", "a" * 40, [change])
    assert f"  components: added {added} (pods they patch restart)\n" in text


def _statefulset(output: JobOutput, name: str) -> dict[str, Any]:
    return output.of_kind("StatefulSet")[name]


def test_an_immutable_field_means_recreating_the_statefulset(tmp_path: Path) -> None:
    base = compiled(tmp_path, {"demo": spec()})
    objects = copy.deepcopy(list(base["demo"].objects))
    head = JobOutput(tuple(objects), base["demo"].components)
    _statefulset(head, "demo-worker")["spec"]["podManagementPolicy"] = "OrderedReady"
    (change,) = compare(base, {"demo": head})
    assert [(item.statefulset, item.fields) for item in change.recreations] == [
        ("demo-worker", ("spec.podManagementPolicy",))]
    assert reasons(change)["worker"] == ("StatefulSet recreated",)
    assert "recreates StatefulSet demo-worker: spec.podManagementPolicy cannot change" in (
        as_text("main", "a" * 40, [change]))


def test_a_mounted_config_map_changed_under_its_name_is_named(tmp_path: Path) -> None:
    """The revision alone changed in the templates: say what the pods mount that changed."""
    base = compiled(tmp_path, {"demo": spec()})
    objects = copy.deepcopy(list(base["demo"].objects))
    head = JobOutput(tuple(objects), base["demo"].components)
    for statefulset in head.of_kind("StatefulSet").values():
        statefulset["spec"]["template"]["metadata"]["annotations"][
            "tfcompile.dev/revision"] = "000000000000"
    (change,) = compare(base, {"demo": head})
    assert set(reasons(change).values()) == {(REVISION_ONLY,)}
    launcher = next(name for name in head.of_kind("ConfigMap") if "launcher" in name)
    program = head.of_kind("ConfigMap")[launcher]["binaryData"]
    shipped = dict(program)
    program.update(launcher_program(tuple(
        (name, text + "# changed\n") for name, text in launcher_modules())).binary_data())
    (change,) = compare(base, {"demo": head})
    assert set(reasons(change).values()) == {("launcher",)}  # the program, in its zip
    program.update(shipped)
    data = head.of_kind("ConfigMap")[launcher]["data"]
    data[next(iter(data))] += "\n# changed\n"
    (change,) = compare(base, {"demo": head})
    assert set(reasons(change).values()) == {("launcher",)}


def test_the_launcher_s_settings_restart_and_a_new_launcher_text_does_not(
        tmp_path: Path) -> None:
    """The settings name their revision, which changes with anything: only a change of how the
    launcher runs is called `launcher`. A new program text of the same protocol (the ConfigMap
    changed in place, no template) restarts nothing."""
    change = one(tmp_path / "policy", spec(), spec() + "  failurePolicy: {maxRestarts: 3}\n")
    assert set(reasons(change).values()) == {("launcher",)}
    base = compiled(tmp_path / "text", {"demo": spec()})
    head = JobOutput(tuple(copy.deepcopy(list(base["demo"].objects))), base["demo"].components)
    launcher = next(name for name in head.of_kind("ConfigMap") if "launcher" in name)
    head.of_kind("ConfigMap")[launcher]["binaryData"] = launcher_program(tuple(
        (name, text + "# a fix\n") for name, text in launcher_modules())).binary_data()
    (change,) = compare(base, {"demo": head})
    assert change.restarting == ()
    assert as_text("main", "a" * 40, [change]).endswith("  no pod restarts\n")


def test_a_new_protocol_s_program_path_is_a_launcher_restart(tmp_path: Path) -> None:
    """An upgrade across protocols (here 2, which ran `tfcompile-launcher.py` from a ConfigMap
    `-v2`, to this one): the container starts the launcher another way and mounts another
    ConfigMap, with the same training command. A reviewer reads `launcher`, not `command or
    args`."""
    head = compiled(tmp_path, {"demo": spec()})
    objects = copy.deepcopy(list(head["demo"].objects))
    base = JobOutput(tuple(objects), head["demo"].components)
    for statefulset in base.of_kind("StatefulSet").values():
        template = statefulset["spec"]["template"]
        template["metadata"]["annotations"]["tfcompile.dev/revision"] = "000000000000"
        (container,) = template["spec"]["containers"]
        container["command"][1] = container["command"][1].removesuffix("z")
        for volume in template["spec"]["volumes"]:
            if volume["name"] == "tfcompile-launcher":
                volume["configMap"]["name"] = "demo-launcher-v2"
    (change,) = compare({"demo": base}, head)
    assert set(reasons(change).values()) == {("launcher",)}


def test_markdown_for_a_pull_request(tmp_path: Path) -> None:
    change = one(tmp_path, spec(), spec(roles=ROLES.replace("replicas: 2", "replicas: 3")))
    markdown = as_markdown("origin/main", "c" * 40, [change])
    assert markdown.startswith("### tfcompile diff\n\nWhat merging does to the jobs, from "
                               "`output/` at `origin/main` (`cccccccccccc`) to this change.\n")
    assert "#### `demo`: changed\n\n" in markdown
    assert "- **restarts** `chief`, `ps`, `worker`: " in markdown
    assert "- replicas: `worker` 2 → 3\n" in markdown
    assert "- GPUs requested: 2 → 3\n" in markdown
    assert as_markdown("main", "c" * 40, []).endswith("No job changes.\n")


def test_the_report_is_deterministic(tmp_path: Path) -> None:
    jobs = {"b": spec(name="b"), "a": spec(name="a")}
    after = {"a": spec(name="a", image="tf:2"), "b": spec(name="b", image="tf:2")}
    first = as_text("main", "d" * 40, changes(tmp_path / "1", jobs, after))
    second = as_text("main", "d" * 40, changes(tmp_path / "2", jobs, after))
    assert first == second
    assert first.index("\na: changed") < first.index("\nb: changed")


def sweep_spec(rates: str, board: bool = True) -> str:
    """A sweep of two parameters over one claim, with the sweep's one TensorBoard."""
    return job_text("grid", command="[python, train.py]", spec_lines=(
        "storage:\n  shared: {mountPath: /mnt/shared, existingClaim: grid-logs}\n"
        + ("tensorboard: {logDir: /mnt/shared/logs}\n" if board else "") +
        f"sweep:\n  parameters:\n    LEARNING_RATE: [{rates}]\n    HIDDEN_LAYERS: [\"5\"]\n"),
        roles="worker: {replicas: 1}")


def test_a_trial_is_named_by_its_values_and_the_sweeps_tensorboard_as_that(
        tmp_path: Path) -> None:
    found = changes(tmp_path, {"grid": sweep_spec('"0.1", "0.2"')},
                    {"grid": sweep_spec('"0.1", "0.3"')})
    text = as_text("main", "f" * 40, found)
    added, removed = (trial_name("grid", [("HIDDEN_LAYERS", "5"), ("LEARNING_RATE", rate)])
                      for rate in ("0.3", "0.2"))
    assert f"\n{added} (HIDDEN_LAYERS=5, LEARNING_RATE=0.3): created\n" in text
    assert f"\n{removed} (HIDDEN_LAYERS=5, LEARNING_RATE=0.2): deleted" in text
    markdown = as_markdown("main", "f" * 40, found)
    assert f"#### `{added}` (`HIDDEN_LAYERS=5`, `LEARNING_RATE=0.3`): created\n" in markdown
    board = changes(tmp_path / "board", {"grid": sweep_spec('"0.1"', board=False)},
                    {"grid": sweep_spec('"0.1"')})  # no trial changes: only the board
    assert as_text("main", "f" * 40, board).endswith(
        "\ngrid-tensorboard (the TensorBoard of sweep grid): created\n")
    assert [change.job for change in board] == ["grid-tensorboard"]


def test_a_trials_values_are_printed_escaped() -> None:
    state = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "j-state", "labels": {"tfcompile.dev/sweep": "s"},
                          "annotations": {"tfcompile.dev/sweep-values":
                                          '{"A": "\\u001b[2J`x`", "B\\u202e": "1"}'}}}
    found = compare({}, {"j": JobOutput((state,), ())})
    text = as_text("main", "f" * 40, found)
    assert "\x1b" not in text and "\u202e" not in text
    assert "j (A=\\x1b[2J`x`, B\\u202e=1): created" in text
    assert "#### `j` (`` A=\\x1b[2J`x` ``, `B\\u202e=1`): created" in as_markdown(
        "main", "f" * 40, found)


def test_hostile_names_are_printed_escaped() -> None:
    statefulset = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                   "metadata": {"name": "x\x1b]0;owned\x07",
                                "labels": {"tfcompile.dev/role": "r`[a](b)\u202e"}},
                   "spec": {"replicas": 1, "template": {"spec": {}}}}
    job = JobOutput((statefulset,), ())
    changes_found = compare({}, {"j\x1b[2J`": job})
    text = as_text("base\r", "e" * 40, changes_found)
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    assert "j\\x1b[2J`: created" in text
    markdown = as_markdown("b", "e" * 40, changes_found)
    assert "#### `` j\\x1b[2J` ``: created" in markdown
    assert "``r`[a](b)\\u202e``" in markdown
    assert code("`") == "`` ` ``"


@pytest.mark.parametrize(("files", "message"), [
    ({}, "output/j/kustomization.yaml: is missing"),
    ({"kustomization.yaml": b"resources: [a.yaml\n"},
     "output/j/kustomization.yaml: is not valid YAML (line 2, column 1)"),
    ({"kustomization.yaml": b"resources: [../other/a.yaml]\n"},
     "output/j/kustomization.yaml: resource ../other/a.yaml is not a file of the job "
     "directory, which tfcompile never writes"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n"}, "output/j/a.yaml: is missing"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n", "a.yaml": b"\xff\xfe"},
     "output/j/a.yaml: is not UTF-8 text"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n", "a.yaml": b"kind: [x]\n"},
     "output/j/a.yaml: is not one Kubernetes object with a kind and a name"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n",
      "a.yaml": b"kind: 'Con\\x1b'\nmetadata: {name: a}\n"},
     "output/j/a.yaml: is not one Kubernetes object with a kind and a name"),
    ({"kustomization.yaml": b"resources: a.yaml\n"},
     "output/j/kustomization.yaml: resources is not a list of paths"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n",
      "a.yaml": b"kind: ConfigMap\nmetadata: {name: a}\ndata: " + b"[" * 100_000},
     "output/j/a.yaml: line 3, column 70: nested more than 64 levels deep"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n",
      "a.yaml": b"kind: ConfigMap\nmetadata: {name: a}\nspec: &a\n  - " + b"*a\n"},
     "output/j/a.yaml: uses YAML aliases, which tfcompile never writes"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n", "a.yaml": (
        b"kind: ConfigMap\nmetadata: {name: a}\na: &a [x, x]\nb: &b [*a, *a]\n"
        + b"".join(b"%c: &%c [*%c, *%c]\n" % (c, c, c - 1, c - 1) for c in b"cdefghijklmno"))},
     "output/j/a.yaml: uses YAML aliases, which tfcompile never writes"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n",
      "a.yaml": b"kind: ConfigMap\nmetadata: {name: !!int a}\n"},
     "output/j/a.yaml: is not valid YAML (line 2, column 18)"),
    ({"kustomization.yaml": b"resources: [" + b", ".join(
        b"f%d.yaml" % index for index in range(65)) + b"]\n"},
     "output/j/kustomization.yaml: lists 65 files, more than the 64 diff reads of one job; "
     "tfcompile writes some twenty at most"),
    ({"kustomization.yaml": b"resources: [a.yaml]\n",
      "a.yaml": b"kind: ConfigMap\nmetadata: {name: a}\n#" + b"x" * 4 * 1024 * 1024},
     "output/j/a.yaml: is larger than 4 MiB (4,194,341 bytes), the most diff reads of one "
     "file; tfcompile writes none so large"),
], ids=["no-kustomization", "malformed", "outside", "missing-resource", "not-utf-8",
        "not-an-object", "kind-not-a-name", "resources-not-a-list", "nested-deeply",
        "holds-itself", "alias-bomb", "tag-cannot-hold-it", "too-many-files", "too-large"])
def test_an_unreadable_job_is_one_line(files: dict[str, bytes], message: str) -> None:
    with pytest.raises(DiffInputError) as raised:
        read_job(files.get, lambda name: f"output/j/{name}", "output/j")
    assert str(raised.value) == message


def test_a_link_in_the_working_tree_is_refused(tmp_path: Path) -> None:
    output = tmp_path / "output"
    (output / "j").mkdir(parents=True)
    (tmp_path / "elsewhere.yaml").write_text("kind: ConfigMap\nmetadata: {name: a}\n")
    (output / "j" / "kustomization.yaml").write_text("resources: [a.yaml]\n")
    (output / "j" / "a.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(DiffInputError, match=r"/output/j/a\.yaml: is a symbolic link"):
        read_working_tree(output)
    (output / "j" / "a.yaml").unlink()
    (output / "j" / "kustomization.yaml").write_text("resources: []\n")
    (output / "k").symlink_to(output / "j")
    with pytest.raises(DiffInputError, match=r"/output/k: is a symbolic link"):
        read_working_tree(output)


def test_a_missing_working_tree_output_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DiffInputError, match="does not exist in the working tree"):
        read_working_tree(tmp_path / "missing")


ODD_VALUES = [None, 1, -1, "x", [], {}, [1, {"name": None}], {"name": 3}, True, 2.5, "\x1b",
              {"a": [None]}, "7", ["\u202e"]]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*path, index)))
    return found


def test_any_odd_value_anywhere_is_compared_or_refused_in_one_line() -> None:
    """Whatever a file holds where tfcompile writes something else, the comparison either
    reports or refuses with `DiffInputError`; never another exception (a traceback)."""
    import random

    base = read_working_tree(REPOSITORY / "output")
    chooser = random.Random(17)
    for _ in range(400):
        job = chooser.choice(sorted(base))
        objects = copy.deepcopy(list(base[job].objects))
        changed = chooser.choice(objects)
        # kind and metadata.name are checked when a file is read (test above)
        path = chooser.choice([path for path in _paths(changed) if path and path[0] != "kind"
                               and path not in (("metadata",), ("metadata", "name"))])
        target = changed
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = copy.deepcopy(chooser.choice(ODD_VALUES))
        head = {**base, job: JobOutput(tuple(objects), base[job].components)}
        for before, after in ((base, head), (head, base)):
            try:
                found = compare(before, after)
            except DiffInputError as error:
                assert "\n" not in str(error)
                continue
            assert "\x1b" not in as_text("main", "f" * 40, found) + as_markdown(
                "main", "f" * 40, found)


def test_roles_restarting_with_the_job_are_told_why(tmp_path: Path) -> None:
    base = compiled(tmp_path, {"demo": spec()})
    objects = [item for item in copy.deepcopy(list(base["demo"].objects))
               if item["metadata"]["name"] != "demo-chief"]
    head = JobOutput(tuple(objects), base["demo"].components)
    for statefulset in head.of_kind("StatefulSet").values():
        statefulset["spec"]["template"]["metadata"]["annotations"][
            "tfcompile.dev/revision"] = "000000000000"
    (change,) = compare(base, {"demo": head})
    assert reasons(change) == {"chief": (), "ps": (WITH_THE_JOB,), "worker": (WITH_THE_JOB,)}
    text = as_text("main", "a" * 40, [change])
    assert "  restarts ps, worker: with the job (a role added or removed)\n" in text
    assert "  replicas: chief 1 → none\n" in text
    ps = head.of_kind("StatefulSet")["demo-ps"]
    ps["metadata"]["labels"]["tfcompile.dev/role"] = "p\x1bs"
    ps["spec"]["template"]["spec"]["containers"][0]["image"] = "tf:2"
    (change,) = compare(base, {"demo": head})
    text = as_text("main", "a" * 40, [change])
    assert ("  restarts worker: with the job (p\\x1bs changed; a role added or removed)\n"
            in text)
    assert "\x1b" not in text + as_markdown("main", "a" * 40, [change])


def _gpu_statefulset(replicas: Any, limit: Any) -> dict[str, Any]:
    container = {"name": "tensorflow", "resources": {"limits": {"nvidia.com/gpu": limit}}}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "j-worker"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [container]}}}}


def test_a_gpu_limit_of_any_length_is_counted_and_shown_short() -> None:
    """A quantity is text in the files: more digits than Python converts to an int (4,300)
    is counted exactly all the same, and the report shows its ends and its length."""
    long_limit = "1" + "0" * 5_000
    base = {"j": JobOutput((_gpu_statefulset(10 ** 90, long_limit),), ())}
    head = {"j": JobOutput((_gpu_statefulset(2, "1"),), ())}
    (change,) = compare(base, head)
    assert change.gpus_before == Decimal("1" + "0" * 5_090)
    assert change.gpus_after == 2
    assert "  GPUs requested: 100000…000000 (5,091 digits) → 2\n" in as_text(
        "main", "a" * 40, [change])
    millions = {"j": JobOutput((_gpu_statefulset(3, "7" * 2_000_000),), ())}
    (change,) = compare(millions, head)
    assert change.gpus_before == EXACT.multiply(Decimal(3), Decimal("7" * 2_000_000))
    assert "GPUs requested: 233333…333331 (2,000,001 digits) → 2" in as_markdown(
        "main", "a" * 40, [change])


@pytest.mark.parametrize("limit", ["1e3", "-1", "1.5", "\u0661", True, 2.0, None, [1]])
def test_a_gpu_limit_that_is_not_a_whole_number_is_one_line(limit: Any) -> None:
    base = {"j": JobOutput((_gpu_statefulset(1, limit),), ())}
    with pytest.raises(DiffInputError, match=r"^job j: StatefulSet j-worker: the "
                                             r"nvidia\.com/gpu limit is not a whole number "
                                             r"of devices$"):
        compare(base, {})


CONFIG_MAP = "kind: ConfigMap\nmetadata: {name: %s}\n"


def _job_directory(output: Path, job: str, files: dict[str, str]) -> None:
    (output / job).mkdir(parents=True)
    for name, text in files.items():
        (output / job / name).write_text(text)


def test_the_working_tree_is_read_within_the_bounds(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a job's kustomization and the files it lists are read, each within the bound of
    one file, a job's within the bound of a job and every job's within the bound of a tree,
    checked before the files are read."""
    monkeypatch.setattr(bounds, "MAXIMUM_FILE_BYTES", 100)
    monkeypatch.setattr(bounds, "MAXIMUM_JOB_BYTES", 180)
    monkeypatch.setattr(bounds, "MAXIMUM_TREE_BYTES", 200)
    output = tmp_path / "output"
    listing = "resources: [a.yaml]\n"
    _job_directory(output, "j", {"kustomization.yaml": listing, "a.yaml": CONFIG_MAP % "a",
                                 "unlisted.bin": "x" * 1000})
    assert list(read_working_tree(output)) == ["j"]
    (output / "j" / "a.yaml").write_text(CONFIG_MAP % "a" + "#" * 100)
    with pytest.raises(DiffInputError) as raised:
        read_working_tree(output)
    assert str(raised.value) == (f"{output}/j/a.yaml: is larger than 100 bytes (136 bytes), "
                                 "the most diff reads of one file; tfcompile writes none so "
                                 "large")
    (output / "j" / "a.yaml").write_text(CONFIG_MAP % "a" + "#" * 50)
    (output / "j" / "b.yaml").write_text(CONFIG_MAP % "b" + "#" * 50)
    (output / "j" / "kustomization.yaml").write_text("resources: [a.yaml, b.yaml]\n")
    with pytest.raises(DiffInputError) as raised:
        read_working_tree(output)
    assert str(raised.value) == (f"{output}/j: its kustomization and the files it lists are "
                                 "200 bytes, more than the 180 bytes diff reads of one job")
    (output / "j" / "kustomization.yaml").write_text(listing)
    _job_directory(output, "k", {"kustomization.yaml": listing, "a.yaml": CONFIG_MAP % "a"})
    assert sorted(read_working_tree(output)) == ["j", "k"]
    _job_directory(output, "l", {"kustomization.yaml": listing, "a.yaml": CONFIG_MAP % "a"})
    with pytest.raises(DiffInputError) as raised:
        read_working_tree(output)
    assert str(raised.value) == (f"{output}: the jobs' kustomizations and the files they list "
                                 "are more than the 200 bytes diff reads of one output tree")
    (output / "l" / "kustomization.yaml").write_text(listing + "#" * 100)
    with pytest.raises(DiffInputError, match=r"/output/l/kustomization\.yaml: is larger than "
                                             r"100 bytes \(120 bytes\)"):
        read_working_tree(output)


@pytest.mark.parametrize("base", ["HEAD", "origin/main", "HEAD^1", "main@{2024-01-01 10:00:00}",
                                  "HEAD^{/fix: a colon}", "v1.0^{commit}", "a" * 40])
def test_a_base_naming_a_commit_goes_to_git(base: str) -> None:
    check_base(base)


@pytest.mark.parametrize(("base", "message"), [
    ("-h", "-h: looks like an option; BASE is a commit, branch or tag"),
    ("--output=x", "--output=x: looks like an option; BASE is a commit, branch or tag"),
    (":0:output/x", ":0:output/x: names a file, a directory or the index (':'); BASE is a "
                    "commit, branch or tag"),
    ("HEAD@{1}:output", "HEAD@{1}:output: names a file, a directory or the index (':'); "
                        "BASE is a commit, branch or tag"),
    ("}:x", "}:x: names a file, a directory or the index (':'); BASE is a commit, branch or "
            "tag"),
    ("\x1b:", "\\x1b:: names a file, a directory or the index (':'); BASE is a commit, branch "
              "or tag"),
])
def test_a_base_that_is_no_commit_never_reaches_git(base: str, message: str) -> None:
    with pytest.raises(DiffInputError) as raised:
        check_base(base)
    assert str(raised.value) == message


def test_a_git_tree_s_entries() -> None:
    identifier = bytes(range(20))
    data = (b"100644 kustomization.yaml\0" + identifier + b"40000 sub\0" + identifier
            + b"120000 link\xff\0" + identifier)
    assert tree_entries(data, 20) == {
        "kustomization.yaml": (0o100644, identifier.hex()), "sub": (0o40000, identifier.hex()),
        "link\udcff": (0o120000, identifier.hex())}
    for broken in (data[:-1], b"100644 a", b"10064x a\0" + identifier, b"100644 a\0"):
        with pytest.raises(ValueError):
            tree_entries(broken, 20)


def test_the_values_read_are_bounded_per_job_and_per_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a file costs to parse and compare is its values: a job's files, and every job's,
    are held to a number of them, counted as each file is parsed (7 in each file here)."""
    monkeypatch.setattr(bounds, "MAXIMUM_JOB_VALUES", 10)
    monkeypatch.setattr(bounds, "MAXIMUM_TREE_VALUES", 20)
    output = tmp_path / "output"
    for job in ("j", "k"):
        _job_directory(output, job, {"kustomization.yaml": "resources: [a.yaml]\n",
                                     "a.yaml": CONFIG_MAP % "a", "b.yaml": CONFIG_MAP % "b"})
    assert sorted(read_working_tree(output)) == ["j", "k"]
    (output / "k" / "kustomization.yaml").write_text("resources: [a.yaml, b.yaml]\n")
    with pytest.raises(DiffInputError) as raised:
        read_working_tree(output)
    assert str(raised.value) == (f"{output}/k: its files hold more than 10 values (keys "
                                 "included), the most diff reads of one job; tfcompile writes "
                                 "some 2,000")
    (output / "k" / "kustomization.yaml").write_text("resources: [a.yaml]\n")
    _job_directory(output, "l", {"kustomization.yaml": "resources: [a.yaml]\n",
                                 "a.yaml": CONFIG_MAP % "a"})
    with pytest.raises(DiffInputError) as raised:
        read_working_tree(output)
    assert str(raised.value) == (f"{output}: the jobs' files hold more than 20 values (keys "
                                 "included), the most diff reads of one output tree")
