"""Which files hold job specs: a cheap look at the text, before anything is parsed.

Apart from `loading.py`, so that a build whose output is already current can find the job
files without loading the YAML parser or the spec models.

A directory is searched for every YAML file that looks like it was meant to be a job spec, not
only for the ones that are: a job file with a typo in its `kind`, or its kind quoted or followed
by a comment, must fail the build (it is loaded, and refused with its error), never be passed
over as if it were gone, which would prune its job. So a file is taken when a line of its first
64 KiB (comment lines aside) says
- `apiVersion:` with tfcompile's API group (`tfcompile.dev/…`, or any group naming tfcompile), or
- `kind: TrainingJob`, quoted or not, with a comment or a tag after it or not, or
- a `kind:` close to it (one holding both "train" and "job" in any case and spelling, such as
  `TrainJob` or `training-job`, or within two letters of `TrainingJob`), in a file with no
  `apiVersion:` of another API group (a Kubeflow `TrainJob` manifest is not taken).
The build adds the files the output tree names as the sources of its jobs (`also`). The look at
the text (`looks_like_job_text`) and the `KIND` it looks for are in `job_text.py`, which reads no
file: the spec's models take `KIND` from it, and the compiler proper imports the models.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from .job_text import looks_like_job_text

YAML_SUFFIXES = (".yaml", ".yml")
HEAD_BYTES = 65536


def is_job_file(path: Path) -> bool:
    """Whether a YAML file looks like a job spec (a cheap look at its start, without
    parsing): the build then loads it, and a file that does not load fails the build."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(descriptor, "rb") as handle:
            head = handle.read(HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return False
    return looks_like_job_text(head)


def discover(paths: Iterable[Path], also: Iterable[Path] = ()) -> Iterator[Path]:
    """Job files among `paths`: files as given, directories searched for files that look like
    job specs (`is_job_file`); then each file of `also` (specs the output tree names as its
    jobs' sources) not found already. Paths that do not exist are left to the caller to
    report."""
    found: set[str] = set()
    for path in paths:
        if path.is_dir():
            for root, directories, files in os.walk(path):
                directories[:] = sorted(d for d in directories if not d.startswith("."))
                for name in sorted(files):
                    candidate = Path(root) / name
                    if name.endswith(YAML_SUFFIXES) and is_job_file(candidate):
                        found.add(os.path.realpath(candidate))
                        yield candidate
        elif path.exists():
            found.add(os.path.realpath(path))
            yield path
    for path in also:
        real = os.path.realpath(path)
        if real not in found and os.path.isfile(path):
            found.add(real)
            yield path
