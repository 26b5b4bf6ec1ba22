"""`validate` of many jobs, checked in worker processes, reports exactly what validating them
one after another does, in the order the jobs were named, failures included."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import OUTPUT, REPOSITORY
from tfcompile.compiler.checking.validation import KubernetesVersionError, validate
from tfcompile.compiler.checking.validation.many_jobs import validate_many
from tfcompile.compiler.cli import main
from tfcompile.compiler.rendering.kustomize import RenderingError

EXAMPLES = sorted(path.name for path in OUTPUT.iterdir() if path.is_dir())


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The compiled examples, a job Kustomize cannot render among them, and one that breaks
    a rule (a Service whose selector matches no pod); made once, and only read by the tests."""
    tmp_path = tmp_path_factory.mktemp("many-jobs")
    shutil.copytree(OUTPUT.parent / "overlays", tmp_path / "overlays")
    directories = []
    for example in EXAMPLES:
        shutil.copytree(OUTPUT / example, tmp_path / "output" / example)
        directories.append(tmp_path / "output" / example)
    broken = tmp_path / "output" / "broken"
    broken.mkdir()
    (broken / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    directories.insert(1, broken)
    service = next(directories[0].glob("service-*.yaml"))
    service.write_text(service.read_text().replace("selector:\n", "selector:\n    extra: x\n", 1))
    return directories


@pytest.fixture(scope="module")
def one_by_one(jobs: list[Path]) -> tuple[list[str], list[str]]:
    """What validating the jobs one after another in this process prints, and its errors."""
    printed, errors = [], []
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPOSITORY)  # as every test runs
        for directory in jobs:
            try:
                printed.append(validate(directory).to_text())
            except RenderingError as error:
                errors.append(f"{directory}: cannot render: {error}")
    return printed, errors


def test_reports_are_those_of_one_job_after_another_in_order(
        jobs: list[Path], one_by_one: tuple[list[str], list[str]]) -> None:
    printed, errors = one_by_one
    outcomes = list(validate_many(jobs, workers=3))
    assert [outcome.directory for outcome in outcomes] == jobs
    assert [outcome.report.to_text() for outcome in outcomes if outcome.report] == printed
    assert [f"{outcome.directory}: cannot render: {outcome.render_error}"
            for outcome in outcomes if outcome.report is None] == errors
    assert len(errors) == 1 and not outcomes[0].report.ok  # type: ignore[union-attr]


def test_the_command_prints_each_job_in_order_and_counts_failures(
        jobs: list[Path], one_by_one: tuple[list[str], list[str]],
        capsys: pytest.CaptureFixture[str]) -> None:
    printed, errors = one_by_one
    assert main(["validate", *map(str, jobs)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "".join(f"{text}\n" for text in printed)
    assert captured.err == "".join(f"{line}\n" for line in errors) + (
        f"tfcompile: 2 of {len(jobs)} job(s) failed validation\n")


def test_an_unknown_kubernetes_version_is_refused_before_any_job(jobs: list[Path]) -> None:
    with pytest.raises(KubernetesVersionError):
        next(validate_many(jobs, "1.2"))
