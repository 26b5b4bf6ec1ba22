"""`output/` as it was at a git revision, read by object id with git's plumbing, never a
checkout.

A checkout would touch the working tree the user is diffing against (and their uncommitted
work). Here git is run as `git_command` runs it (no setting of the repository starts a program,
nothing is fetched) and objects are read by id (`git_objects`): trees are parsed here, so no
path or revision syntax reaches git after BASE.

BASE names a commit, and nothing else reaches git: an argument that looks like an option
(`-…`) is refused, and so is a `:` outside `@{…}` or `^{…}`: `:path` and `:0:path` name the
index, whose reading runs `core.fsmonitor`, `rev:path` names a file or a directory and `:/text`
searches every commit's message. What is left is resolved with `rev-parse --verify
--end-of-options BASE^{commit}`, so a tree, a blob or a typo is refused too. The output
directory is found at BASE where it is now relative to the repository's top, so `-o` means the
same on both sides.

What is read, step by step, each step one `cat-file --batch-check` (sizes, held to `bounds`
before anything is read) and one `cat-file --batch` for every job at once:

1. the commit, for its tree, then the trees down to the output directory;
2. the output directory's tree: each directory in it is a job when it holds a
   `kustomization.yaml` file (names starting with `.` are a killed build's leftovers);
3. those directories' trees;
4. the kustomizations (`trees.read_listing`);
5. the files they list, held to `bounds` per file, per job and for the whole tree.

Nothing else: not a file a kustomization does not list, not a folder inside a job directory.
Refused with one line each (`DiffInputError`): not a git repository, BASE not a commit,
`output/` missing or not a directory at BASE, a symbolic link or a submodule in it or in a job
directory (tfcompile never writes either), an object this clone does not hold, and what
`trees` and `bounds` refuse.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from tfcompile.compiler.printable import printable

from .bounds import JobBudget, TreeBudget, check_file, check_git_object
from .git_command import git_output
from .git_objects import Entries, contents, describe, tree_entries
from .trees import (
    KUSTOMIZATION,
    DiffInputError,
    Listing,
    OutputTree,
    job_output,
    read_listing,
)

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


def _commit(base: str, directory: Path) -> str:
    if git_output(["rev-parse", "--git-dir"], directory) is None:
        raise DiffInputError(f"{printable(str(directory))}: is not in a git repository")
    found = git_output(["rev-parse", "--verify", "--quiet", "--end-of-options",
                        f"{base}^{{commit}}"], directory)
    if found is None:
        raise DiffInputError(f"{printable(base)}: is not a revision of this repository "
                             f"({_COMMIT_WORDS})")
    return found.decode().strip()


def _output_path(output: Path, directory: Path) -> str:
    """The output directory relative to the repository's top, as git names paths."""
    top = git_output(["rev-parse", "--show-toplevel"], directory)
    if top is None:
        raise DiffInputError(f"{printable(str(directory))}: has no work tree to compare")
    top_directory = os.path.realpath(os.fsdecode(top.rstrip(b"\n")))
    target = os.path.normpath(os.path.join(os.path.realpath(directory), output))
    relative = os.path.relpath(target, top_directory)
    if relative == ".." or relative.startswith("../"):
        raise DiffInputError(f"{printable(str(output))}: is outside the git repository")
    return "" if relative == "." else relative


def _is_directory(mode: int) -> bool:
    return stat.S_ISDIR(mode)


def _is_file(mode: int) -> bool:
    return stat.S_ISREG(mode)


class _Revision:
    """The objects of one commit, read in batches, each named in messages by its path."""

    def __init__(self, directory: Path, commit: str, base: str) -> None:
        self.directory = directory
        self.commit = commit
        self.base = printable(base)
        self.identifier_bytes = len(commit) // 2

    def shown(self, path: str) -> str:
        return f"{printable(path or '.')} at {self.base}"

    def read(self, wanted: Sequence[tuple[str, str]], kind: str) -> list[bytes]:
        """Objects of one kind by id, each no larger than one file may be (`bounds`); `wanted`
        holds (id, path)."""
        shown = [self.shown(path) for _, path in wanted]
        found = describe(self.directory, [(identifier, name)
                                          for (identifier, _), name in zip(wanted, shown,
                                                                           strict=True)])
        for item, name in zip(found, shown, strict=True):
            if item.kind != kind:
                raise DiffInputError(f"{name}: is a git {item.kind}, not a {kind}")
            if kind == "blob":
                check_file(item.size, name)
            else:
                check_git_object(item.size, kind, name)
        return contents(self.directory, found, shown)

    def entries(self, data: bytes, path: str) -> Entries:
        try:
            return tree_entries(data, self.identifier_bytes)
        except ValueError:
            raise DiffInputError(f"{self.shown(path)}: is not a valid git tree") from None

    def trees(self, wanted: Sequence[tuple[str, str]]) -> list[Entries]:
        """The entries of the trees (id, path) given."""
        return [self.entries(data, path)
                for data, (_, path) in zip(self.read(wanted, "tree"), wanted, strict=True)]

    def root(self) -> str:
        """The id of the commit's tree."""
        (data,) = self.read([(self.commit, "")], "commit")
        first_line = data.split(b"\n", 1)[0].decode("ascii", "replace")
        word, _, identifier = first_line.partition(" ")
        if word != "tree" or len(identifier) != 2 * self.identifier_bytes:
            raise DiffInputError(f"{self.shown('')}: is not a valid git commit")
        return identifier

    def output_tree(self, path: str) -> Entries:
        """The entries of the output directory, reached one tree at a time from the top."""
        (entries,) = self.trees([(self.root(), "")])
        walked = ""
        for part in path.split("/") if path else []:
            walked = posixpath.join(walked, part)
            entry = entries.get(part)
            if entry is None or (walked != path and not _is_directory(entry[0])):
                raise DiffInputError(f"{self.shown(path)}: does not exist")
            if not _is_directory(entry[0]):
                raise DiffInputError(f"{self.shown(path)}: is not a directory")
            (entries,) = self.trees([(entry[1], walked)])
        return entries

    def refuse_links(self, entries: Entries, path: str) -> None:
        """Refuse a symbolic link or a submodule among a directory's entries."""
        for name, (mode, _) in sorted(entries.items()):
            if stat.S_ISLNK(mode):
                raise DiffInputError(f"{self.shown(posixpath.join(path, name))}: is a symbolic "
                                     "link, which tfcompile never writes or follows")
            if stat.S_IFMT(mode) == 0o160000:
                raise DiffInputError(f"{self.shown(posixpath.join(path, name))}: is a "
                                     "submodule, which tfcompile never writes")


def _jobs(revision: _Revision, path: str, top: Entries) -> dict[str, Entries]:
    """The job directories of the output tree: name -> their entries."""
    revision.refuse_links({name: entry for name, entry in top.items()
                           if not name.startswith(".")}, path)
    folders = [(name, identifier) for name, (mode, identifier) in sorted(top.items())
               if _is_directory(mode) and not name.startswith(".")]
    trees = revision.trees([(identifier, posixpath.join(path, name))
                            for name, identifier in folders])
    jobs = {}
    for (name, _), entries in zip(folders, trees, strict=True):
        kustomization = entries.get(KUSTOMIZATION)
        if kustomization is None or not _is_file(kustomization[0]):
            continue  # not a job directory
        revision.refuse_links(entries, posixpath.join(path, name))
        jobs[name] = entries
    return jobs


class _Jobs:
    """The job directories of one revision's output tree and the files their kustomizations
    list."""

    def __init__(self, revision: _Revision, path: str, jobs: dict[str, Entries]) -> None:
        self.revision = revision
        self.path = path
        self.jobs = jobs

    def path_of(self, job: str, name: str = "") -> str:
        return posixpath.join(self.path, job, name) if name else posixpath.join(self.path, job)

    def shown(self, job: str, name: str) -> str:
        return self.revision.shown(self.path_of(job, name))

    def blob(self, job: str, name: str) -> str | None:
        """The id of a file of a job directory; None when it is missing or not a file."""
        entry = self.jobs[job].get(name)
        return entry[1] if entry is not None and _is_file(entry[0]) else None

    def listings(self) -> dict[str, Listing]:
        """Each job's kustomization, read."""
        kustomizations = self.revision.read(
            [(self.jobs[job][KUSTOMIZATION][1], self.path_of(job, KUSTOMIZATION))
             for job in self.jobs], "blob")
        return {job: read_listing(data, self.shown(job, KUSTOMIZATION))
                for job, data in zip(self.jobs, kustomizations, strict=True)}

    def files(self, listings: dict[str, Listing]
              ) -> tuple[dict[str, bytes], dict[str, JobBudget]]:
        """The contents of every file a kustomization lists, by id, once their sizes are
        within `bounds`, and each job's budget of values."""
        wanted: dict[str, str] = {}  # id -> the first path it is read for
        for job, listing in listings.items():
            for name in (KUSTOMIZATION, *listing.resources):
                identifier = self.blob(job, name)
                if identifier is not None:
                    wanted.setdefault(identifier, self.path_of(job, name))
        described = describe(self.revision.directory,
                             [(identifier, self.revision.shown(path))
                              for identifier, path in wanted.items()])
        sizes_by_id = {item.identifier: item.size for item in described}
        tree = TreeBudget(self.revision.shown(self.path))
        budgets = {}
        for job, listing in listings.items():
            sizes = {}
            for name in (KUSTOMIZATION, *listing.resources):
                identifier = self.blob(job, name)
                sizes[name] = sizes_by_id[identifier] if identifier is not None else 0
            budgets[job] = tree.add_job(sizes, partial(self.shown, job),
                                        self.revision.shown(self.path_of(job)))
        blobs = [item for item in described if item.kind == "blob"]
        read = contents(self.revision.directory, blobs,
                        [self.revision.shown(wanted[item.identifier]) for item in blobs])
        return {item.identifier: data for item, data in zip(blobs, read, strict=True)}, budgets

    def outputs(self) -> OutputTree:
        """Each job as its kustomization lists it."""
        listings = self.listings()
        files, budgets = self.files(listings)

        def read(job: str, name: str) -> bytes | None:
            identifier = self.blob(job, name)
            return files.get(identifier) if identifier is not None else None

        return {job: job_output(listing, partial(read, job), partial(self.shown, job),
                                budgets[job])
                for job, listing in listings.items()}


def read_revision(base: str, output: Path, directory: Path) -> tuple[str, OutputTree]:
    """The commit BASE names and the jobs of the output tree at it; `directory` is where the
    command runs (a relative `output` is relative to it)."""
    check_base(base)
    commit = _commit(base, directory)
    path = _output_path(output, directory)
    revision = _Revision(directory, commit, base)
    top = revision.output_tree(path)
    return commit, _Jobs(revision, path, _jobs(revision, path, top)).outputs()
