"""Objects of the repository by id: their type and size first, their contents after, a batch
of them per `git cat-file`.

Every object `diff` reads at BASE is first described by `cat-file --batch-check` (type and
size, not contents), so that `bounds` can refuse it before it is read, and then read with
`cat-file --batch` with the others of its step: how many processes start does not grow with
the number of jobs or files, and no object is read that was not asked for by id.

An object git cannot give (left out of a partial clone, which `git_command` never lets git
fetch, or lost from a damaged repository) ends the answer: git answers the objects before it
and stops (`could not fetch … from promisor remote`), or answers `<id> missing`. Either way
the first object not answered is the one missing, and it is reported by the path it was read
for; git answers each object before reading the next (no `--buffer`), so what it printed
before it stopped is complete.

Trees are parsed here (`tree_entries`) rather than listed by `git ls-tree`, so that reading a
directory is one more object of a batch, named by id like the others.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import DiffInputError
from .git_command import run_git


@dataclass(frozen=True)
class GitObject:
    """An object's id (hex), type (`blob`, `tree`, `commit`, `tag`) and size in bytes."""

    identifier: str
    kind: str
    size: int


Entries = dict[str, tuple[int, str]]
"""A directory's entries: name -> (mode, object id)."""


def tree_entries(data: bytes, identifier_bytes: int) -> Entries:
    """The entries of a tree object's contents, `<octal mode> <name>\\0<id>` one after
    another (`identifier_bytes`: 20 for SHA-1, 32 for SHA-256); raises ValueError when it is
    not one."""
    entries: Entries = {}
    position = 0
    while position < len(data):
        space = data.index(b" ", position)
        end = data.index(b"\0", space)
        mode = int(data[position:space].decode("ascii"), 8)
        start = end + 1
        identifier = data[start:start + identifier_bytes]
        if len(identifier) != identifier_bytes:
            raise ValueError("a tree entry without its whole id")
        entries[os.fsdecode(data[space + 1:end])] = (mode, identifier.hex())
        position = start + identifier_bytes
    return entries


def _not_in_clone(shown: str) -> DiffInputError:
    return DiffInputError(f"{shown}: is not in this clone (a partial clone leaves objects out) "
                          "and diff fetches nothing: fetch it with git first, or diff in a "
                          "clone made without --filter")


def _request(identifiers: Sequence[str]) -> bytes:
    return b"".join(identifier.encode("ascii") + b"\n" for identifier in identifiers)


def describe(directory: Path, wanted: Sequence[tuple[str, str]]) -> list[GitObject]:
    """The objects with the ids given, each with how to name it in a message, in order;
    raises `DiffInputError` naming the first one this clone does not hold."""
    if not wanted:
        return []
    process = run_git(["cat-file", "--batch-check"], directory,
                      _request([identifier for identifier, _ in wanted]))
    lines = process.stdout.split(b"\n")[:-1]  # complete lines only
    found = []
    for index, (identifier, shown) in enumerate(wanted):
        if index >= len(lines):
            if process.returncode != 0:
                raise _not_in_clone(shown)
            raise DiffInputError("git cat-file --batch-check answered less than it was asked")
        fields = lines[index].decode("ascii", "replace").split(" ")
        if fields[0] != identifier:
            raise DiffInputError("git cat-file --batch-check answered another object")
        if len(fields) != 3 or not fields[2].isdecimal():
            raise _not_in_clone(shown)
        found.append(GitObject(identifier, fields[1], int(fields[2])))
    return found


def contents(directory: Path, objects: Sequence[GitObject], shown: Sequence[str]
             ) -> list[bytes]:
    """The contents of objects `describe` gave (their sizes checked by the caller), in order;
    `shown[i]` names `objects[i]` in a message."""
    if not objects:
        return []
    process = run_git(["cat-file", "--batch"], directory,
                      _request([item.identifier for item in objects]))
    answer = process.stdout
    position = 0
    read = []
    for item, name in zip(objects, shown, strict=True):
        end = answer.find(b"\n", position)
        header = (f"{item.identifier} {item.kind} {item.size}".encode("ascii")
                  if end >= 0 else None)
        if end < 0 or answer[position:end] != header or len(answer) < end + 2 + item.size:
            raise _not_in_clone(name)
        read.append(answer[end + 1:end + 1 + item.size])
        position = end + 2 + item.size
    return read
