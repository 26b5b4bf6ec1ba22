"""Components that cannot meet: the renderings before each are told from the final one.

When every component only patches objects of kinds no other component names, without changing
who they are, `validate` renders the job once and tells the renderings before each component
from it (`component_reach`). Told and rendered steps are compared object for object with what
the real kustomize renders for each prefix of the components; the reports are compared with
the ones made from rendered steps; and each shape that could let two components meet is shown
to be rendered step by step."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import OVERLAYS, Result, job_text
from tfcompile.compiler.checking.validation import component_reach, validator
from tfcompile.compiler.checking.validation.component_reach import (
    kinds_each_changes,
    steps_from_final,
)
from tfcompile.compiler.checking.validation.component_steps import (
    component_steps,
    kustomization_with_components,
)
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests
from tfcompile.compiler.rendering.plain_kustomization import render_plain

STORAGE = "storage:\n  shared: {mountPath: /mnt/shared, size: 10Gi}\n"


def built(tmp_path: Path, run_cli: Callable[..., Result], overlays: str,
          extra_components: dict[str, str] | None = None, spec: str = STORAGE) -> Path:
    """The job `reach` (a chief and two GPU workers, a shared claim) built under `overlays`."""
    overlay_directory = tmp_path / "overlays"
    overlay_directory.mkdir()
    for name in ("gpu", "azure", "azure-smb"):
        (overlay_directory / name).symlink_to(OVERLAYS / name)
    for name, text in (extra_components or {}).items():
        (overlay_directory / name).mkdir()
        (overlay_directory / name / "kustomization.yaml").write_text(text)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text(job_text(
        "reach", spec_lines=f"overlays: [{overlays}]\n" + spec,
        roles="chief: {replicas: 1}\nworker: {replicas: 2, gpus: 1}"))
    output = tmp_path / "output"
    result = run_cli("build", str(jobs), "-o", str(output), "--overlays", str(overlay_directory))
    assert result.status == 0, result.stderr
    return output / "reach"


RELABEL = ("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n"
           "- target: {kind: ConfigMap}\n  patch: |-\n"
           "    - {op: add, path: /metadata/labels/team, value: a}\n")


@pytest.mark.parametrize("overlays", ["gpu, azure", "azure, gpu", "azure-smb", "gpu",
                                      "gpu, relabel, azure"])
def test_told_steps_equal_the_steps_kustomize_renders(
        tmp_path: Path, run_cli: Callable[..., Result], overlays: str) -> None:
    directory = built(tmp_path, run_cli, overlays, {"relabel": RELABEL})
    kustomization = kustomization_with_components(directory)
    assert kustomization is not None
    kinds = kinds_each_changes(directory, kustomization.components)
    assert kinds is not None
    before_first = render_plain(directory, before_components=True)
    assert before_first is not None
    final = parse_manifests(render(directory))
    told = steps_from_final(before_first, final, kinds)
    rendered = component_steps(directory, kustomization, one_by_one=True).before
    assert len(told) == len(rendered) == len(kustomization.components)
    for number, (ours, theirs) in enumerate(zip(told, rendered, strict=True)):
        assert ours == list(theirs), f"before component {number}"
    # Each step differs from the next: the comparison above compared something.
    assert all(told[number] != told[number + 1] for number in range(len(told) - 1))
    assert told[-1] != final


def test_a_component_changing_what_the_job_set_is_found_with_one_kustomize_run(
        tmp_path: Path, run_cli: Callable[..., Result], kustomize_runs: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A component replacing the labels of the job's ConfigMaps, behind gpu and azure: found
    from the job's one rendering, in the words the rendered steps give."""
    relabel = component(inline("- {op: replace, path: /metadata/labels, value: {team: a}}\n"))
    directory = built(tmp_path, run_cli, "gpu, azure, relabel", {"relabel": relabel})
    told = validator.validate(directory)
    assert len(kustomize_runs.read_text().splitlines()) == 1
    dropped = [problem for problem in told.problems
               if "component ../../overlays/relabel dropped the label" in problem.message]
    assert dropped, told.problems
    monkeypatch.setattr(validator, "kinds_each_changes", lambda *arguments: None)
    rendered = validator.validate(directory)
    assert told.problems == rendered.problems
    assert told.warnings == rendered.warnings and told.notes == rendered.notes


STATEFUL_SET_PATCH = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: any}
spec: {template: {spec: {nodeSelector: {pool: a}}}}
"""


def component(entries: str, fields: str = "") -> str:
    return ("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" + fields
            + "patches:\n" + textwrap.dedent(entries))


def inline(patch: str, target: str = "{kind: ConfigMap}", extra: str = "") -> str:
    return (f"- target: {target}\n{extra}  patch: |-\n"
            + textwrap.indent(textwrap.dedent(patch), "    "))


CONFIG_MAP_PATCH = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: any}\ndata: {a: b}\n"

MEETING = {
    "a kind gpu patches too": component(inline(STATEFUL_SET_PATCH, "{kind: StatefulSet}")),
    "a kind given as a pattern": component(inline(CONFIG_MAP_PATCH, "{kind: 'Config.*'}")),
    "no kind": component(inline(CONFIG_MAP_PATCH, "{name: reach-state}")),
    "options that allow a name change": component(inline(
        CONFIG_MAP_PATCH, extra="  options: {allowNameChange: true}\n")),
    "a patch from a file": component("- target: {kind: ConfigMap}\n  path: patch.yaml\n"),
    "a JSON patch of the name": component(inline(
        "- {op: replace, path: /metadata/name, value: other}\n")),
    "a JSON patch moving the namespace": component(inline(
        "- {op: move, from: /metadata/namespace, path: /metadata/labels/old}\n")),
    "a JSON patch of the kind": component(inline(
        "- {op: replace, path: /kind, value: Secret}\n")),
    "a JSON patch of the whole object": component(inline("- {op: replace, path: '', value: {}}\n")),
    "two documents": component(inline(CONFIG_MAP_PATCH + "---\n" + CONFIG_MAP_PATCH)),
    "a field beside the patches": component(inline(CONFIG_MAP_PATCH), "namePrefix: x-\n"),
    "resources of its own": component(inline(CONFIG_MAP_PATCH), "resources: [extra.yaml]\n"),
}


@pytest.mark.parametrize("shape", sorted(MEETING))
def test_components_that_could_meet_are_rendered_step_by_step(
        tmp_path: Path, run_cli: Callable[..., Result], shape: str) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "kustomization.yaml").write_text(MEETING[shape])
    overlays = tmp_path / "overlays"
    overlays.mkdir()
    (overlays / "gpu").symlink_to(OVERLAYS / "gpu")
    assert kinds_each_changes(tmp_path, ["overlays/gpu", "other"]) is None


def test_a_component_of_kinds_of_its_own_is_told(tmp_path: Path) -> None:
    """The counterpart of the shapes above: patches of a kind no other component names, a JSON
    patch of labels and data, a strategic merge that deletes (kind, name and namespace stay)."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "kustomization.yaml").write_text(component(
        inline("- {op: add, path: /metadata/labels/team, value: a}\n"
               "- {op: move, from: /data/a, path: /data/b}\n")
        + inline("apiVersion: v1\nkind: Service\nmetadata: {name: any}\n$patch: delete\n",
                 "{kind: Service, labelSelector: a=b}")))
    overlays = tmp_path / "overlays"
    overlays.mkdir()
    (overlays / "gpu").symlink_to(OVERLAYS / "gpu")
    (overlays / "azure-smb").symlink_to(OVERLAYS / "azure-smb")
    assert kinds_each_changes(tmp_path, ["overlays/gpu", "overlays/azure-smb"]) is None
    assert kinds_each_changes(tmp_path, ["overlays/gpu", "other"]) == [
        frozenset({"StatefulSet"}), frozenset({"ConfigMap", "Service"})]
    assert kinds_each_changes(tmp_path, ["overlays/gpu", "overlays/gpu"]) is None
    assert kinds_each_changes(tmp_path, ["absent"]) is None


def test_an_object_a_component_deletes_is_left_out_of_the_steps_after_it() -> None:
    def item(kind: str, name: str, value: str) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name},
                "data": {"v": value}}

    before = [item("ConfigMap", "a", "0"), item("Secret", "b", "0"), item("ConfigMap", "c", "0")]
    final = [item("ConfigMap", "a", "1"), item("Secret", "b", "2")]
    steps = steps_from_final(before, final, [frozenset({"ConfigMap"}), frozenset({"Secret"})])
    assert steps == [before, [item("ConfigMap", "a", "1"), item("Secret", "b", "0")]]


def test_the_reach_reads_no_fifo_as_a_component(tmp_path: Path) -> None:
    import os

    (tmp_path / "blocked").mkdir()
    os.mkfifo(tmp_path / "blocked" / "kustomization.yaml")
    assert component_reach.kinds_each_changes(tmp_path, ["blocked"]) is None
