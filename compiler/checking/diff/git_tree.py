"""`output/` as it was at a git revision, read with git's plumbing, never a checkout.

A checkout would touch the working tree the user is diffing against (and their uncommitted
work); `git ls-tree` lists the tree at the revision and `git cat-file --batch` reads every blob
in one process, git run as `git_command` runs it (no setting of the repository starts a
program, nothing is fetched).

BASE names a commit, and nothing else reaches git: an argument that looks like an option
(`-…`) is refused, and so is a `:` outside `@{…}` or `^{…}`: `:path` and `:0:path` name the
index, whose reading runs `core.fsmonitor`, `rev:path` names a file or a directory and `:/text`
searches every commit's message. What is left is resolved with `rev-parse --verify
--end-of-options BASE^{commit}`, so a tree, a blob or a typo is refused too. The output
directory is found at BASE where it is now relative to the repository's top, so `-o` means the
same on both sides.

Refused with one line each (`DiffInputError`): not a git repository, BASE not a commit,
`output/` missing or not a directory at BASE, a symbolic link or a submodule anywhere in it
(tfcompile never writes either), and what `trees` refuses in the files.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from tfcompile.compiler.printable import printable

from .git_command import run_git
from .trees import KUSTOMIZATION, DiffInputError, JobOutput, OutputTree, read_job

_LINK_MODE = "120000"
_SUBMODULE_MODE = "160000"
_COMMIT_WORDS = "a commit, branch or tag"

def check_base(base: str) -> None:
    """Refuse, before git sees it, a BASE that looks like an option or names a path or the
    index (a `:` outside braces, as git finds one)."""
    if base.startswith("-"):
        raise DiffInputError(f"{printable(base)}: looks like an option; BASE is {_COMMIT_WORDS}")
    depth = 0
    for character in base:
        if character == "{":
            depth += 1
        elif character == "}" and depth:
            depth -= 1
        elif character == ":" and not depth:
            raise DiffInputError(f"{printable(base)}: names a file, a directory or the index "
                                 f"(':'); BASE is {_COMMIT_WORDS}")


def _git(arguments: list[str], directory: Path, stdin: bytes | None = None) -> bytes | None:
    """git's output, or None when it failed (its message is not shown: it may echo BASE)."""
    process = run_git(arguments, directory, stdin)
    return process.stdout if process.returncode == 0 else None


def _commit(base: str, directory: Path) -> str:
    if _git(["rev-parse", "--git-dir"], directory) is None:
        raise DiffInputError(f"{printable(str(directory))}: is not in a git repository")
    found = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{base}^{{commit}}"],
                 directory)
    if found is None:
        raise DiffInputError(f"{printable(base)}: is not a revision of this repository "
                             f"({_COMMIT_WORDS})")
    return found.decode().strip()


def _output_path(output: Path, directory: Path) -> str:
    """The output directory relative to the repository's top, as git names paths."""
    top = _git(["rev-parse", "--show-toplevel"], directory)
    if top is None:
        raise DiffInputError(f"{printable(str(directory))}: has no work tree to compare")
    top_directory = os.path.realpath(os.fsdecode(top.rstrip(b"\n")))
    target = os.path.normpath(os.path.join(os.path.realpath(directory), output))
    relative = os.path.relpath(target, top_directory)
    if relative == ".." or relative.startswith("../"):
        raise DiffInputError(f"{printable(str(output))}: is outside the git repository")
    return "" if relative == "." else relative


def _entries(tree: str, directory: Path, shown: str) -> list[tuple[str, str, str]]:
    """(mode, object, path) of every file under the tree, recursively."""
    listed = _git(["ls-tree", "-r", "-z", "--full-tree", tree], directory)
    if listed is None:
        raise DiffInputError(f"{shown}: cannot be listed")
    entries = []
    for record in listed.split(b"\0"):
        if not record:
            continue
        header, _, path = record.partition(b"\t")
        mode, _, rest = header.decode().partition(" ")
        _, _, name = rest.partition(" ")
        entries.append((mode, name, os.fsdecode(path)))
    return entries


def _blobs(names: list[str], directory: Path) -> dict[str, bytes]:
    """The contents of the blobs named, read by one `git cat-file --batch`."""
    if not names:
        return {}
    answer = _git(["cat-file", "--batch"], directory, "\n".join(names).encode() + b"\n")
    if answer is None:
        raise DiffInputError("git cat-file could not read the output tree")
    contents: dict[str, bytes] = {}
    position = 0
    for name in names:
        end = answer.index(b"\n", position)
        header = answer[position:end].decode().split(" ")
        position = end + 1
        if len(header) != 3 or header[1] != "blob":
            continue  # missing: reported as missing where it is read
        size = int(header[2])
        contents[name] = answer[position:position + size]
        position += size + 1
    return contents


def read_revision(base: str, output: Path, directory: Path) -> tuple[str, OutputTree]:
    """The commit BASE names and the jobs of the output tree at it; `directory` is where the
    command runs (a relative `output` is relative to it)."""
    check_base(base)
    commit = _commit(base, directory)
    path = _output_path(output, directory)
    shown_tree = f"{printable(path or '.')} at {printable(base)}"
    tree = _git(["rev-parse", "--verify", "--quiet", f"{commit}:{path}"], directory)
    kind = (_git(["cat-file", "-t", tree.decode().strip()], directory)
            if tree is not None else None)
    if tree is None or kind is None:
        raise DiffInputError(f"{shown_tree}: does not exist")
    if kind.strip() != b"tree":
        raise DiffInputError(f"{shown_tree}: is not a directory")
    entries = _entries(tree.decode().strip(), directory, shown_tree)
    files: dict[str, dict[str, str]] = {}
    for mode, name, file_path in entries:
        shown_file = f"{printable(posixpath.join(path, file_path))} at {printable(base)}"
        if mode == _LINK_MODE:
            raise DiffInputError(f"{shown_file}: is a symbolic link, which tfcompile never "
                                 "writes or follows")
        if mode == _SUBMODULE_MODE:
            raise DiffInputError(f"{shown_file}: is a submodule, which tfcompile never writes")
        job, separator, inside = file_path.partition("/")
        if separator and not job.startswith("."):
            files.setdefault(job, {})[inside] = name
    contents = _blobs(sorted({name for job_files in files.values()
                              for name in job_files.values()}), directory)
    jobs: dict[str, JobOutput] = {}
    for job, job_files in sorted(files.items()):
        if KUSTOMIZATION not in job_files:
            continue  # not a job directory

        def read(name: str, job_files: dict[str, str] = job_files) -> bytes | None:
            blob = job_files.get(name)
            return contents.get(blob) if blob is not None else None

        def shown(name: str, job: str = job) -> str:
            return f"{printable(posixpath.join(path, job, name))} at {printable(base)}"

        jobs[job] = read_job(read, shown)
    return commit, jobs
