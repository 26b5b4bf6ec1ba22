"""Kustomize's library in one long-running process: many renderings for one start-up.

A `kustomize build` of a job with components spends most of its time starting: parsing
Kubernetes' OpenAPI schema for strategic merges, every run again. `tfcompile-kustomize`
(scripts/kustomize/render, built from the same Kustomize module as the kustomize binary) renders
with Kustomize's own library, krusty, which `kustomize build` runs and Flux's
kustomize-controller embeds, and keeps the parsed schema between requests. When it is on PATH,
`render` sends it each directory and reads back exactly what `kustomize build` prints, or its
error message. One process serves each Python process (a forked worker starts its own), one
request at a time.

Protocol: per request a JSON line, the directory and the working directory to name it from
(each rendering is made as `kustomize build` started there: paths in it and in its messages
read alike); per answer a JSON line
`{"ok": bool, "size": N}` and N bytes, the rendering or the error. A server that stops, answers
out of protocol or runs past the time limit is stopped, and the caller renders that directory
with the kustomize command instead. When a process ends, its server is told so (its input ends)
and waited for: no server outlives the process that started it, and its CPU time is counted in
that process's children's, as a `kustomize build` run's is.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing.util
import os
import select
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SERVER_NAME = "tfcompile-kustomize"
_HEADER_BYTES = 256
_FINISH_SECONDS = 10


class ServerStopped(Exception):
    """The server stopped, broke its protocol or ran out of time; render without it."""


@dataclass(frozen=True)
class Answer:
    ok: bool
    text: str


def find_server() -> str | None:
    """Where `tfcompile-kustomize` is on PATH, or None."""
    return shutil.which(SERVER_NAME)


class _Server:
    def __init__(self, program: str) -> None:
        self.process = subprocess.Popen(
            [program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL)
        self.pending = b""

    def ask(self, directory: Path, timeout_seconds: float) -> Answer:
        assert self.process.stdin is not None
        try:
            request = {"directory": str(directory), "workingDirectory": os.getcwd()}
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            raise ServerStopped from None
        deadline = time.monotonic() + timeout_seconds
        header_line = self._read_line(deadline)
        try:
            header = json.loads(header_line)
            ok, size = header["ok"], header["size"]
        except (ValueError, KeyError, TypeError):
            raise ServerStopped from None
        if not isinstance(ok, bool) or not isinstance(size, int) or size < 0:
            raise ServerStopped
        body = self._read_exactly(size, deadline)
        try:
            return Answer(ok, body.decode("utf-8"))
        except UnicodeDecodeError:
            raise ServerStopped from None

    def _read_line(self, deadline: float) -> bytes:
        while b"\n" not in self.pending:
            if len(self.pending) > _HEADER_BYTES:
                raise ServerStopped
            self._read_more(deadline)
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def _read_exactly(self, size: int, deadline: float) -> bytes:
        chunks = [self.pending]
        held = len(self.pending)
        while held < size:
            chunk = self._read_chunk(deadline, size - held)
            chunks.append(chunk)
            held += len(chunk)
        data = b"".join(chunks)
        self.pending = data[size:]
        return data[:size]

    def _read_more(self, deadline: float) -> None:
        self.pending += self._read_chunk(deadline, 65536)

    def _read_chunk(self, deadline: float, wanted: int) -> bytes:
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([descriptor], [], [], left)[0]:
            raise ServerStopped
        chunk = os.read(descriptor, max(1, min(wanted, 1 << 20)))
        if not chunk:
            raise ServerStopped
        return chunk

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        self._close_streams()

    def finish(self) -> None:
        """End the server's input, so it ends, and wait for it (killed if it does not)."""
        self._close_streams()
        try:
            self.process.wait(timeout=_FINISH_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _close_streams(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a write the server did not read
                    stream.close()


_servers: dict[tuple[int, str], _Server] = {}
_given_up: set[tuple[int, str]] = set()
_lock = threading.Lock()


def render_with_server(program: str, directory: Path, timeout_seconds: float) -> Answer | None:
    """The server's answer for `directory`; None when the server cannot give one (it could not
    start, stopped or ran out of time: it is not asked again by this process)."""
    key = (os.getpid(), program)
    with _lock:
        if key in _given_up:
            return None
        server = _servers.get(key)
        try:
            if server is None:
                server = _servers[key] = _Server(program)
                _finish_at_exit(key)
            return server.ask(directory, timeout_seconds)
        except (OSError, ServerStopped):
            _given_up.add(key)
            stopped = _servers.pop(key, None)
            if stopped is not None:
                stopped.stop()
            return None


def _finish_at_exit(key: tuple[int, str]) -> None:
    """Finish the server of `key` when this process ends. A multiprocessing finalizer runs at
    the end of the main process (as `atexit` does) and also at the end of a forked worker, where
    `atexit` does not; a worker starts with its parent's finalizers cleared."""
    multiprocessing.util.Finalize(None, _finish, args=(key,), exitpriority=0)


def _finish(key: tuple[int, str]) -> None:
    with _lock:
        server = _servers.pop(key, None)
    # A process forked other than by multiprocessing keeps its parent's finalizers: the
    # parent's server is not its to end.
    if server is not None and key[0] == os.getpid():
        server.finish()
