"""What a local run prints: pod output prefixed by pod name, and the run's own notices.

Each container's standard output and error arrive on one pipe; a thread per container start reads
it line by line, prints `pod-name | line` as it arrives (padded so the bars line up) and keeps the
last lines for the failure report. Notices of the run itself start with `run-local:`.

Every line is printed escaped (`printable`): what a pod writes, and what the API server answers
the local node, must not reach the terminal as control characters. A notice is one line; a line
feed inside one is escaped too, so no text can pass for a line of its own.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import IO, TextIO

from ..printable import printable

_READ_LIMIT = 65536


class Console:
    """Serializes lines from many threads onto one stream."""

    def __init__(self, stream: TextIO, prefix_width: int = 0) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.prefix_width = prefix_width
        self._broken = False

    def _write(self, text: str) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError):
                self._broken = True

    def pod_line(self, prefix: str, line: str) -> None:
        self._write(f"{printable(prefix):<{self.prefix_width}} | {printable(line)}\n")

    def notice(self, message: str) -> None:
        self._write(f"run-local: {printable(message)}\n")

    def plain(self, line: str) -> None:
        self._write(f"{printable(line)}\n")


def start_reader(pipe: IO[bytes], prefix: str, console: Console,
                 tail: deque[str]) -> threading.Thread:
    """Stream `pipe` to the console until it closes, keeping its last lines in `tail`."""

    def read() -> None:
        with pipe:
            while True:
                raw = pipe.readline(_READ_LIMIT)
                if not raw:
                    return
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                tail.append(line)
                console.pod_line(prefix, line)

    thread = threading.Thread(target=read, name=f"output of {prefix}", daemon=True)
    thread.start()
    return thread
