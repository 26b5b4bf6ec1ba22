"""`output/` in the working tree, read as `build` reads it: no link followed, anywhere.

The output directory is reached one component at a time without following a link
(`output.location`), and each job directory and file is opened relative to it with O_NOFOLLOW,
so a link planted in the tree is refused, naming it, as it is at BASE. A missing output
directory is refused too: a typo in `-o` must not read as every job deleted.

Each file's size is taken (lstat) before it is read, and the sizes of a job's listed files are
held to `bounds` before any of them is read (a file that grows in between is refused once
read).
"""

from __future__ import annotations

import stat
from pathlib import Path

from tfcompile.compiler.output.directory_handles import Directory
from tfcompile.compiler.output.errors import OutputRefused
from tfcompile.compiler.output.location import resolve
from tfcompile.compiler.printable import printable

from .bounds import TreeBudget, check_file
from .trees import (
    KUSTOMIZATION,
    DiffInputError,
    JobOutput,
    OutputTree,
    job_output,
    read_listing,
)


def _read_job(job: Directory, shown_job: Path, budget: TreeBudget) -> JobOutput:
    def shown(name: str) -> str:
        return printable(str(shown_job / name))

    def size(name: str) -> int | None:
        """A regular file's size; None when it is missing or not a file."""
        status = job.status(name)
        if status is not None and stat.S_ISLNK(status.st_mode):
            raise DiffInputError(f"{shown(name)}: is a symbolic link, which tfcompile never "
                                 "writes or follows")
        return status.st_size if status is not None and stat.S_ISREG(status.st_mode) else None

    def read(name: str) -> bytes | None:
        text = job.read(name)
        return text.encode("utf-8") if text is not None else None

    kustomization_size = size(KUSTOMIZATION)
    if kustomization_size is not None:
        check_file(kustomization_size, shown(KUSTOMIZATION))
    listing = read_listing(read(KUSTOMIZATION), shown(KUSTOMIZATION))
    sizes = {KUSTOMIZATION: kustomization_size or 0}
    for resource in listing.resources:
        sizes[resource] = size(resource) or 0
    return job_output(listing, read, shown, budget.add_job(sizes, shown, printable(str(shown_job))))


def read_working_tree(output: Path) -> OutputTree:
    """The jobs of the output directory `output` as it is on disk."""
    try:
        location = resolve(output, create=False)
        try:
            directory = location.open_output()
            if directory is None:
                raise DiffInputError(f"{printable(str(output))}: does not exist in the working "
                                     "tree")
            jobs: dict[str, JobOutput] = {}
            budget = TreeBudget(printable(str(output)))
            with directory:
                for name, status in sorted(directory.entries().items()):
                    if name.startswith("."):
                        continue  # a killed build's leftovers, never a job
                    if stat.S_ISLNK(status.st_mode):
                        raise DiffInputError(f"{printable(str(output / name))}: is a symbolic "
                                             "link, which tfcompile never writes or follows")
                    if not stat.S_ISDIR(status.st_mode):
                        continue
                    job = directory.open(name)
                    if job is None:
                        continue
                    with job:
                        if job.status(KUSTOMIZATION) is None:
                            continue  # not a job directory
                        jobs[name] = _read_job(job, output / name, budget)
            return jobs
        finally:
            location.close()
    except OutputRefused as refusal:
        raise DiffInputError(printable("; ".join(refusal.reasons))) from None
