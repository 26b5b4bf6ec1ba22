"""Problems found in a job spec, and where in the file they are.

Every user mistake becomes a `Problem` (a field path and a message) instead of an exception, so
that all problems of a file can be reported at once, each pointing at `file:line:col`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FieldPath = tuple[str | int, ...]

MAXIMUM_SHOWN_KEY = 80
"""A key longer than this is shortened in messages: a message is one readable line."""


def escape_text(text: str, limit: int | None = MAXIMUM_SHOWN_KEY) -> str:
    """`text` safe to print on a terminal: every character that is not printable (newlines,
    escape sequences, bidirectional overrides, lone surrogates) as a `\\x..`/`\\u....` escape,
    a backslash doubled, and at most `limit` characters."""
    shown = text if limit is None or len(text) <= limit else text[: limit - 1] + "…"
    escaped = []
    for character in shown:
        if character == "\\":
            escaped.append("\\\\")
        elif character == " " or character.isprintable():
            escaped.append(character)
        else:
            escaped.append(repr(character)[1:-1] if ord(character) < 0x100 else
                           f"\\u{ord(character):04x}" if ord(character) <= 0xFFFF else
                           f"\\U{ord(character):08x}")
    return "".join(escaped)


def format_path(path: FieldPath) -> str:
    """`("spec", "args", 0)` -> `spec.args[0]`; the empty path is the document itself. Keys come
    from the input, so they are printed escaped (`escape_text`)."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            shown = escape_text(part)
            text += f".{shown}" if text else shown
    return text or "(document)"


@dataclass(frozen=True)
class Location:
    """A position in a source file; `line` and `column` count from 1."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{escape_text(self.file, limit=None)}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: the field it concerns and what is wrong and allowed."""

    path: FieldPath
    message: str
    key: bool = False
    """Whether the problem is the key itself (a name), so the location is the key's."""
    hidden_key: bool = False
    """Whether the key itself is a credential: it is then never printed, in this problem or in
    any other under it (`hide_keys`)."""


def hide_keys(path: FieldPath, hidden: set[FieldPath]) -> FieldPath:
    """`path` as it may be printed: a key that is a credential replaced by `(hidden key)`."""
    return tuple("(hidden key)" if path[: index + 1] in hidden else part
                 for index, part in enumerate(path))


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


class UnreadableInput(OSError):
    """A job file or script exists but cannot be read (permissions, I/O): a problem of the
    environment, not of the spec, so it is not a `SpecError`. Prints as `what: path: reason`."""

    def __init__(self, what: str, path: str, error: OSError) -> None:
        super().__init__(error.errno, error.strerror or str(error), path)
        self.what = what

    def __str__(self) -> str:
        return f"{self.what}: {self.filename}: {self.strerror}"
