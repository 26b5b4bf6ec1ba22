"""Reads the secrets file that supplies Secret values to a local run.

Manifests only reference Secrets (their values never appear in a job or its output), so a local run
needs the values from somewhere else: a file with one `secret-name/key=value` line per key. Blank
lines and lines starting with `#` are skipped; the value is everything after the first `=`, kept as
written (it may be empty or contain `=`). Errors are reported as `file:line: message` and never
repeat what was written on the line, in case a value landed in the wrong place.
"""

from __future__ import annotations

import re
from pathlib import Path

_SECRET_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_MAXIMUM_NAME = 253
LINE_FORMAT = "secret-name/key=value"


class SecretsFileError(ValueError):
    """Every problem found in a secrets file, each as `file:line: message`."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _name_problem(name: str) -> str | None:
    if not name:
        return f"the Secret name is empty; expected `{LINE_FORMAT}`"
    if len(name) > _MAXIMUM_NAME or not _SECRET_NAME.fullmatch(name):
        return ("the Secret name (before `/`) is not valid: use lowercase letters, digits, '-' "
                f"and '.', at most {_MAXIMUM_NAME} characters")
    return None


def _key_problem(key: str) -> str | None:
    if not key:
        return f"the key is empty; expected `{LINE_FORMAT}`"
    if len(key) > _MAXIMUM_NAME or not _SECRET_KEY.fullmatch(key) or key in {".", ".."}:
        return ("the key (between `/` and `=`) is not valid: use letters, digits, '-', '_' "
                f"and '.', at most {_MAXIMUM_NAME} characters")
    return None


def parse_secrets_text(text: str, source: str) -> dict[tuple[str, str], str]:
    """Parse the contents of a secrets file; `source` names it in error messages."""
    values: dict[tuple[str, str], str] = {}
    first_line: dict[tuple[str, str], int] = {}
    problems: list[str] = []
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.lstrip()
        if not line or line.startswith("#"):
            continue
        reference, separator, value = line.partition("=")
        if not separator:
            problems.append(f"{source}:{number}: expected `{LINE_FORMAT}` (no `=` on this line)")
            continue
        name, slash, key = reference.strip().partition("/")
        if not slash:
            problems.append(f"{source}:{number}: expected `{LINE_FORMAT}` (no `/` before `=`)")
            continue
        line_problems = [p for p in (_name_problem(name), _key_problem(key)) if p is not None]
        if line_problems:
            problems += [f"{source}:{number}: {problem}" for problem in line_problems]
            continue
        if (name, key) in first_line:
            problems.append(f"{source}:{number}: {name}/{key} is already given on line "
                            f"{first_line[(name, key)]}")
            continue
        first_line[(name, key)] = number
        values[(name, key)] = value
    if problems:
        raise SecretsFileError(problems)
    return values


def parse_secrets_file(path: Path) -> dict[tuple[str, str], str]:
    """Read a secrets file into {(secret name, key): value}; raises SecretsFileError."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SecretsFileError([f"{path}: is not UTF-8 text"]) from None
    except OSError as error:
        raise SecretsFileError([f"{path}: cannot be read: {error.strerror}"]) from None
    return parse_secrets_text(text, str(path))
