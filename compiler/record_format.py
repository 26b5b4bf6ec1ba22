"""What an up-to-date record must be for a build to read it at all.

The record lives in the user's cache directory, which CI systems restore from other branches: it
is input from anyone, like a spec. It is read only as a regular file (not a link, a FIFO or a
device) of at most `MAXIMUM_RECORD_BYTES`, UTF-8 JSON of exactly the shape `build_record` writes:
every field of its type, job names that are job names, file names that are plain names inside
a job directory, digests that are SHA-256 digests, each job of a recorded spec, nothing else.
Anything else is `RecordIgnored` with a reason (the build prints it as one note and goes on
without the record); a record of another format (another tfcompile) is passed over silently.
Nothing here echoes what the record holds.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .generated_mark import KUSTOMIZATION_FILE

RECORD_FORMAT = 1
MAXIMUM_RECORD_BYTES = 64 * 1024 * 1024

_DIGEST = re.compile(r"[0-9a-f]{64}")
_JOB_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_OVERLAY_NAME = re.compile(r"[a-z0-9]([-a-z0-9_]{0,61}[a-z0-9])?")
_FILE_NAME = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]{0,252}")


class RecordIgnored(Exception):
    """The record is not one tfcompile reads; the reason, in words that quote nothing of it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_record_file(path: Path) -> bytes | None:
    """The bytes of the record at `path`; None when there is none."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RecordIgnored("it is a symbolic link") from None
        raise RecordIgnored(f"it cannot be read ({error.strerror})") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):  # checked first: Python refuses to open a folder
            raise RecordIgnored("it is not a regular file")
        if status.st_size > MAXIMUM_RECORD_BYTES:
            raise RecordIgnored(f"it is larger than {MAXIMUM_RECORD_BYTES >> 20} MiB")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(MAXIMUM_RECORD_BYTES + 1)
    except OSError as error:
        raise RecordIgnored(f"it cannot be read ({error.strerror})") from None
    finally:
        os.close(descriptor)
    if len(data) > MAXIMUM_RECORD_BYTES:
        raise RecordIgnored(f"it is larger than {MAXIMUM_RECORD_BYTES >> 20} MiB")
    return data


def parse_record(data: bytes) -> dict[str, Any] | None:
    """The record in `data`, checked; None when it is of another format."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordIgnored("it is not UTF-8") from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise RecordIgnored("it is nested too deeply") from None
    except ValueError:
        raise RecordIgnored("it is not JSON") from None
    if not isinstance(value, dict):
        raise RecordIgnored("it is not a record tfcompile writes (not an object)")
    if _integer(value.get("format")) and value["format"] != RECORD_FORMAT:
        return None
    problem = _record_problem(value)
    if problem is not None:
        raise RecordIgnored(f"it is not a record tfcompile writes ({problem})")
    return value


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object) -> bool:
    return isinstance(value, str) and "\0" not in value


def _matching(pattern: re.Pattern[str]) -> Callable[[object], bool]:
    return lambda value: isinstance(value, str) and pattern.fullmatch(value) is not None


def _list_of(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _files(value: object) -> bool:
    return (isinstance(value, dict) and KUSTOMIZATION_FILE in value
            and all(_FILE_NAME.fullmatch(name) and _DIGEST.fullmatch(digest)
                    if isinstance(digest, str) else False for name, digest in value.items()))


def _arguments(value: object) -> bool:
    return (isinstance(value, list) and len(value) == 4 and _text(value[0])
            and _list_of(_text)(value[1]) and _text(value[2]) and _text(value[3]))


Field = tuple[Callable[[object], bool], str]
"""A field's check, and what it must be, in words."""

_RECORD: dict[str, Field] = {
    "format": (_integer, "an integer"),
    "arguments": (_arguments, "the working directory, inputs, output and overlays of a build"),
    "environment": (_matching(_DIGEST), "a SHA-256 digest"),
    "output": (_text, "a path"),
    "overlays": (_text, "a path"),
    "specs": (lambda value: isinstance(value, list), "a list"),
    "jobs": (lambda value: isinstance(value, list), "a list"),
}
_SPEC: dict[str, Field] = {
    "path": (_text, "a path"),
    "resolved": (_text, "a path"),
    "digest": (_matching(_DIGEST), "a SHA-256 digest"),
    "jobs": (_list_of(_matching(_JOB_NAME)), "a list of job names"),
}
_JOB: dict[str, Field] = {
    "name": (_matching(_JOB_NAME), "a job name"),
    "source": (_text, "a path"),
    "script": (_optional(_text), "a path or null"),
    "scriptDigest": (_optional(_matching(_DIGEST)), "a SHA-256 digest or null"),
    "overlays": (_list_of(_matching(_OVERLAY_NAME)), "a list of overlay names"),
    "files": (_files, "file names of a job directory mapped to SHA-256 digests, "
                      "kustomization.yaml among them"),
}


def _fields_problem(value: object, fields: dict[str, Field], where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where or 'the record'}: not an object"
    if set(value) != set(fields):
        return f"{where or 'the record'}: not the fields tfcompile writes"
    for name, (check, meaning) in fields.items():
        if not check(value[name]):
            return f"{where}{'.' if where else ''}{name}: not {meaning}"
    return None


def _record_problem(record: dict[str, Any]) -> str | None:
    """What keeps `record` from being one `build_record` wrote, or None."""
    problem = _fields_problem(record, _RECORD, "")
    for index, spec in enumerate(record.get("specs", []) if problem is None else []):
        problem = problem or _fields_problem(spec, _SPEC, f"specs[{index}]")
    for index, job in enumerate(record.get("jobs", []) if problem is None else []):
        problem = problem or _fields_problem(job, _JOB, f"jobs[{index}]")
    if problem is not None:
        return problem
    paths = [spec["path"] for spec in record["specs"]]
    names = [job["name"] for job in record["jobs"]]
    if len(set(paths)) != len(paths) or len(set(names)) != len(names):
        return "a spec or a job recorded twice"
    for spec in record["specs"]:
        sourced = sorted(job["name"] for job in record["jobs"] if job["source"] == spec["path"])
        if sorted(spec["jobs"]) != sourced:
            return "a spec's jobs are not the jobs recorded from it"
    if any(job["source"] not in paths for job in record["jobs"]):
        return "a job recorded from no recorded spec"
    return None
