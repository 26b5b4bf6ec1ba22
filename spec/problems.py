"""Problems found in a job spec, and where in the file they are.

Every user mistake becomes a `Problem` (a field path and a message) instead of an exception, so
that all problems of a file can be reported at once, each pointing at `file:line:col`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FieldPath = tuple[str | int, ...]


def format_path(path: FieldPath) -> str:
    """`("spec", "args", 0)` -> `spec.args[0]`; the empty path is the document itself."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "(document)"


@dataclass(frozen=True)
class Location:
    """A position in a source file; `line` and `column` count from 1."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: the field it concerns and what is wrong and allowed."""

    path: FieldPath
    message: str
    key: bool = False
    """Whether the problem is the key itself (a name), so the location is the key's."""


@dataclass(frozen=True)
class LocatedProblem:
    """A problem with the place in the file it was found."""

    location: Location
    path: FieldPath
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {format_path(self.path)}: {self.message}"


class SpecError(Exception):
    """A spec has problems; raised only after all of them were collected."""

    def __init__(self, problems: Sequence[LocatedProblem]) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = list(problems)
