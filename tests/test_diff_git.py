"""`tfcompile diff BASE` in real git repositories: BASE read with git's plumbing, and every bad
input (a BASE that is not a commit, an `output/` that cannot be read at it, a file past the
bounds, an object a partial clone lacks) one line and exit 2, never a traceback; no setting of
the repository (`core.fsmonitor`, a promisor remote's transport) starts a program, nothing is
fetched, and only the files a kustomization lists are read. Runs git and the installed
`tfcompile`, so in the slow tier.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import job_text

pytestmark = pytest.mark.slow

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")
ROLES = "chief: {replicas: 1}\nworker: {replicas: 2, gpus: 1}\nps: {replicas: 1}"
JOB = job_text(image="tf:1", script="train.py", command=None, roles=ROLES) + (
    "  storage:\n    shared: {mountPath: /mnt/shared, size: 10Gi}\n")
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
                "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid"}


def git(repository: Path, *arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=repository, check=True, text=True,
                          capture_output=True, env={**os.environ, **GIT_IDENTITY}).stdout


def tfcompile(directory: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TFCOMPILE, *arguments], cwd=directory, capture_output=True,
                          text=True, check=False, timeout=120)


def build(repository: Path, job: str = JOB) -> None:
    (repository / "jobs" / "demo" / "job.yaml").write_text(job)
    built = tfcompile(repository, "build", "jobs")
    assert built.returncode == 0, built.stderr


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A repository whose first commit holds a job and its compiled output."""
    repository = tmp_path / "training-jobs"
    (repository / "jobs" / "demo").mkdir(parents=True)
    (repository / "jobs" / "demo" / "train.py").write_text("print('train')\n")
    build(repository)
    git(repository, "init", "-q", "-b", "main")
    git(repository, "add", ".")
    git(repository, "commit", "-q", "-m", "A job")
    return repository


def refused(result: subprocess.CompletedProcess[str], message: str) -> None:
    """Exit 2, one line on stderr saying `message`, nothing on stdout."""
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr == f"tfcompile: diff: {message}\n"


def test_a_change_against_the_last_commit(repository: Path) -> None:
    build(repository, JOB.replace("replicas: 2", "replicas: 3"))
    result = tfcompile(repository, "diff", "HEAD")
    assert result.returncode == 0, result.stderr
    commit = git(repository, "rev-parse", "HEAD").strip()
    lines = result.stdout.splitlines()
    assert lines[0] == f"tfcompile diff: output at HEAD ({commit[:12]}) → working tree"
    assert lines[1] == "demo: changed"
    assert "  replicas: worker 2 → 3" in lines
    assert "  GPUs requested: 2 → 3" in lines
    assert any(line.startswith("  restarts chief, ps, worker: ") and "TF_CONFIG" in line
               for line in lines)
    markdown = tfcompile(repository, "diff", "main", "--format", "markdown")
    assert markdown.returncode == 0, markdown.stderr
    assert "#### `demo`: changed\n" in markdown.stdout
    assert "- GPUs requested: 2 → 3\n" in markdown.stdout
    assert git(repository, "status", "--porcelain").strip()  # nothing was checked out


def test_nothing_changed_and_deleted_jobs(repository: Path) -> None:
    same = tfcompile(repository, "diff", "HEAD")
    assert same.stdout.splitlines()[1:] == ["no job changes"]
    (repository / "jobs" / "demo" / "job.yaml").unlink()
    assert tfcompile(repository, "build", "jobs").returncode == 0
    result = tfcompile(repository, "diff", "HEAD")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "demo: deleted: its pods stop and its objects are pruned",
        "  replicas: chief 1 → none, ps 1 → none, worker 2 → none",
        "  GPUs requested: 2 → 0",
        "  keeps claim demo-shared and the data on it (whenDeleted: Retain; Argo CD and Flux "
        "leave it: delete it with kubectl when done)"]


def test_from_a_subdirectory_the_output_is_found_at_base_where_it_is_now(
        repository: Path) -> None:
    build(repository, JOB.replace("image: tf:1", "image: tf:2"))
    result = tfcompile(repository / "jobs", "diff", "HEAD", "-o", "../output")
    assert result.returncode == 0, result.stderr
    assert "  restarts chief, ps, worker: image" in result.stdout.splitlines()


@pytest.mark.parametrize("base", ["no-such-branch", "HEAD~3", "HEAD^{tree}", "main\x1b[2J"])
def test_a_base_that_is_not_a_revision(repository: Path, base: str) -> None:
    shown = base.replace("\x1b", "\\x1b")
    refused(tfcompile(repository, "diff", base),
            f"{shown}: is not a revision of this repository (a commit, branch or tag)")


@pytest.mark.parametrize("base", ["--output=elsewhere", "-h", "--end-of-options"])
def test_a_base_that_looks_like_an_option(repository: Path, base: str) -> None:
    refused(tfcompile(repository, "diff", "--", base),
            f"{base}: looks like an option; BASE is a commit, branch or tag")


@pytest.mark.parametrize("base", [":0:output/demo/kustomization.yaml", ":output", "HEAD:output",
                                  "HEAD:", ":/A job", "main^{/A}:output"])
def test_a_base_that_names_a_path_or_the_index(repository: Path, base: str) -> None:
    refused(tfcompile(repository, "diff", base),
            f"{base}: names a file, a directory or the index (':'); BASE is a commit, branch "
            "or tag")


def test_a_colon_inside_braces_is_part_of_a_revision(repository: Path) -> None:
    result = tfcompile(repository, "diff", "main@{2999-01-01 00:00:00}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == ["no job changes"]


def executable(path: Path, script: str) -> Path:
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


def test_core_fsmonitor_never_runs(repository: Path, tmp_path: Path) -> None:
    """git runs `core.fsmonitor` when it reads the index: a BASE reaching the index is refused
    before git sees it, and git runs with the setting off."""
    marker = tmp_path / "fsmonitor-ran"
    hook = executable(tmp_path / "fsmonitor", f"touch '{marker}'\nexit 1")
    git(repository, "config", "core.fsmonitor", str(hook))
    git(repository, "status")
    assert marker.exists()  # the setting does run a program
    marker.unlink()
    for base in (":0:output/demo/kustomization.yaml", ":0:x^{commit}", "HEAD"):
        tfcompile(repository, "diff", base)
        assert not marker.exists(), base


def missing_objects(clone: Path) -> set[str]:
    """The objects a partial clone lacks, listed without fetching them."""
    listed = git(clone, "rev-list", "--objects", "--missing=print", "--all")
    return {line[1:] for line in listed.splitlines() if line.startswith("?")}


def clone_partially(repository: Path, tmp_path: Path, kind: str = "blob:none") -> Path:
    """A clone of `repository` made with `--filter=kind`, its checkout the main branch; its
    promisor remote is served from a local bare repository."""
    served = tmp_path / "served.git"
    git(tmp_path, "clone", "-q", "--bare", str(repository), str(served))
    git(served, "config", "uploadpack.allowFilter", "true")
    clone = tmp_path / f"clone-{kind.replace(':', '-')}"
    git(tmp_path, "clone", "-q", f"--filter={kind}", f"file://{served}", str(clone))
    return clone


@pytest.fixture
def partial_clone(repository: Path, tmp_path: Path) -> Path:
    """A clone without blobs (`--filter=blob:none`) of the repository after a second commit
    that changes the job's image: it holds the blobs of its checkout (the second commit), not
    those only the first commit has."""
    build(repository, JOB.replace("image: tf:1", "image: tf:2"))
    git(repository, "add", "-A")
    git(repository, "commit", "-q", "-m", "tf:2")
    return clone_partially(repository, tmp_path)


NOT_IN_CLONE = ("is not in this clone (a partial clone leaves objects out) and diff fetches "
                "nothing: fetch it with git first, or diff in a clone made without --filter")


def test_a_partial_clone_fetches_nothing(partial_clone: Path) -> None:
    """The first commit's changed files are not in the clone: diff refuses (exit 2), naming
    the first one it needs, instead of fetching them from the promisor remote."""
    missing = missing_objects(partial_clone)
    assert missing
    result = tfcompile(partial_clone, "diff", "HEAD~1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    match = re.fullmatch(rf"tfcompile: diff: (output/demo/[a-z0-9.-]+) at HEAD~1: "
                         rf"{re.escape(NOT_IN_CLONE)}\n", result.stderr)
    assert match, result.stderr
    listed = git(partial_clone, "ls-tree", "HEAD~1", "--", match.group(1)).split()
    assert listed[2] in missing
    assert missing_objects(partial_clone) == missing


def test_a_tree_left_out_of_a_partial_clone(repository: Path, tmp_path: Path) -> None:
    """`--filter=tree:0` leaves out the trees of every commit but the checkout's."""
    build(repository, JOB.replace("image: tf:1", "image: tf:2"))
    git(repository, "commit", "-q", "-a", "-m", "tf:2")
    clone = clone_partially(repository, tmp_path, "tree:0")
    missing = missing_objects(clone)
    refused(tfcompile(clone, "diff", "HEAD~1"), f". at HEAD~1: {NOT_IN_CLONE}")
    assert missing_objects(clone) == missing


def test_only_the_files_a_kustomization_lists_are_read(repository: Path,
                                                       tmp_path: Path) -> None:
    """At BASE, a file beside a job's listed ones and a folder that is no job hold blobs this
    partial clone lacks and cannot fetch (its remote is gone), one larger than any bound: diff
    never asks for them."""
    git(repository, "switch", "-q", "-c", "notes")
    (repository / "output" / "demo" / "notes.bin").write_bytes(b"\0" * (5 * 1024 * 1024))
    (repository / "output" / "notes").mkdir()
    (repository / "output" / "notes" / "todo.yaml").write_text("kind: [\n")
    git(repository, "add", "-A")
    git(repository, "commit", "-q", "-m", "Notes")
    git(repository, "switch", "-q", "main")
    clone = clone_partially(repository, tmp_path)
    git(clone, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    result = tfcompile(clone, "diff", "origin/notes")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == ["no job changes"]


MEBIBYTE = 1024 * 1024


def commit_at_base(repository: Path, files: dict[str, str]) -> None:
    """Commit `files` (path under output/demo -> text), then put the working tree back."""
    job = repository / "output" / "demo"
    saved = {name: (job / name).read_text() for name in files if (job / name).exists()}
    for name, text in files.items():
        (job / name).write_text(text)
    git(repository, "add", "-A")
    git(repository, "commit", "-q", "-m", "At BASE")
    for name in files:
        if name in saved:
            (job / name).write_text(saved[name])
        else:
            (job / name).unlink()


def test_a_listed_file_past_the_bound_at_base(repository: Path) -> None:
    job = repository / "output" / "demo"
    text = (job / "service-demo-worker.yaml").read_text() + "# " + "x" * 4 * MEBIBYTE + "\n"
    commit_at_base(repository, {"service-demo-worker.yaml": text})
    refused(tfcompile(repository, "diff", "HEAD"),
            f"output/demo/service-demo-worker.yaml at HEAD: is larger than 4 MiB "
            f"({len(text.encode()):,} bytes), the most diff reads of one file; tfcompile "
            "writes none so large")


def test_a_kustomization_listing_too_many_files_at_base(repository: Path) -> None:
    listing = "resources:\n" + "".join(f"- file-{index}.yaml\n" for index in range(65))
    commit_at_base(repository, {"kustomization.yaml": listing})
    refused(tfcompile(repository, "diff", "HEAD"),
            "output/demo/kustomization.yaml at HEAD: lists 65 files, more than the 64 diff "
            "reads of one job; tfcompile writes some twenty at most")


def test_a_job_past_the_bound_at_base(repository: Path) -> None:
    job = repository / "output" / "demo"
    names = sorted(path.name for path in job.iterdir()
                   if path.name.startswith(("service-", "statefulset-")))
    assert len(names) == 6
    padding = "# " + "x" * (3 * MEBIBYTE) + "\n"  # each file within the bound of one
    files = {name: (job / name).read_text() + padding for name in names}
    commit_at_base(repository, files)
    total = sum((job / path.name).stat().st_size for path in job.iterdir()
                if path.name not in files) + sum(len(text.encode()) for text in files.values())
    refused(tfcompile(repository, "diff", "HEAD"),
            f"output/demo at HEAD: its kustomization and the files it lists are {total:,} "
            "bytes, more than the 16 MiB diff reads of one job")


@pytest.mark.parametrize("transport", ["ext", "ssh"])
def test_a_partial_clone_s_remote_runs_no_program(partial_clone: Path, tmp_path: Path,
                                                   transport: str) -> None:
    """A promisor remote whose transport runs a program (`ext::`, allowed by the repository;
    `core.sshCommand`) is never reached: git refuses every transport before starting one."""
    marker = tmp_path / "transport-ran"
    if transport == "ext":
        git(partial_clone, "config", "protocol.ext.allow", "always")
        git(partial_clone, "remote", "set-url", "origin", f"ext::sh -c touch% {marker}")
    else:
        command = executable(tmp_path / "ssh", f"touch '{marker}'\nexit 1")
        git(partial_clone, "config", "core.sshCommand", str(command))
        git(partial_clone, "remote", "set-url", "origin", "ssh://git.example.invalid/jobs")
    result = tfcompile(partial_clone, "diff", "HEAD~1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert not marker.exists()


def test_not_a_git_repository(tmp_path: Path) -> None:
    refused(tfcompile(tmp_path, "diff", "HEAD"), f"{tmp_path}: is not in a git repository")


def test_output_missing_at_base(repository: Path) -> None:
    git(repository, "rm", "-q", "-r", "--cached", "output")
    git(repository, "commit", "-q", "-m", "No output")
    refused(tfcompile(repository, "diff", "HEAD"), "output at HEAD: does not exist")
    (repository / "elsewhere").mkdir()
    refused(tfcompile(repository, "diff", "HEAD~1", "-o", "elsewhere"),
            "elsewhere at HEAD~1: does not exist")


def test_output_a_file_at_base(repository: Path) -> None:
    git(repository, "rm", "-q", "-r", "--cached", "output")
    (repository / "saved").mkdir()
    (repository / "output").rename(repository / "saved" / "output")
    (repository / "output").write_text("not a directory\n")
    git(repository, "add", "output")
    git(repository, "commit", "-q", "-m", "A file")
    (repository / "output").unlink()
    (repository / "saved" / "output").rename(repository / "output")
    refused(tfcompile(repository, "diff", "HEAD"), "output at HEAD: is not a directory")


def test_malformed_yaml_at_base(repository: Path) -> None:
    path = repository / "output" / "demo" / "service-demo-worker.yaml"
    good = path.read_text()
    path.write_text("kind: Service\nmetadata: {name: [\n")
    git(repository, "commit", "-q", "-a", "-m", "Broken")
    path.write_text(good)
    refused(tfcompile(repository, "diff", "HEAD"),
            "output/demo/service-demo-worker.yaml at HEAD: is not valid YAML "
            "(line 3, column 1)")


def test_a_link_at_base(repository: Path) -> None:
    path = repository / "output" / "demo" / "service-demo-worker.yaml"
    good = path.read_text()
    (repository / "elsewhere.yaml").write_text(good)
    path.unlink()
    path.symlink_to("../../elsewhere.yaml")
    git(repository, "add", "-A")
    git(repository, "commit", "-q", "-m", "A link")
    path.unlink()
    path.write_text(good)
    refused(tfcompile(repository, "diff", "HEAD"),
            "output/demo/service-demo-worker.yaml at HEAD: is a symbolic link, which "
            "tfcompile never writes or follows")


def test_an_output_outside_the_repository(repository: Path, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    refused(tfcompile(repository, "diff", "HEAD", "-o", str(tmp_path / "other")),
            f"{tmp_path / 'other'}: is outside the git repository")


def test_a_gpu_limit_longer_than_python_converts_at_base(repository: Path) -> None:
    """A quantity string of 5,001 digits (past the 4,300 Python's int takes from text) is
    counted, not a traceback."""
    path = repository / "output" / "demo" / "statefulset-demo-worker.yaml"
    good = path.read_text()
    assert "nvidia.com/gpu: 1\n" in good
    path.write_text(good.replace("nvidia.com/gpu: 1\n", f"nvidia.com/gpu: '1{'0' * 5_000}'\n"))
    git(repository, "commit", "-q", "-a", "-m", "Many GPUs")
    path.write_text(good)
    result = tfcompile(repository, "diff", "HEAD")
    assert result.returncode == 0, result.stderr
    assert "  GPUs requested: 200000…000000 (5,001 digits) → 2" in result.stdout.splitlines()


def test_a_job_past_the_values_bound_at_base(repository: Path) -> None:
    """Seven files of 9,990 values each (within the bound of one file) are more than a job's
    64,000: refused once the seventh is parsed."""
    values = ",".join(["0"] * 9_990)
    files = {f"configmap-{index}.yaml": f"kind: ConfigMap\nmetadata: {{name: c{index}}}\n"
             f"data: [{values}]\n" for index in range(7)}
    listing = "resources:\n" + "".join(f"- {name}\n" for name in files)
    commit_at_base(repository, {**files, "kustomization.yaml": listing})
    refused(tfcompile(repository, "diff", "HEAD"),
            "output/demo at HEAD: its files hold more than 64,000 values (keys included), the "
            "most diff reads of one job; tfcompile writes some 2,000")
