"""The output tree: deterministic bytes, atomic writes, stale jobs removed, foreign files kept,
and `--check` that writes nothing and shows a diff."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, MINIMAL_JOB, OVERLAYS, Result
from tfcompile.compiler.output import directory_swap


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
    (repository / "output" / "NOTES.md").write_text("hand-written\n")
    (repository / "output" / "mnist" / "NOTES.md").write_text("mine\n")
    hand_made = repository / "output" / "hand-made"
    hand_made.mkdir()
    (hand_made / "kustomization.yaml").write_text("resources: [x.yaml]\n")
    shutil.rmtree(repository / "examples" / "mnist")
    shutil.rmtree(repository / "examples" / "tf-spawner")
    result = run_cli("build", "examples")
    assert result.status == 0, result.stderr
    assert "pruned output/tf-spawner (its source examples/tf-spawner/job.yaml" in result.stderr
    assert ("pruned output/mnist (its source examples/mnist/job.yaml no longer exists); kept "
            "what tfcompile did not write: NOTES.md") in result.stderr
    assert not (repository / "output" / "tf-spawner").exists()
    assert sorted(p.name for p in (repository / "output" / "mnist").iterdir()) == ["NOTES.md"]
    assert (repository / "output" / "NOTES.md").read_text() == "hand-written\n"
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
    assert sorted(p.name for p in output.iterdir()) == ["README.md", "demo", "second"]


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


# Pruning goes by source: a job directory goes only when the spec it records no longer defines
# the job; building some jobs never touches the others.


def _jobs_repository(tmp_path: Path, names: tuple[str, ...] = ("a", "b", "c")) -> Path:
    repository = tmp_path / "repository"
    for name in names:
        folder = repository / "jobs" / name
        folder.mkdir(parents=True)
        (folder / "job.yaml").write_text(MINIMAL_JOB.replace("name: demo", f"name: {name}"))
    return repository


def test_building_one_job_leaves_the_other_jobs_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path)
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    before = _tree(repository / "output")
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 3"))
    result = run_cli("build", "jobs/a")
    assert result.status == 0, result.stderr
    assert "pruned" not in result.stderr
    after = _tree(repository / "output")
    assert sorted({p.split("/")[0] for p in after}) == ["README.md", "a", "b", "c"]
    assert {p: t for p, t in after.items() if not p.startswith("a/")} == {
        p: t for p, t in before.items() if not p.startswith("a/")}
    assert after["a/statefulset-a-worker.yaml"] != before["a/statefulset-a-worker.yaml"]
    assert run_cli("build", "jobs/b", "--check").status == 0


def test_a_job_whose_spec_is_gone_is_pruned_by_a_build_of_other_jobs_and_check_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path)
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    shutil.rmtree(repository / "jobs" / "c")
    before = _tree(repository / "output")
    check = run_cli("build", "jobs/a", "--check")
    assert check.status == 1
    assert "+++ /dev/null" in check.stdout and "a/output/c/kustomization.yaml" in check.stdout
    assert ("would prune output/c (its source jobs/c/job.yaml no longer exists)"
            in check.stderr)
    assert _tree(repository / "output") == before
    result = run_cli("build", "jobs/a")
    assert result.status == 0, result.stderr
    assert "pruned output/c (its source jobs/c/job.yaml no longer exists)" in result.stderr
    assert sorted(p.name for p in (repository / "output").iterdir()) == ["README.md", "a", "b"]
    assert run_cli("build", "jobs", "--check").status == 0


def test_a_renamed_job_prunes_the_old_name_because_its_spec_no_longer_defines_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    job = repository / "jobs" / "b" / "job.yaml"
    job.write_text(job.read_text().replace("name: b", "name: b2"))
    assert run_cli("build", "jobs/a", "--check").status == 1
    result = run_cli("build", "jobs/b")
    assert result.status == 0, result.stderr
    assert "pruned output/b (its source jobs/b/job.yaml no longer defines job b)" in result.stderr
    assert sorted(p.name for p in (repository / "output").iterdir()) == ["README.md", "a", "b2"]


NOT_A_JOB_ANY_MORE = {
    "another kind": ("kind: TrainingJob", "kind: TrainJob", "2:7: kind: must be 'TrainingJob'"),
    "a kind quoted and commented": ("kind: TrainingJob", 'kind: "TrainingJobs"  # was quoted',
                                    "2:7: kind: must be 'TrainingJob'"),
    "a kind far from TrainingJob": ("kind: TrainingJob", "kind: Deployment",
                                    "2:7: kind: must be 'TrainingJob'"),
    "a YAML error": ("replicas: 2", "replicas: [2", "invalid YAML"),
    "a broken field": ("replicas: 2", "replicas: -2", "replicas"),
    "no apiVersion line": ("apiVersion: tfcompile.dev/v1alpha1\n", "# apiVersion\n",
                           "apiVersion"),
    "another object's header": ("apiVersion: tfcompile.dev/v1alpha1\nkind: TrainingJob",
                                "apiVersion: v1\nkind: ConfigMap",
                                "2:7: kind: must be 'TrainingJob'"),
}


@pytest.mark.parametrize("how", sorted(NOT_A_JOB_ANY_MORE))
@pytest.mark.parametrize("inputs", [("jobs",), ("jobs/a",), ("jobs/b",), ("jobs/b/job.yaml",)])
def test_a_spec_that_exists_but_does_not_load_never_prunes_its_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result], how: str,
    inputs: tuple[str, ...],
) -> None:
    """One letter must not delete a job (Argo CD would delete it and its claim): whichever
    jobs are built, a spec that no longer loads as a TrainingJob fails `build` and `build
    --check` with exit 2, naming the file, its problem and the job it keeps. (A build of other
    jobs only loads it to decide on its job: one that still plainly names it is kept unread.)"""
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    before = _tree(repository / "output")
    job = repository / "jobs" / "b" / "job.yaml"
    was, now, problem = NOT_A_JOB_ANY_MORE[how]
    assert was in job.read_text()
    job.write_text(job.read_text().replace(was, now, 1))
    for check in ((), ("--check",)):
        result = run_cli("build", *inputs, *check)
        if (not check and inputs == ("jobs/a",)
                and how in ("a broken field", "no apiVersion line")):
            assert result.status == 0, result.stderr
            assert "prune" not in result.stderr
            assert _tree(repository / "output") == before
            continue
        assert result.status == 2, (check, result.stderr)
        assert f"jobs/b/job.yaml:{problem}" in result.stderr or (
            "jobs/b/job.yaml:" in result.stderr and problem in result.stderr), result.stderr
        assert ("jobs/b/job.yaml:1:1: (document): job b was compiled from this file into "
                "output/b, which is kept: a file that does not load as a TrainingJob never "
                "prunes the job it defined; fix it, or delete the file to delete the job"
                in result.stderr.splitlines())
        assert "prune" not in result.stderr.replace("never prunes", "")
        assert _tree(repository / "output") == before


def test_a_job_goes_when_its_spec_is_gone_or_loads_and_no_longer_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a", "b", "c"))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    job = repository / "jobs" / "b" / "job.yaml"
    job.write_text(job.read_text().replace("name: b", "name: b2"))
    (repository / "jobs" / "c" / "job.yaml").unlink()
    result = run_cli("build", "jobs/a")
    assert result.status == 0, result.stderr
    assert "pruned output/b (its source jobs/b/job.yaml no longer defines job b)" in result.stderr
    assert "pruned output/c (its source jobs/c/job.yaml no longer exists)" in result.stderr
    assert sorted(p.name for p in (repository / "output").iterdir()) == ["README.md", "a"]


def test_a_quoted_or_commented_kind_line_is_still_a_job_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """`kind: "TrainingJob"` is a TrainingJob: its job is built, and `--check` sees its output
    go stale when it changes."""
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    for name, line in (("a", 'kind: "TrainingJob"'), ("b", "kind: TrainingJob  # ours")):
        job = repository / "jobs" / name / "job.yaml"
        job.write_text(job.read_text().replace("kind: TrainingJob", line, 1))
    assert run_cli("build", "jobs").status == 0
    assert sorted(p.name for p in (repository / "output").iterdir()) == ["README.md", "a", "b"]
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 3"))
    check = run_cli("build", "jobs", "--check")
    assert check.status == 1
    assert "+++ b/output/a/statefulset-a-worker.yaml" in check.stdout


def test_check_fails_on_whatever_the_output_tree_holds_that_tfcompile_did_not_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """Argo CD and Flux sync the whole output tree: a hand-made job directory, a file beside
    the jobs, a file a job's kustomization does not list, a link, a killed build's leftover or
    a generated directory whose spec does not define it fail `--check`, each named. A plain
    build keeps them (it deletes nothing it did not write) and says so."""
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    assert run_cli("build", "jobs", "--check").status == 0
    output = repository / "output"
    (output / "hand-made").mkdir()
    (output / "hand-made" / "kustomization.yaml").write_text("resources: [pod.yaml]\n")
    (output / "hand-made" / "pod.yaml").write_text("kind: Pod\nspec: {hostPID: true}\n")
    (output / "NOTES.md").write_text("notes\n")
    (output / "a" / "extra.yaml").write_text("kind: Pod\n")
    (output / "a" / "folder").mkdir()
    os.symlink("a", output / "link")
    (output / ".tfcompile-new-1-a").mkdir()
    unsourced = output / "unsourced"
    unsourced.mkdir()
    (unsourced / "kustomization.yaml").write_text(
        "# Generated by tfcompile\nresources: [pod.yaml]\n")
    (unsourced / "pod.yaml").write_text("kind: Pod\nspec: {hostPID: true}\n")
    before = _tree(output)
    check = run_cli("build", "jobs", "--check")
    assert check.status == 1
    assert check.stdout == ""
    assert [line for line in check.stderr.splitlines()
            if line.startswith("tfcompile: output")] == [
        "tfcompile: output/NOTES.md: a file tfcompile did not write",
        "tfcompile: output/a/extra.yaml: not written by tfcompile (its kustomization.yaml does "
        "not list it)",
        "tfcompile: output/a/folder: not written by tfcompile (its kustomization.yaml does not "
        "list it)",
        "tfcompile: output/hand-made: a directory tfcompile did not write (its "
        "kustomization.yaml has no 'Generated by tfcompile' mark)",
        "tfcompile: output/link: a symbolic link tfcompile did not write",
        "tfcompile: output/.tfcompile-new-1-a: left by a build that was killed (tfcompile "
        "stages under this name); `tfcompile build` removes it",
        "tfcompile: output/unsourced: a job directory this check did not compile: its "
        "kustomization.yaml names no spec that defines it",
        "tfcompile: output holds 7 file(s) or folder(s) tfcompile did not write; the tree "
        "Argo CD and Flux sync holds only what tfcompile writes: move them out of it",
    ]
    assert _tree(output) == before
    result = run_cli("build", "jobs")
    assert result.status == 0, result.stderr
    assert ("tfcompile: note: output/hand-made: a directory tfcompile did not write (its "
            "kustomization.yaml has no 'Generated by tfcompile' mark); kept, and `build --check` "
            "fails on it (the tree Argo CD and Flux sync holds only what tfcompile writes)"
            in result.stderr.splitlines())
    assert not (output / ".tfcompile-new-1-a").exists()
    assert _tree(output) == before
    for entry in ("hand-made", "NOTES.md", "a/extra.yaml", "a/folder", "link", "unsourced"):
        path = output / entry
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    assert run_cli("build", "jobs", "--check").status == 0


def test_check_compiles_every_job_directory_from_the_spec_it_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """A hand edit in a generated job directory fails `--check` even when the check is asked
    about other jobs: every job directory is compared with what its recorded spec compiles to."""
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    statefulset = repository / "output" / "b" / "statefulset-b-worker.yaml"
    statefulset.write_text(statefulset.read_text().replace(
        "      containers:\n", "      hostPID: true\n      containers:\n", 1))
    check = run_cli("build", "jobs/a", "--check")
    assert check.status == 1
    assert "+++ b/output/b/statefulset-b-worker.yaml" in check.stdout
    assert "-      hostPID: true" in check.stdout


MEANT_AS_JOB_SPECS = {
    "apiVersion: tfcompile.dev/v1alpha1\nkind: TrainJob\n": True,
    "apiVersion: 'tfcompile.dev/v1'\nkind: Anything\n": True,
    'kind: "TrainingJob"  # quoted\n': True,
    "kind: !!str TrainingJob\n": True,
    "kind: TrainingJob # ours\nmetadata: {name: a}\n": True,
    "kind: TrainJob\nmetadata: {name: a}\n": True,
    "kind: training-job\n": True,
    "kind: TrainingJb\n": True,
    "apiVersion: kubeflow.org/v1\nkind: TrainingJob\n": True,
    "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n": False,
    "apiVersion: kubeflow.org/v1\nkind: TFJob\n": False,
    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n": False,
    "kind: training\n": False,
    "# kind: TrainingJob\nkind: Dataset\n": False,
    "name: TrainingJob\n": False,
}


@pytest.mark.parametrize("text", sorted(MEANT_AS_JOB_SPECS))
def test_a_directory_is_searched_for_every_file_meant_as_a_job_spec(text: str) -> None:
    """A misspelt, quoted or commented kind, or tfcompile's apiVersion, makes a file a job
    spec to load (and refuse, if it does not load); a Kubeflow TrainJob is not one."""
    from tfcompile.spec.job_text import looks_like_job_text

    assert looks_like_job_text(text) is MEANT_AS_JOB_SPECS[text]


def test_a_new_file_with_a_misspelt_kind_fails_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a",))
    monkeypatch.chdir(repository)
    (repository / "jobs" / "b").mkdir()
    (repository / "jobs" / "b" / "job.yml").write_text(
        MINIMAL_JOB.replace("name: demo", "name: b").replace(
            "apiVersion: tfcompile.dev/v1alpha1\nkind: TrainingJob",
            "kind: TrainJob"))
    for check in ((), ("--check",)):
        result = run_cli("build", "jobs", *check)
        assert result.status == 2, result.stderr
        assert "jobs/b/job.yml:1:7: kind: must be 'TrainingJob'" in result.stderr
        assert not (repository / "output").exists()


def test_removing_the_last_job_removes_its_directory_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("only",))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    (repository / "jobs" / "only" / "job.yaml").unlink()
    check = run_cli("build", "jobs", "--check")
    assert check.status == 1
    assert "would prune output/only" in check.stderr
    result = run_cli("build", "jobs")
    assert result.status == 0, result.stderr
    assert "pruned output/only (its source jobs/only/job.yaml no longer exists)" in result.stderr
    assert [p.name for p in (repository / "output").iterdir()] == ["README.md"]
    again = run_cli("build", "jobs")
    assert again.status == 0
    assert "nothing to build and nothing to prune" in again.stderr
    assert run_cli("build", "jobs", "--check").status == 0


# Ownership: tfcompile never overwrites or deletes a file it did not write, and never follows a
# symbolic link in the output tree.


def test_a_hand_written_job_directory_is_not_overwritten_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    kept = repository / "output" / "b"
    kept.mkdir(parents=True)
    (kept / "kustomization.yaml").write_text("resources: [tfjob.yaml]\n")
    (kept / "tfjob.yaml").write_text("kind: TFJob\n")
    result = run_cli("build", "jobs")
    assert result.status == 2
    assert "output/b: exists and was not written by tfcompile" in result.stderr
    assert "nothing was written" in result.stderr
    assert _tree(repository / "output") == {"b/kustomization.yaml": b"resources: [tfjob.yaml]\n",
                                            "b/tfjob.yaml": b"kind: TFJob\n"}
    assert run_cli("build", "jobs", "--check").status == 2


def test_an_empty_directory_is_filled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a",))
    monkeypatch.chdir(repository)
    (repository / "output" / "a").mkdir(parents=True)
    assert run_cli("build", "jobs").status == 0
    assert (repository / "output" / "a" / "kustomization.yaml").is_file()


def test_a_file_tfcompile_would_write_but_did_not_is_named_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text() + "  networkPolicy: false\n")
    assert run_cli("build", "jobs").status == 0
    # A file with the name the next build will write, which tfcompile did not write.
    mine = repository / "output" / "a" / "networkpolicy-a-tensorflow.yaml"
    mine.write_text("kind: NetworkPolicy # mine\n")
    job.write_text(job.read_text().replace("  networkPolicy: false\n", ""))
    before = _tree(repository / "output")
    result = run_cli("build", "jobs")
    assert result.status == 2
    assert ("output/a: holds networkpolicy-a-tensorflow.yaml, which tfcompile would write but "
            "did not write (not listed in its kustomization.yaml)") in result.stderr
    assert _tree(repository / "output") == before


def test_symbolic_links_in_the_output_tree_are_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.yaml").write_text("precious\n")
    # A tfcompile file replaced by a link to a file outside the tree: neither written nor deleted.
    listed = repository / "output" / "a" / "service-a-worker.yaml"
    listed.unlink()
    listed.symlink_to(outside / "precious.yaml")
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 3"))
    result = run_cli("build", "jobs")
    assert result.status == 2
    assert ("output/a: service-a-worker.yaml: symbolic link where tfcompile writes; it never "
            "follows links in the output tree") in result.stderr
    assert (outside / "precious.yaml").read_text() == "precious\n"
    # A job directory that is a link to a directory outside.
    shutil.rmtree(repository / "output" / "b")
    (repository / "output" / "b").symlink_to(outside, target_is_directory=True)
    result = run_cli("build", "jobs/b")
    assert result.status == 2
    assert "output/b: is a symbolic link; tfcompile never follows links" in result.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["precious.yaml"]
    # A job to prune whose listed file is a link: refused, nothing deleted on either side.
    (repository / "output" / "b").unlink()
    listed.unlink()
    assert run_cli("build", "jobs").status == 0
    (repository / "output" / "b" / "service-b-worker.yaml").unlink()
    (repository / "output" / "b" / "service-b-worker.yaml").symlink_to(outside / "precious.yaml")
    shutil.rmtree(repository / "jobs" / "b")
    result = run_cli("build", "jobs")
    assert result.status == 2
    assert "symbolic link where tfcompile would delete" in result.stderr
    assert (repository / "output" / "b" / "kustomization.yaml").is_file()
    assert (outside / "precious.yaml").read_text() == "precious\n"
    # The output directory itself a link.
    (tmp_path / "elsewhere").mkdir()
    (repository / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    result = run_cli("build", "jobs/a", "-o", "linked")
    assert result.status == 2
    assert "linked: the output directory is a symbolic link" in result.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_an_output_path_that_is_a_file_or_inside_git_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a",))
    monkeypatch.chdir(repository)
    (repository / "notes.txt").write_text("mine\n")
    result = run_cli("build", "jobs", "-o", "notes.txt")
    assert result.status == 2
    assert "notes.txt: the output path is a file, not a directory" in result.stderr
    assert (repository / "notes.txt").read_text() == "mine\n"
    (repository / ".git").mkdir()
    result = run_cli("build", "jobs", "-o", ".git/output")
    assert result.status == 2
    assert ".git/output: the output directory is inside .git" in result.stderr
    assert list((repository / ".git").iterdir()) == []


def test_two_specs_naming_one_job_do_not_take_over_each_others_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a",))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    copy = repository / "more" / "job.yaml"
    copy.parent.mkdir()
    shutil.copy(repository / "jobs" / "a" / "job.yaml", copy)
    before = _tree(repository / "output")
    result = run_cli("build", "more")
    assert result.status == 2
    assert ("output/a: was compiled from jobs/a/job.yaml, which still defines job a"
            in result.stderr)
    assert _tree(repository / "output") == before
    (repository / "jobs" / "a" / "job.yaml").unlink()  # the job moved: its new spec takes over
    assert run_cli("build", "more").status == 0
    assert "../../more/job.yaml" in (repository / "output" / "a" / "kustomization.yaml").read_text()


def test_what_tfcompile_keeps_in_a_job_directory_survives_a_rebuild_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    repository = _jobs_repository(tmp_path, ("a",))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    directory = repository / "output" / "a"
    (directory / "NOTES.md").write_text("mine\n")
    (directory / "extra").mkdir()
    (directory / "extra" / "patch.yaml").write_text("kind: Patch\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("outside\n")
    (directory / "link").symlink_to(outside)
    notes = (directory / "NOTES.md").stat().st_ino
    directory.chmod(0o750)
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 3"))
    result = run_cli("build", "jobs")
    assert result.status == 0, result.stderr
    assert "replicas: 3" in (directory / "statefulset-a-worker.yaml").read_text()
    assert (directory / "NOTES.md").stat().st_ino == notes  # the same file, not a copy
    assert directory.stat().st_mode & 0o777 == 0o750
    assert (directory / "extra" / "patch.yaml").read_text() == "kind: Patch\n"
    assert os.readlink(directory / "link") == str(outside)
    assert outside.read_text() == "outside\n"
    assert sorted(p.name for p in (repository / "output").iterdir()) == ["README.md", "a"]


def test_without_directory_swaps_files_are_replaced_one_by_one_and_kept_files_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    """Systems without renameat2 (or file systems without RENAME_EXCHANGE) take this path."""
    monkeypatch.setattr(directory_swap, "_FUNCTION", None)
    repository = _jobs_repository(tmp_path, ("a", "b"))
    monkeypatch.chdir(repository)
    assert run_cli("build", "jobs").status == 0
    (repository / "output" / "a" / "NOTES.md").write_text("mine\n")
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 3")
                   + "  networkPolicy: false\n")
    shutil.rmtree(repository / "jobs" / "b")
    result = run_cli("build", "jobs")
    assert result.status == 0, result.stderr
    assert sorted(p.name for p in (repository / "output").iterdir()) == ["README.md", "a"]
    assert [p.name for p in sorted((repository / "output" / "a").iterdir())
            if not p.name.startswith("configmap-a-launcher-")] == [
        "NOTES.md", "configmap-a-state.yaml", "kustomization.yaml", "role-a-launcher.yaml",
        "rolebinding-a-launcher.yaml", "service-a-worker.yaml", "serviceaccount-a-launcher.yaml",
        "statefulset-a-worker.yaml"]
    check = run_cli("build", "jobs", "--check")
    assert check.status == 1
    assert check.stdout == ""
    assert "output/a/NOTES.md: not written by tfcompile" in check.stderr
