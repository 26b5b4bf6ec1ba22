"""`tfcompile init`: a GitOps repository whose own CI check passes from the first commit, and
the pre-commit hooks this repository offers to others."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import REPOSITORY, Result
from tfcompile.compiler.cli import parser
from tfcompile.compiler.kubernetes_versions import DEFAULT_KUBERNETES_VERSION, kubeconform_version

BIN = str(Path(sys.executable).parent)
REQUIREMENT = "git+https://example.invalid/team/tfcompile.git@v1"


def run_check(repository: Path, schema_location: str,
              **variables: str) -> subprocess.CompletedProcess[str]:
    """`sh ci/check.sh` as CI runs it, with kubeconform reading the local schemas (offline)."""
    environment = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}",
                   "KUBECONFORM_SCHEMA_LOCATION": schema_location, **variables}
    return subprocess.run(["sh", "ci/check.sh"], cwd=repository, env=environment,
                          capture_output=True, text=True, check=False)


@pytest.fixture
def repository(tmp_path: Path, run_cli: Callable[..., Result]) -> Path:
    target = tmp_path / "training-jobs"
    result = run_cli("init", str(target), "--tfcompile-requirement", REQUIREMENT)
    assert result.status == 0, result.stderr
    return target


def load(path: Path) -> object:
    return YAML(typ="safe").load(path.read_text())


def test_init_writes_a_complete_repository(repository: Path) -> None:
    files = sorted(p.relative_to(repository).as_posix() for p in repository.rglob("*")
                   if p.is_file())
    for expected in (".github/workflows/tfcompile.yaml", ".gitlab-ci.yml",
                     ".pre-commit-config.yaml", "ci/check.sh",
                     "deploy/argocd/applicationset.yaml", "deploy/argocd/health.lua",
                     "deploy/argocd/argocd-cm-health.yaml", "deploy/flux/training-jobs.yaml",
                     "deploy/cluster/launcher-policy.yaml",
                     "jobs/example/job.yaml", "jobs/example/train.py",
                     "jobs/trainingjob.schema.json", "overlays/azure/kustomization.yaml",
                     "overlays/gpu/kustomization.yaml", "output/example/kustomization.yaml"):
        assert expected in files
    shipped = REPOSITORY / "overlays" / "gpu" / "kustomization.yaml"
    assert (repository / "overlays/gpu/kustomization.yaml").read_text() == shipped.read_text()


@pytest.mark.slow
def test_init_writes_the_launcher_policy_for_the_cluster(
    repository: Path, kubeconform: str, kubeconform_schema_location: str
) -> None:
    """Two ValidatingAdmissionPolicies and their bindings, applied once per cluster (what they
    allow and refuse is shown against a real API server in tests/cluster/)."""
    path = repository / "deploy/cluster/launcher-policy.yaml"
    text = path.read_text()
    assert "#   kubectl apply --server-side -f deploy/cluster/launcher-policy.yaml\n" in text
    documents = list(YAML(typ="safe").load_all(text))
    assert [(document["kind"], document["metadata"]["name"]) for document in documents] == [
        ("ValidatingAdmissionPolicy", "tfcompile-launcher-scale"),
        ("ValidatingAdmissionPolicyBinding", "tfcompile-launcher-scale"),
        ("ValidatingAdmissionPolicy", "tfcompile-launcher-records"),
        ("ValidatingAdmissionPolicyBinding", "tfcompile-launcher-records"),
    ]
    for policy, binding in (documents[0:2], documents[2:4]):
        assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                                   "validationActions": ["Deny"]}
    checked = subprocess.run(
        [kubeconform, "-strict", "-summary", "-kubernetes-version",
         kubeconform_version(DEFAULT_KUBERNETES_VERSION),
         "-schema-location", kubeconform_schema_location, str(path)],
        capture_output=True, text=True, check=False, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Valid: 4, Invalid: 0, Errors: 0, Skipped: 0" in checked.stdout




@pytest.mark.slow
def test_the_generated_ci_check_passes_and_then_catches_a_stale_output(
    repository: Path, kubeconform: str, kubeconform_schema_location: str
) -> None:
    first = run_check(repository, kubeconform_schema_location)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "output/example: 12 objects rendered" in first.stdout
    assert ("kubeconform: output/example/\nSummary: 12 resources found parsing stdin - Valid: 12, "
            "Invalid: 0, Errors: 0, Skipped: 0\n") in first.stdout
    job = repository / "jobs/example/job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 3"))
    stale = run_check(repository, kubeconform_schema_location)
    assert stale.returncode == 1
    assert "-  replicas: 2\n+  replicas: 3\n" in stale.stdout
    assert "example-worker-2.example-worker:2222" in stale.stdout  # TF_CONFIG


@pytest.mark.slow
def test_the_generated_ci_check_checks_the_version_it_is_given(
    repository: Path, kubeconform: str, kubeconform_schema_location: str
) -> None:
    oldest = run_check(repository, kubeconform_schema_location,
                       TFCOMPILE_KUBERNETES_VERSION="1.28.0")
    assert oldest.returncode == 0, oldest.stdout + oldest.stderr
    assert "output/example: 12 objects rendered, checked against Kubernetes 1.28: no problems" \
        in oldest.stdout
    assert "Valid: 12, Invalid: 0, Errors: 0, Skipped: 0" in oldest.stdout


@pytest.mark.slow
def test_the_generated_ci_check_fails_when_kubeconform_does(
    repository: Path, kubeconform: str, tmp_path: Path
) -> None:
    """`validate` passes, then kubeconform finds no schema for these objects: its verdict is
    the check's."""
    empty = tmp_path / "no-schemas"
    empty.mkdir()
    result = run_check(repository, f"{empty}/{{{{ .ResourceKind }}}}.json")
    assert result.returncode == 1
    assert "output/example: 12 objects rendered" in result.stdout
    assert "StatefulSet example-worker failed validation: could not find schema for StatefulSet" \
        in result.stdout


@pytest.mark.slow
def test_the_check_demands_kubeconform(repository: Path) -> None:
    only_tfcompile = repository.parent / "bin"  # not the kubeconform setup.sh installed
    only_tfcompile.mkdir()
    (only_tfcompile / "tfcompile").symlink_to(Path(BIN) / "tfcompile")
    environment = {**os.environ, "PATH": f"{only_tfcompile}:/usr/bin:/bin"}
    process = subprocess.run(["sh", "ci/check.sh"], cwd=repository, env=environment,
                             capture_output=True, text=True, check=False)
    assert process.returncode == 1
    assert "kubeconform is not installed; install it as the CI files do" in process.stderr


def test_workflows_run_the_check_with_the_requirement_given(repository: Path) -> None:
    github = load(repository / ".github/workflows/tfcompile.yaml")
    assert isinstance(github, dict)
    steps = github["jobs"]["check"]["steps"]
    assert steps[-2]["run"] == "sh ci/check.sh"
    assert f'pip install "{REQUIREMENT}"\n' in steps[2]["run"]
    gitlab = load(repository / ".gitlab-ci.yml")
    assert isinstance(gitlab, dict)
    assert gitlab["tfcompile"]["before_script"][0] == f'pip install "{REQUIREMENT}"'
    assert gitlab["tfcompile"]["script"][0] == "sh ci/check.sh"


GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
                "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}


def _git(repository: Path, *arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=repository, check=True, text=True,
                          capture_output=True, env={**os.environ, **GIT_IDENTITY}).stdout


@pytest.mark.slow
def test_the_ci_reports_what_merging_does(repository: Path, tmp_path: Path) -> None:
    """GitHub: the step run on a pull request's merge commit appends the diff to the job
    summary. GitLab: in a merge request pipeline the script writes tfcompile-diff.md, the
    artifact the merge request links as "tfcompile diff"; in a branch pipeline, nothing."""
    _git(repository, "init", "-q", "-b", "main")
    _git(repository, "add", ".")
    _git(repository, "commit", "-q", "-m", "Start")
    _git(repository, "checkout", "-q", "-b", "more-workers")
    job = repository / "jobs" / "example" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 4"))
    built = subprocess.run([f"{BIN}/tfcompile", "build", "jobs"], cwd=repository,
                           capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    _git(repository, "commit", "-q", "-a", "-m", "Four workers")
    base = _git(repository, "rev-parse", "main").strip()
    _git(repository, "checkout", "-q", "main")
    _git(repository, "merge", "-q", "--no-ff", "-m", "Merge", "more-workers")  # as GitHub does
    environment = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}

    github = load(repository / ".github/workflows/tfcompile.yaml")
    assert isinstance(github, dict)
    step = github["jobs"]["check"]["steps"][-1]
    assert step["if"] == "github.event_name == 'pull_request'"
    assert github["jobs"]["check"]["steps"][0]["with"]["fetch-depth"] == 2
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps' summary\n")
    subprocess.run(["sh", "-c", step["run"]], cwd=repository, check=True,
                   env={**environment, "GITHUB_STEP_SUMMARY": str(summary)})
    written = summary.read_text()
    assert written.startswith("earlier steps' summary\n### tfcompile diff\n")
    assert "#### `example`: changed\n" in written
    assert "- replicas: `worker` 2 → 4\n" in written

    gitlab = load(repository / ".gitlab-ci.yml")
    assert isinstance(gitlab, dict)
    job_settings = gitlab["tfcompile"]
    assert job_settings["variables"] == {"GIT_DEPTH": "0"}
    assert job_settings["artifacts"] == {"expose_as": "tfcompile diff",
                                         "paths": ["tfcompile-diff.md"]}
    _git(repository, "reset", "-q", "--hard", "more-workers")  # GitLab checks out the branch
    script = job_settings["script"][1]
    report = repository / "tfcompile-diff.md"
    subprocess.run(["sh", "-c", script], cwd=repository, check=True, capture_output=True,
                   env=environment)
    assert not report.exists()  # a branch pipeline: no merge request to report to
    shown = subprocess.run(["sh", "-c", script], cwd=repository, check=True, text=True,
                           capture_output=True,
                           env={**environment, "CI_MERGE_REQUEST_DIFF_BASE_SHA": base})
    assert report.read_text() == shown.stdout  # in the job's log too
    assert "- replicas: `worker` 2 → 4\n" in shown.stdout


def test_argo_cd_and_flux_sync_every_job_directory_with_prune(repository: Path) -> None:
    application_set = load(repository / "deploy/argocd/applicationset.yaml")
    assert isinstance(application_set, dict)
    spec = application_set["spec"]
    assert spec["generators"][0]["git"]["directories"] == [{"path": "output/*"}]
    assert spec["template"]["spec"]["source"]["path"] == "{{.path.path}}"
    assert spec["template"]["spec"]["syncPolicy"]["automated"] == {"prune": True,
                                                                    "selfHeal": True}
    # A job whose pods released it (scaled to 0) stays Synced; other changes still apply.
    assert spec["template"]["spec"]["ignoreDifferences"] == [
        {"group": "apps", "kind": "StatefulSet", "jsonPointers": ["/spec/replicas"]}]
    options = spec["template"]["spec"]["syncPolicy"]["syncOptions"]
    assert "ApplyOutOfSyncOnly=true" in options
    assert "RespectIgnoreDifferences=true" not in options  # it would block `suspend: true`
    documents = list(YAML(typ="safe").load_all(
        (repository / "deploy/flux/training-jobs.yaml").read_text()))
    kustomization = next(d for d in documents if d["kind"] == "Kustomization")
    assert kustomization["spec"]["path"] == "./output"
    assert kustomization["spec"]["prune"] is True


def test_pre_commit_configuration_runs_a_real_command(repository: Path) -> None:
    configuration = load(repository / ".pre-commit-config.yaml")
    assert isinstance(configuration, dict)
    [hook] = configuration["repos"][0]["hooks"]
    words = shlex.split(hook["entry"])
    assert words[0] == "tfcompile"
    arguments = parser().parse_args(words[1:])
    assert arguments.command == "build"


def test_init_overwrites_nothing(repository: Path, run_cli: Callable[..., Result]) -> None:
    job = repository / "jobs/example/job.yaml"
    job.write_text("# mine\n")
    result = run_cli("init", str(repository))
    assert result.status == 2
    assert "overwrites nothing" in result.stderr
    assert job.read_text() == "# mine\n"


def test_this_repository_offers_pre_commit_hooks_that_parse() -> None:
    hooks = load(REPOSITORY / ".pre-commit-hooks.yaml")
    assert isinstance(hooks, list)
    assert [hook["id"] for hook in hooks] == ["tfcompile-build", "tfcompile-check",
                                              "tfcompile-validate"]
    for hook in hooks:
        words = shlex.split(hook["entry"]) + hook.get("args", [])
        assert words[0] == "tfcompile"
        assert parser().parse_args(words[1:]).command in {"build", "validate"}
        assert hook["language"] == "python" and hook["pass_filenames"] is False


@pytest.mark.slow
def test_the_pre_commit_hooks_run_in_another_repository(repository: Path, tmp_path: Path) -> None:
    """A user's `.pre-commit-config.yaml` names this repository and a revision; pre-commit installs
    tfcompile from it into its own environment and runs the hooks in the user's repository."""
    environment = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
                   "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.com",
                   "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.com"}

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, cwd=repository, env=environment, capture_output=True,
                              text=True, check=False)

    revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True,
                              text=True, check=True).stdout.strip()
    (repository / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {REPOSITORY}\n  rev: {revision}\n  hooks:\n"
        "  - id: tfcompile-build\n  - id: tfcompile-validate\n")
    pre_commit = str(Path(sys.executable).parent / "pre-commit")
    assert run("git", "init", "-q").returncode == 0
    assert run("git", "add", "-A").returncode == 0
    fresh = run(pre_commit, "run", "--all-files")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "tfcompile validate" in fresh.stdout
    job = repository / "jobs/example/job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 3"))
    rebuilt = run(pre_commit, "run", "--all-files")
    assert rebuilt.returncode == 1  # the hook changed output/: the commit must include it
    assert "files were modified by this hook" in rebuilt.stdout
    compiled = repository / "output/example/statefulset-example-worker.yaml"
    assert "replicas: 3" in compiled.read_text()
    again = run(pre_commit, "run", "--all-files")
    assert again.returncode == 0, again.stdout


def _tree(root: Path) -> dict[str, str]:
    """Every entry under `root`, links not followed: a file's text, a link's target."""
    found: dict[str, str] = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder) / name
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[key] = f"-> {os.readlink(path)}"
            elif path.is_file():
                found[key] = path.read_text()
            else:
                found[key] = "(folder)"
    return found


LINKS = {
    "jobs": "folder", "jobs/example": "folder", "deploy/argocd": "folder",
    "overlays/gpu": "folder", "output": "folder", "output/example": "folder",
    ".gitlab-ci.yml": "dangling", ".github/workflows/tfcompile.yaml": "dangling",
    "ci/check.sh": "file", "jobs/example/job.yaml": "dangling",
    "output/example/kustomization.yaml": "dangling", "output/example/notes.txt": "file",
    "output/README.md": "dangling",
}
"""Where a link may wait for init, and what it points at: a folder outside, a file outside
(which a write through it would change, and the check script's mode too), or nothing (which a
write through it would create)."""


def _plant(target: Path, outside: Path, link: str, kind: str) -> None:
    path = target / link
    path.parent.mkdir(parents=True, exist_ok=True)
    aim = {"folder": outside / "folder", "file": outside / "file.txt",
           "dangling": outside / "missing" / "created-by-init"}[kind]
    path.symlink_to(aim)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside init's target, with a folder and a file of its own."""
    folder = tmp_path / "outside"
    (folder / "folder").mkdir(parents=True)
    (folder / "file.txt").write_text("mine\n")
    return folder


@pytest.mark.parametrize("link", sorted(LINKS))
def test_init_refuses_a_link_where_it_writes_and_writes_nothing(
    tmp_path: Path, outside: Path, run_cli: Callable[..., Result], link: str,
) -> None:
    target = tmp_path / "repository"
    _plant(target, outside, link, LINKS[link])
    before, outside_before = _tree(target), _tree(outside)
    result = run_cli("init", str(target), "--tfcompile-requirement", REQUIREMENT)
    assert result.status == 2, result.stderr
    assert f"tfcompile: {target / link}: is a symbolic link; init writes nothing through a " \
           "link (dangling or not)" in result.stderr
    assert result.stderr.endswith("tfcompile: nothing was written\n")
    assert "Traceback" not in result.stderr
    assert _tree(target) == before
    assert _tree(outside) == outside_before


def test_init_names_every_link_at_once(
    tmp_path: Path, outside: Path, run_cli: Callable[..., Result],
) -> None:
    target = tmp_path / "repository"
    for link, kind in LINKS.items():
        if "/" not in link:  # one link on each way, so that each is looked at
            _plant(target, outside, link, kind)
    (target / "deploy").mkdir()
    _plant(target, outside, "deploy/flux", "folder")
    result = run_cli("init", str(target), "--tfcompile-requirement", REQUIREMENT)
    assert result.status == 2
    named = {line.split(": is a symbolic link")[0].removeprefix("tfcompile: ")
             for line in result.stderr.splitlines() if ": is a symbolic link" in line}
    assert named == {str(target / link) for link in
                     ("jobs", "output", ".gitlab-ci.yml", "deploy/flux")}
    assert _tree(outside) == {"file.txt": "mine\n", "folder": "(folder)"}


@pytest.mark.parametrize("through", ["repository", "repository/sub"])
def test_init_refuses_a_target_reached_through_a_link(
    tmp_path: Path, outside: Path, run_cli: Callable[..., Result], through: str,
) -> None:
    """As `build` walks its output directory: no link on the way to DIR, DIR included."""
    (tmp_path / "repository").symlink_to(outside / "folder")
    result = run_cli("init", str(tmp_path / through), "--tfcompile-requirement", REQUIREMENT)
    assert result.status == 2
    assert f"{tmp_path / 'repository'}: is a symbolic link" in result.stderr
    assert _tree(outside) == {"file.txt": "mine\n", "folder": "(folder)"}


@pytest.mark.parametrize("link", ["jobs", "deploy", ".gitlab-ci.yml", "ci/check.sh"])
def test_a_link_made_between_the_look_and_the_write_is_not_followed(
    tmp_path: Path, outside: Path, run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch, link: str,
) -> None:
    """Each folder is opened and each file created without following a link, relative to the
    folder before: a link put in place after init looked is met, not followed, and init
    removes what it had written."""
    from tfcompile.compiler.scaffold import repository, writing

    target = tmp_path / "repository"
    target.mkdir()
    looked = writing.refusals

    def look_then_plant(*arguments: Any, **options: Any) -> list[str]:
        reasons = looked(*arguments, **options)
        _plant(target, outside, link, "folder" if "." not in link else "dangling")
        return reasons

    monkeypatch.setattr(repository, "refusals", look_then_plant)
    result = run_cli("init", str(target), "--tfcompile-requirement", REQUIREMENT)
    assert result.status == 2, result.stderr
    assert f"{target / link}: is a symbolic link" in result.stderr
    assert "it appeared while init wrote, which removed what it wrote" in result.stderr
    assert _tree(outside) == {"file.txt": "mine\n", "folder": "(folder)"}
    assert set(_tree(target)) <= {link, "ci"}  # what init wrote is gone; the link stays


def test_init_looks_for_links_where_its_build_writes(repository: Path) -> None:
    """The job directory init looks into is the one its build writes the example into."""
    from tfcompile.compiler.scaffold.repository import EXAMPLE_OUTPUT

    assert sorted(path.name for path in (repository / "output").iterdir()) == [
        "README.md", Path(EXAMPLE_OUTPUT).name]
