"""How much of an output tree `diff` reads, on either side: what tfcompile writes with room to
spare, and past that one line naming the path and the bound (exit 2), sizes before any file is
read, values as each file is parsed.

BASE is any commit a pull request or a user names, so its files are input like any other; the
working tree is held to the same bounds so that both sides are read by one rule. Only
`kustomization.yaml` and the files it lists are read (a job is what Argo CD and Flux apply);
anything else in a job directory, however large, is never opened.

- `MAXIMUM_FILE_BYTES`, 4 MiB per file (a git tree or commit too: a tree of some 50,000
  entries). The largest file tfcompile writes is a script's ConfigMap, whose script is at most
  900 KiB (`spec.scripts`); a StatefulSet holds at most a 256 KiB spec's pod template and a
  128 KiB `TF_CONFIG`. The API server refuses a request over 3 MiB, so no object in a larger
  file could be applied anyway. Bytes are cheap (4 MiB of text parse in some 0.1 s); what
  costs is values: each file is also held to the 10,000 values of a job spec
  (`spec.yaml_limits`, checked on its tokens before it is parsed), some 0.2 s to parse.
- `MAXIMUM_JOB_FILES`, 64 files listed by one kustomization. tfcompile writes at most 19 (three
  ConfigMaps, the launcher's ServiceAccount, Role and RoleBinding, a claim, a PodGroup, a
  Service and a StatefulSet per role, TensorBoard's Deployment and Service, a NetworkPolicy).
- `MAXIMUM_JOB_BYTES`, 16 MiB for the files of one job, kustomization included: four times the
  largest file, far above a real job (the examples' are 60 to 90 KiB).
- `MAXIMUM_JOB_VALUES`, 64,000 values (keys included) in the files of one job, counted as each
  is parsed: the examples write 600 to 1,900, and a spec at its 10,000 values whose pod
  template is copied into every role's StatefulSet some 50,000. Without it, a job of 64 files
  of 10,000 values took 47 s to diff against itself; at the bound it takes 5 s (both sides, on
  two busy cores), and a job past it is refused in 4.
- `MAXIMUM_TREE_BYTES`, 256 MiB for the listed files of every job of one side: what the
  comparison holds in memory. A sweep of a thousand trials writes some 60 MiB; at the bound a
  diff took 8 s and 650 MB.
- `MAXIMUM_TREE_VALUES`, 1,000,000 values in the files of every job of one side: a thousand
  jobs of the examples' size hold some 700,000; at the bound a diff took 41 s.

The number of jobs has no bound of its own (a sweep writes one per trial); the totals do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .errors import DiffInputError

MAXIMUM_FILE_BYTES = 4 * 1024 * 1024
MAXIMUM_JOB_FILES = 64
MAXIMUM_JOB_BYTES = 16 * 1024 * 1024
MAXIMUM_TREE_BYTES = 256 * 1024 * 1024
MAXIMUM_JOB_VALUES = 64_000
MAXIMUM_TREE_VALUES = 1_000_000


def _size(size: int) -> str:
    if size % (1024 * 1024) == 0:
        return f"{size // (1024 * 1024)} MiB"
    return f"{size:,} bytes"


def check_file(size: int, shown: str) -> None:
    """Refuse a file (or git tree) larger than `MAXIMUM_FILE_BYTES`."""
    if size > MAXIMUM_FILE_BYTES:
        raise DiffInputError(f"{shown}: is larger than {_size(MAXIMUM_FILE_BYTES)} ({size:,} "
                             "bytes), the most diff reads of one file; tfcompile writes none "
                             "so large")


def check_git_object(size: int, kind: str, shown: str) -> None:
    """Refuse a git tree or commit larger than `MAXIMUM_FILE_BYTES`."""
    if size > MAXIMUM_FILE_BYTES:
        raise DiffInputError(f"{shown}: its git {kind} is {size:,} bytes, more than the "
                             f"{_size(MAXIMUM_FILE_BYTES)} diff reads of one; tfcompile writes "
                             "none so large")


def check_listing(count: int, shown_kustomization: str) -> None:
    """Refuse a kustomization that lists more than `MAXIMUM_JOB_FILES` files."""
    if count > MAXIMUM_JOB_FILES:
        raise DiffInputError(f"{shown_kustomization}: lists {count:,} files, more than the "
                             f"{MAXIMUM_JOB_FILES} diff reads of one job; tfcompile writes "
                             "some twenty at most")


class JobBudget:
    """The values of one job's files read so far (`trees` counts them once parsed)."""

    def __init__(self, tree: TreeBudget, shown_job: str) -> None:
        self.tree = tree
        self.shown_job = shown_job
        self.values = 0

    def add_values(self, count: int) -> None:
        """Take a file's values into the job's and the tree's, or refuse past a bound."""
        self.values += count
        if self.values > MAXIMUM_JOB_VALUES:
            raise DiffInputError(f"{self.shown_job}: its files hold more than "
                                 f"{MAXIMUM_JOB_VALUES:,} values (keys included), the most diff "
                                 "reads of one job; tfcompile writes some 2,000")
        self.tree.values += count
        if self.tree.values > MAXIMUM_TREE_VALUES:
            raise DiffInputError(f"{self.tree.shown_tree}: the jobs' files hold more than "
                                 f"{MAXIMUM_TREE_VALUES:,} values (keys included), the most "
                                 "diff reads of one output tree")


class TreeBudget:
    """The bytes and values of one side's output tree read so far, job by job."""

    def __init__(self, shown_tree: str) -> None:
        self.shown_tree = shown_tree
        self.total = 0
        self.values = 0

    def add_job(self, sizes: Mapping[str, int], shown: Callable[[str], str],
                shown_job: str) -> JobBudget:
        """Take a job's files (name -> size, kustomization included) into the budget, or
        refuse the first that breaks a bound: a file, the job, the tree. Returns the budget of
        the job's values, which its files are read against."""
        for name, size in sizes.items():
            check_file(size, shown(name))
        job_total = sum(sizes.values())
        if job_total > MAXIMUM_JOB_BYTES:
            raise DiffInputError(f"{shown_job}: its kustomization and the files it lists are "
                                 f"{job_total:,} bytes, more than the "
                                 f"{_size(MAXIMUM_JOB_BYTES)} diff reads of one job")
        self.total += job_total
        if self.total > MAXIMUM_TREE_BYTES:
            raise DiffInputError(f"{self.shown_tree}: the jobs' kustomizations and the files "
                                 f"they list are more than the {_size(MAXIMUM_TREE_BYTES)} "
                                 "diff reads of one output tree")
        return JobBudget(self, shown_job)
