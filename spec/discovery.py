"""Which files hold job specs: a cheap look at the text, before anything is parsed.

Apart from `loading.py`, so that a build whose output is already current can find the job
files without loading the YAML parser or the spec models.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

KIND = "TrainingJob"
YAML_SUFFIXES = (".yaml", ".yml")


def is_job_file(path: Path) -> bool:
    """Whether a YAML file holds a TrainingJob (a cheap look, without parsing)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(descriptor, "rb") as handle:
            head = handle.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return False
    return any(
        line.split(":", 1)[0].strip() == "kind" and line.split(":", 1)[1].strip() == KIND
        for line in head.splitlines()
        if ":" in line
    )


def discover(paths: Iterable[Path]) -> Iterator[Path]:
    """Job files among `paths`: files as given, directories searched for `kind: TrainingJob`;
    paths that do not exist are left to the caller to report."""
    for path in paths:
        if path.is_dir():
            for root, directories, files in os.walk(path):
                directories[:] = sorted(d for d in directories if not d.startswith("."))
                for name in sorted(files):
                    candidate = Path(root) / name
                    if name.endswith(YAML_SUFFIXES) and is_job_file(candidate):
                        yield candidate
        elif path.exists():
            yield path
