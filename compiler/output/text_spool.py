"""Compiled text kept in a temporary file until it is written, so that memory does not grow with
the number of jobs.

A build compiles every job before it writes any (all problems are reported first, then the tree
is swapped job by job), and a job's files are tens of kilobytes of text: held in memory, a
400-job build needed tens of megabytes more than a one-job build. Each job's texts go into one
unnamed temporary file instead (readable by its owner only, removed by the kernel when the
build ends) and are read back, one at a time, when they are compared, hashed and written;
memory keeps a name, an offset and a length per file. Where no temporary file can be made (or
the system has no positioned reads and writes), the texts stay in memory, as before.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from typing import IO

_POSITIONED = hasattr(os, "pread") and hasattr(os, "pwrite")


class TextSpool:
    """One temporary file that texts are appended to; `keep` gives them back as a mapping."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._end = 0

    def keep(self, texts: Mapping[str, str]) -> Mapping[str, str]:
        """`texts` (name -> text), read back from the spool on demand; in memory when the
        spool cannot be written."""
        if not _POSITIONED:
            return dict(texts)
        encoded = [(name, text.encode("utf-8")) for name, text in texts.items()]
        places: dict[str, tuple[int, int]] = {}
        offset = self._end
        for name, data in encoded:
            places[name] = (offset, len(data))
            offset += len(data)
        try:
            if self._file is None:
                # Open for the spool's life, closed with it (the file has no name to leak).
                self._file = tempfile.TemporaryFile()  # noqa: SIM115
            _write_all(self._file.fileno(), b"".join(data for _, data in encoded), self._end)
        except OSError:
            return dict(texts)
        self._end = offset
        return SpooledTexts(self, places)

    def read(self, offset: int, length: int) -> str:
        assert self._file is not None
        data = os.pread(self._file.fileno(), length, offset)
        while len(data) < length:  # a short read: ask for the rest
            more = os.pread(self._file.fileno(), length - len(data), offset + len(data))
            if not more:
                raise OSError(f"the compiled text spool ended {length - len(data)} bytes early")
            data += more
        return data.decode("utf-8")


def _write_all(descriptor: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(descriptor, view, offset)
        view = view[written:]
        offset += written


class SpooledTexts(Mapping[str, str]):
    """Name -> text, each text read from the spool when it is asked for (not cached)."""

    def __init__(self, spool: TextSpool, places: dict[str, tuple[int, int]]) -> None:
        self._spool = spool
        self._places = places

    def __getitem__(self, name: str) -> str:
        offset, length = self._places[name]
        return self._spool.read(offset, length)

    def __contains__(self, name: object) -> bool:
        return name in self._places

    def __iter__(self) -> Iterator[str]:
        return iter(self._places)

    def __len__(self) -> int:
        return len(self._places)


__all__ = ["SpooledTexts", "TextSpool"]
