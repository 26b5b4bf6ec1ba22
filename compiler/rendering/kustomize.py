"""Run Kustomize on a directory and return exactly what a GitOps controller would apply.

Argo CD and Flux build `output/<job>/` with Kustomize before they apply it, so every check of the
compiled output has to look at Kustomize's result, overlays and user patches included. This module
is the one place that finds a Kustomize binary and runs it, after refusing kustomizations that
would make it fetch anything over the network (unless the caller allows it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..printable import printable
from .remote_resources import KUSTOMIZATION_FILE_NAMES, RemoteEntry, remote_entries
from .render_server import find_server, render_with_server

RENDER_TIMEOUT_SECONDS = 120

# kubectl reports a failure through klog: `E1126 … run.go:72] "command failed" err="…"`.
_KLOG_FAILURE = re.compile(r'"command failed" err=(?P<quoted>".*")\s*$')


class RenderingError(Exception):
    """A user-facing failure to turn a directory into Kubernetes objects; print its message."""


class RenderError(RenderingError):
    """Kustomize could not render a directory; the message is Kustomize's own, without noise."""


class RemoteResourceError(RenderError):
    """The kustomization names remote resources and remote fetching was not allowed."""

    def __init__(self, entries: list[RemoteEntry]) -> None:
        self.entries = entries
        super().__init__("\n".join(entry.explain() for entry in entries))


@dataclass(frozen=True)
class Renderer:
    """A Kustomize command line: `kustomize build` or `kubectl kustomize`; or, `server`,
    `tfcompile-kustomize`, which takes directories on its input (`render_server`)."""

    command: tuple[str, ...]
    server: bool = False

    @property
    def description(self) -> str:
        return " ".join([Path(self.command[0]).name, *self.command[1:]])


def find_renderer() -> Renderer:
    """`tfcompile-kustomize` if it is on PATH, else the standalone `kustomize`, else
    `kubectl kustomize`."""
    server = find_server()
    if server is not None:
        return Renderer(command=(server,), server=True)
    return find_command_renderer()


def find_command_renderer() -> Renderer:
    """The standalone `kustomize` on PATH if there is one, else `kubectl kustomize`."""
    kustomize = shutil.which("kustomize")
    if kustomize is not None:
        return Renderer(command=(kustomize, "build"))
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        return Renderer(command=(kubectl, "kustomize"))
    raise RenderError(
        "neither `kustomize` nor `kubectl` is on PATH: install one of them "
        "(https://kubectl.docs.kubernetes.io/installation/kustomize/) to render the output"
    )


def render(
    directory: Path, renderer: Renderer | None = None, *, allow_remote: bool = False
) -> str:
    """Render the kustomization in `directory` and return the multi-document YAML text.

    Raises `RenderError` with Kustomize's message when the directory is missing, is not a
    kustomization, or Kustomize refuses it; `RemoteResourceError`, before Kustomize runs, when
    a kustomization reachable from `directory` names a URL or git repository and `allow_remote`
    is false.
    """
    if not directory.is_dir():
        raise RenderError(f"{directory}: not a directory")
    if not any((directory / name).is_file() for name in KUSTOMIZATION_FILE_NAMES):
        raise RenderError(
            f"{directory}: no kustomization.yaml here; run `tfcompile build` to create it"
        )
    if not allow_remote:
        remote = remote_entries(directory)
        if remote:
            raise RemoteResourceError(remote)
    chosen = renderer if renderer is not None else find_renderer()
    if chosen.server:
        answer = render_with_server(chosen.command[0], directory, RENDER_TIMEOUT_SECONDS)
        if answer is None:  # the server stopped: this process renders with the command
            try:
                chosen = find_command_renderer()
            except RenderError as missing:
                raise RenderError(
                    f"{directory}: `{chosen.description}` stopped without an answer, and "
                    f"{missing}") from None
        elif answer.ok:
            return answer.text
        else:
            message = kustomize_message("Error: " + answer.text) or "failed"
            raise RenderError(f"{directory}: `{chosen.description}` failed: {message}")
    try:
        completed = subprocess.run(
            [*chosen.command, str(directory)],
            capture_output=True,
            text=True,
            check=False,
            timeout=RENDER_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired as timeout:
        raise RenderError(
            f"{directory}: `{chosen.description}` did not finish within "
            f"{RENDER_TIMEOUT_SECONDS} seconds"
        ) from timeout
    except OSError as failure:
        raise RenderError(f"{directory}: could not run `{chosen.description}`: {failure}") from None
    if completed.returncode != 0:
        message = kustomize_message(completed.stderr) or f"exit status {completed.returncode}"
        raise RenderError(f"{directory}: `{chosen.description}` failed: {message}")
    return completed.stdout


def kustomize_message(standard_error: str) -> str:
    """Kustomize's error text without the klog prefix kubectl wraps it in, each line escaped
    (`printable`: it may quote a fetched or hostile file)."""
    lines: list[str] = []
    for line in standard_error.splitlines():
        match = _KLOG_FAILURE.search(line)
        if match is not None:
            lines.append(_unquote_go_string(match.group("quoted")))
            continue
        stripped = line.strip()
        if stripped.startswith("Error: "):
            stripped = stripped.removeprefix("Error: ")
        if stripped:
            lines.append(stripped)
    return printable("\n".join(lines), keep_newlines=True)


def _unquote_go_string(quoted: str) -> str:
    try:
        value = json.loads(quoted)
    except json.JSONDecodeError:
        return quoted[1:-1]
    return value if isinstance(value, str) else quoted[1:-1]
