"""The converted job's text, and the one file `convert -o DIR` writes.

The text is the one YAML writer's (`yaml_output.dump`) under a header of comment lines: where
the job came from (the TFJob file's name, not its path, so the bytes do not depend on where
convert ran) and every note, by the TFJob field and line it concerns. The same TFJob gives the
same bytes.

`DIR/job.yaml` is created, never replaced: an existing file (or link) of that name is refused,
and neither `DIR` nor the file is reached through a symbolic link (`O_NOFOLLOW` on each).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfcompile.compiler.yaml_output import dump
from tfcompile.spec.problems import LocatedProblem, format_path

JOB_FILE = "job.yaml"


class ConversionRefused(Exception):
    """`-o DIR` cannot be written as asked; the message says why and what to do."""


def job_text(job: dict[str, Any], source_name: str, notes: Sequence[LocatedProblem]) -> str:
    header = [f"Converted by `tfcompile convert` from the Kubeflow TFJob {source_name}."]
    if notes:
        header.append("What had no equivalent, by TFJob field:")
        header.extend(f"- {format_path(note.path)} (line {note.location.line}): {note.message}"
                      for note in notes)
    return dump(job, header=header)


def write_job(directory: Path, text: str) -> Path:
    """Create `directory/job.yaml` (and `directory`, when missing) with `text`."""
    target = directory / JOB_FILE
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConversionRefused(f"{directory}: not a directory") from None
    if directory.is_symlink():
        raise ConversionRefused(f"{directory} is a symbolic link; convert writes through none: "
                                "give the directory it points to")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    folder = os.open(directory, flags)
    try:
        try:
            descriptor = os.open(JOB_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=folder)
        except FileExistsError:
            raise ConversionRefused(f"{target} exists; convert replaces no file: move it or "
                                    "give another directory") from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ConversionRefused(f"{target} is a symbolic link; convert writes through "
                                        "none") from None
            raise
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    finally:
        os.close(folder)
    return target
