"""Remote resources in a kustomization are refused before Kustomize runs, unless allowed.

Kustomize fetches URLs and git repositories named anywhere in a kustomization tree; `validate`,
`render` and `run-local` must not do that silently. The refusal names the kustomization file
and the field, never the URL (it may carry a token), and Kustomize is not even started: a
recording wrapper around the real Kustomize binary proves it.
"""

from __future__ import annotations

import os
import stat
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import MINIMAL_JOB, OUTPUT, Result, job_directories, rendered_output
from tfcompile.compiler.rendering.kustomize import RemoteResourceError, find_renderer, render
from tfcompile.compiler.rendering.remote_resources import is_remote, remote_entries

UNROUTABLE = "https://example.invalid/base"  # .invalid never resolves (RFC 6761)
REFUSED = ("remote resource refused (a URL or git repository, which kustomize would fetch over "
           "the network); pass --allow-remote to let kustomize fetch it")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A job kustomization whose (local) component names a remote base."""
    write(tmp_path / "job/kustomization.yaml", """\
        resources: [configmap.yaml]
        components: [../component]
        """)
    write(tmp_path / "job/configmap.yaml", """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: settings}
        """)
    write(tmp_path / "component/kustomization.yaml", f"""\
        apiVersion: kustomize.config.k8s.io/v1alpha1
        kind: Component
        resources:
        - extra.yaml
        - {UNROUTABLE}
        """)
    write(tmp_path / "component/extra.yaml", """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: extra}
        """)
    return tmp_path / "job"


@pytest.fixture
def kustomize_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a wrapper first on PATH that records each call, then runs the real Kustomize."""
    real = find_renderer().command[0]
    calls = tmp_path / "kustomize-calls"
    wrappers = tmp_path / "wrappers"
    wrappers.mkdir()
    wrapper = wrappers / Path(real).name
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{wrappers}{os.pathsep}{os.environ['PATH']}")
    return calls


def test_validate_refuses_a_component_with_a_remote_base_and_never_runs_kustomize(
    job: Path, kustomize_calls: Path, run_cli: Callable[..., Result]
) -> None:
    result = run_cli("validate", str(job))
    assert result.status == 1
    component = job.parent / "component" / "kustomization.yaml"
    assert f"{job}: cannot render: {component}: resources[1]: {REFUSED}\n" in result.stderr
    assert "example.invalid" not in result.stderr  # the URL itself is never printed
    assert not kustomize_calls.exists()


def test_allow_remote_lets_kustomize_try_and_its_error_is_one_clean_line(
    job: Path, kustomize_calls: Path, run_cli: Callable[..., Result]
) -> None:
    result = run_cli("validate", "--allow-remote", str(job))
    assert result.status == 1
    assert kustomize_calls.read_text().count("\n") == 1  # Kustomize ran, once
    assert "remote resource refused" not in result.stderr
    assert "Traceback" not in result.stderr
    [failure] = [line for line in result.stderr.splitlines() if "cannot render" in line]
    assert failure.startswith(f"{job}: cannot render: {job}: `")
    assert "example.invalid" in failure  # Kustomize's own message: it tried to fetch
    assert result.stderr.endswith("tfcompile: 1 of 1 job(s) failed validation\n")


def test_render_refuses_the_same_way(job: Path, kustomize_calls: Path,
                                     run_cli: Callable[..., Result]) -> None:
    result = run_cli("render", str(job))
    assert result.status == 1
    assert result.stdout == ""
    assert f"component/kustomization.yaml: resources[1]: {REFUSED}" in result.stderr
    assert not kustomize_calls.exists()
    allowed = run_cli("render", "--allow-remote", str(job))
    assert allowed.status == 1
    assert "remote resource refused" not in allowed.stderr
    assert kustomize_calls.exists()


def test_run_local_refuses_a_remote_overlay_before_running_anything(
    tmp_path: Path, kustomize_calls: Path, run_cli: Callable[..., Result]
) -> None:
    job_file = write(tmp_path / "jobs/demo/job.yaml", MINIMAL_JOB + "  overlays: [remote]\n")
    write(tmp_path / "overlays/remote/kustomization.yaml", """\
        apiVersion: kustomize.config.k8s.io/v1alpha1
        kind: Component
        patches:
        - path: git@example.invalid:team/patches.git
        """)
    result = run_cli("run-local", str(job_file), "--overlays", str(tmp_path / "overlays"))
    assert result.status == 2
    assert f"overlays/remote/kustomization.yaml: patches[0].path: {REFUSED}" in result.stderr
    assert not kustomize_calls.exists()


def test_every_field_kustomize_loads_is_checked_through_local_directories(
    tmp_path: Path,
) -> None:
    write(tmp_path / "top/kustomization.yaml", """\
        resources:
        - local.yaml
        - ../base
        - github.com/team/repo//deploy?ref=v1
        bases: [ssh://git@example.invalid/team/repo.git]
        components: [../base]
        patches:
        - path: patch.yaml
        - patch: |-
            apiVersion: v1
            kind: ConfigMap
            metadata: {name: inline}
        - path: https://example.invalid/patch.yaml
        patchesStrategicMerge:
        - |-
          apiVersion: v1
          kind: ConfigMap
          metadata: {name: inline}
        - git::https://example.invalid/team/repo.git
        configMapGenerator:
        - name: settings
          files: [local.txt, key=http://example.invalid/file.txt]
          envs: [local.env]
        helmCharts:
        - name: chart
          repo: oci://example.invalid/charts
        openapi: {path: https://example.invalid/openapi.json}
        """)
    write(tmp_path / "base/kustomization.yaml", """\
        resources: [../top, deploy.yaml, example.invalid/team/repo]
        transformers: [gh:team/repo]
        """)
    found = sorted((entry.kustomization, entry.field)
                   for entry in remote_entries(tmp_path / "top"))
    top = str(tmp_path / "top/kustomization.yaml")
    base = str(tmp_path / "base/kustomization.yaml")
    assert found == sorted([
        (top, "resources[2]"), (top, "bases[0]"), (top, "patches[2].path"),
        (top, "patchesStrategicMerge[1]"), (top, "configMapGenerator[0].files[1]"),
        (top, "openapi.path"), (top, "helmCharts[0].repo"),
        (base, "resources[2]"), (base, "transformers[0]"),
    ])  # each kustomization once, though they include each other


@pytest.mark.parametrize("entry", [
    "https://example.invalid/base", "http://example.invalid/x.yaml", "ssh://example.invalid/r",
    "git::https://example.invalid/r.git", "git@example.invalid:team/repo.git",
    "github.com/team/repo", "gh:team/repo", "../base?ref=v1", "example.invalid/team/repo//dir",
    "https://dev.example.invalid/org/_git/repo", "file:///srv/repo.git",
])
def test_remote_entries_are_recognized(entry: str, tmp_path: Path) -> None:
    assert is_remote(entry, tmp_path)


@pytest.mark.parametrize("entry", [
    "service.yaml", "../base", "./overlays/gpu", "../../overlays/azure", "v1.2/manifest.yaml",
    "apiVersion: v1\nkind: ConfigMap\n",
])
def test_local_entries_are_not_remote(entry: str, tmp_path: Path) -> None:
    (tmp_path / "v1.2").mkdir()
    (tmp_path / "v1.2" / "manifest.yaml").write_text("")
    assert not is_remote(entry, tmp_path)


def test_the_shipped_overlays_and_examples_render_without_remote_resources() -> None:
    for job in job_directories(OUTPUT):
        assert remote_entries(job) == [], job
        assert rendered_output(job.name)  # and the default (refusing) render succeeds


def test_the_refusal_is_an_exception_listing_every_entry(job: Path) -> None:
    (job.parent / "component/kustomization.yaml").write_text(
        "kind: Component\nresources: [https://example.invalid/a, gh:team/b]\n")
    with pytest.raises(RemoteResourceError) as refused:
        render(job)
    assert [entry.field for entry in refused.value.entries] == ["resources[0]", "resources[1]"]
    assert str(refused.value).count("\n") == 1


def test_a_kustomization_only_the_pure_parser_reads_is_still_checked(tmp_path: Path) -> None:
    """libyaml refuses a colon inside a flow mapping's plain value, which YAML and Kustomize
    allow; such a kustomization is read all the same, and its remote base found."""
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [https://example.invalid/base]\n"
        "images: [{name: app, newName: registry.example.invalid:5000/app}]\n")
    assert [entry.field for entry in remote_entries(tmp_path)] == ["resources[0]"]
