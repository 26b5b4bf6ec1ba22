"""The output tree: deterministic bytes, atomic writes, stale jobs removed, foreign files kept,
and `--check` that writes nothing and shows a diff."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, MINIMAL_JOB, OVERLAYS, Result


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _copy_examples(tmp_path: Path) -> Path:
    target = tmp_path / "repository"
    shutil.copytree(EXAMPLES, target / "examples")
    shutil.copytree(OVERLAYS, target / "overlays")
    return target


def test_building_twice_gives_identical_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _copy_examples(tmp_path)
    monkeypatch.chdir(repository)
    assert run_cli("build", "examples", "-o", "first").status == 0
    assert run_cli("build", "examples", "-o", "second").status == 0
    assert _tree(repository / "first") == _tree(repository / "second")


def test_key_order_in_the_spec_does_not_change_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    ordered = """\
    apiVersion: tfcompile.dev/v1alpha1
    kind: TrainingJob
    metadata: {name: demo, labels: {b: "2", a: "1"}}
    spec:
      image: tf
      command: [python, train.py]
      env: {ZETA: z, ALPHA: a}
      roles:
        worker: {replicas: 2, resources: {requests: {memory: 1Gi, cpu: "1"}}}
        chief: {replicas: 1}
    """
    shuffled = """\
    spec:
      roles:
        chief: {replicas: 1}
        worker: {resources: {requests: {cpu: "1", memory: 1Gi}}, replicas: 2}
      env: {ALPHA: a, ZETA: z}
      command: [python, train.py]
      image: tf
    metadata: {labels: {a: "1", b: "2"}, name: demo}
    kind: TrainingJob
    apiVersion: tfcompile.dev/v1alpha1
    """
    import textwrap

    for name, text in (("one", ordered), ("two", shuffled)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "job.yaml").write_text(textwrap.dedent(text))
    monkeypatch.chdir(tmp_path)
    assert run_cli("build", "one", "-o", "out-one/output").status == 0
    assert run_cli("build", "two", "-o", "out-two/output").status == 0
    first, second = _tree(tmp_path / "out-one/output"), _tree(tmp_path / "out-two/output")
    header = "kustomization.yaml"
    for tree in (first, second):  # the header names the source file, which differs
        tree.pop(f"demo/{header}")
    assert first == second


def test_a_failed_build_leaves_output_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _copy_examples(tmp_path)
    monkeypatch.chdir(repository)
    assert run_cli("build", "examples").status == 0
    before = _tree(repository / "output")
    broken = repository / "examples" / "mnist" / "job.yaml"
    broken.write_text(broken.read_text().replace("replicas: 2", "replicas: -2"))
    result = run_cli("build", "examples")
    assert result.status == 2
    assert _tree(repository / "output") == before
    assert not list(repository.glob(".output.tfcompile-*"))


def test_a_removed_job_loses_its_directory_but_foreign_files_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _copy_examples(tmp_path)
    monkeypatch.chdir(repository)
    assert run_cli("build", "examples").status == 0
    (repository / "output" / "README.md").write_text("hand-written\n")
    (repository / "output" / "mnist" / "NOTES.md").write_text("mine\n")
    hand_made = repository / "output" / "hand-made"
    hand_made.mkdir()
    (hand_made / "kustomization.yaml").write_text("resources: [x.yaml]\n")
    shutil.rmtree(repository / "examples" / "mnist")
    shutil.rmtree(repository / "examples" / "tf-spawner")
    result = run_cli("build", "examples")
    assert result.status == 0, result.stderr
    assert not (repository / "output" / "tf-spawner").exists()
    assert sorted(p.name for p in (repository / "output" / "mnist").iterdir()) == ["NOTES.md"]
    assert (repository / "output" / "README.md").read_text() == "hand-written\n"
    assert (hand_made / "kustomization.yaml").exists()
    assert (repository / "output" / "parameter-server" / "kustomization.yaml").exists()


def test_check_writes_nothing_and_prints_a_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _copy_examples(tmp_path)
    monkeypatch.chdir(repository)
    result = run_cli("build", "examples", "--check")
    assert result.status == 1
    assert not (repository / "output").exists()
    assert "+++ b/output/mnist/statefulset-mnist-worker.yaml" in result.stdout
    assert run_cli("build", "examples").status == 0
    assert run_cli("build", "examples", "--check").status == 0
    job = repository / "examples" / "mnist" / "job.yaml"
    job.write_text(job.read_text().replace('"8"', '"9"'))
    before = _tree(repository / "output")
    result = run_cli("build", "examples", "--check")
    assert result.status == 1
    assert "-        - '8'\n+        - '9'\n" in result.stdout
    assert "is stale" in result.stderr
    assert _tree(repository / "output") == before


def test_several_jobs_in_one_call_from_files_and_directories(
    tmp_path: Path, write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    single = write_job(MINIMAL_JOB, directory=tmp_path / "a")
    write_job(MINIMAL_JOB.replace("name: demo", "name: second"), directory=tmp_path / "b" / "c")
    (tmp_path / "b" / "other.yaml").write_text("apiVersion: v1\nkind: ConfigMap\n")
    output = tmp_path / "output"
    result = run_cli("build", str(single), str(tmp_path / "b"), "-o", str(output))
    assert result.status == 0, result.stderr
    assert sorted(p.name for p in output.iterdir()) == ["demo", "second"]


def test_a_change_to_an_immutable_statefulset_field_is_stopped_with_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _copy_examples(tmp_path)
    monkeypatch.chdir(repository)
    assert run_cli("build", "examples").status == 0
    committed = repository / "output" / "mnist" / "statefulset-mnist-worker.yaml"
    # As if an older tfcompile (or a hand edit) had committed another selector.
    committed.write_text(committed.read_text().replace(
        "podManagementPolicy: Parallel", "podManagementPolicy: OrderedReady"))
    before = _tree(repository / "output")
    result = run_cli("build", "examples")
    assert result.status == 1
    assert "spec.podManagementPolicy of StatefulSet mnist-worker" in result.stderr
    assert "Argo CD would fail this sync again and again" in result.stderr
    assert "kubectl delete statefulset mnist-worker --cascade=orphan" in result.stderr
    assert _tree(repository / "output") == before
    assert run_cli("build", "examples", "--check").status == 1
    assert run_cli("build", "examples", "--allow-recreate").status == 0
    assert "podManagementPolicy: Parallel" in committed.read_text()
