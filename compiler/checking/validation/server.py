"""`validate --server`: ask the cluster of the current kubeconfig context what it would refuse.

JSON schemas and tfcompile's model of the kubelet miss most of what the API server checks: a
StatefulSet's pods must be `restartPolicy: Always` and have no `activeDeadlineSeconds`, a
ConfigMap key must be a file name Kubernetes accepts, names have lengths, admission plugins have
their say. A server-side dry-run apply of every rendered object runs all of that and persists
nothing.

kubectl does the talking: `kubectl proxy` on a socket in a private temporary directory carries
the context's credentials (certificates, tokens, exec plugins, OIDC), and this module sends the
same request `kubectl apply --server-side --dry-run=server --force-conflicts` sends, one object
at a time, so each refusal comes back as the API server's structured `Status`: the object, each
field and its reason. Objects without a namespace are checked in the context's namespace (Argo
CD and Flux put them into their destination namespace the same way). What the server and kubectl
say is printed escaped (`printable`): it may carry text a cluster's users wrote.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tfcompile.compiler.checking.launcher_policy_check import POLICY_GROUP, Found, Lookup
from tfcompile.compiler.printable import printable
from tfcompile.compiler.rendering.manifests import (
    KubernetesObject,
    name_of,
    namespace_of,
    object_reference,
)

from .report import ObjectProblem, ValidationReport

FIELD_MANAGER = "tfcompile"
_PROXY_START_SECONDS = 20.0
_REQUEST_TIMEOUT_SECONDS = 60.0
_ATTEMPTS = 4
_RETRY_SECONDS = 1.0
_TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})

# `field.Error` messages put the refused value after its type; tfcompile never echoes input
# values (a value may be a secret), so that part is cut out.
_VALUE_TYPES = ("Invalid value", "Unsupported value", "Duplicate value")
_WARNING = re.compile(r'^\d{3} \S+ "(?P<text>(?:[^"\\]|\\.)*)"')


class ClusterError(Exception):
    """The cluster could not be asked (no context, unreachable, not allowed); print the message."""


@dataclass(frozen=True)
class _Resource:
    path: str  # "/apis/apps/v1" or "/api/v1"
    plural: str
    namespaced: bool


@dataclass
class ServerSession:
    """A `kubectl proxy` for the current context, and what discovery told about its resources."""

    socket_path: Path
    namespace: str
    _resources: dict[str, dict[str, _Resource] | None] = field(default_factory=dict)

    def request(
        self, method: str, path: str, body: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any, list[str]]:
        """Send one request through the proxy: status, the JSON body (or text), warnings.

        A busy or restarting API server (429, 5xx) is asked again a few times, as kubectl does.
        """
        for attempt in range(_ATTEMPTS):
            status, parsed, warnings = self._request_once(method, path, body, content_type)
            if status not in _TRANSIENT_STATUSES or attempt == _ATTEMPTS - 1:
                break
            time.sleep(_RETRY_SECONDS * (attempt + 1))
        return status, parsed, warnings

    def _request_once(
        self, method: str, path: str, body: bytes | None, content_type: str
    ) -> tuple[int, Any, list[str]]:
        connection = _UnixConnection(self.socket_path)
        try:
            headers = {"Accept": "application/json", "Host": "localhost"}
            if body is not None:
                headers["Content-Type"] = content_type
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", errors="replace")
            warnings = [_warning_text(value) for value in response.headers.get_all("Warning") or []]
        except OSError as failure:
            raise ClusterError(f"the connection to the cluster failed: {failure}") from None
        finally:
            connection.close()
        try:
            parsed: Any = json.loads(text)
        except json.JSONDecodeError:
            parsed = text.strip()
        return response.status, parsed, warnings

    def resource(self, api_version: str, kind: str) -> _Resource | None:
        """The REST resource serving `kind` in `api_version`, or None when the cluster has none."""
        if api_version not in self._resources:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            status, body, _ = self.request("GET", path)
            if status == 404:
                self._resources[api_version] = None
            elif status != 200 or not isinstance(body, dict):
                raise ClusterError(f"discovery of {api_version} failed: {_status_text(body)}")
            else:
                self._resources[api_version] = {
                    str(entry["kind"]): _Resource(path, str(entry["name"]),
                                                  bool(entry.get("namespaced")))
                    for entry in body.get("resources", [])
                    if "/" not in str(entry.get("name", "/"))
                }
        found = self._resources[api_version]
        return None if found is None else found.get(kind)


@contextmanager
def server_session() -> Iterator[ServerSession]:
    """Start `kubectl proxy` for the current kubeconfig context; stop it on exit.

    Raises `ClusterError` when kubectl is missing, no context is set, or the API server does not
    answer.
    """
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise ClusterError("`validate --server` needs kubectl on PATH and a kubeconfig context")
    namespace = _context_namespace(kubectl)
    with tempfile.TemporaryDirectory(prefix="tfcompile-server-") as private:
        socket_path = Path(private) / "proxy.sock"
        process = subprocess.Popen(
            [kubectl, "proxy", f"--unix-socket={socket_path}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            _wait_for_socket(process, socket_path)
            session = ServerSession(socket_path=socket_path, namespace=namespace)
            status, body, _ = session.request("GET", "/version")
            if status != 200:
                raise ClusterError(f"the API server did not answer: {_status_text(body)}")
            yield session
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stderr is not None:
                process.stderr.close()


def server_problems(
    objects: list[KubernetesObject], session: ServerSession
) -> tuple[list[ObjectProblem], list[str]]:
    """Dry-run apply every object; each refusal is a problem, each warning a note."""
    problems: list[ObjectProblem] = []
    notes: list[str] = []
    for kubernetes_object in objects:
        reference = object_reference(kubernetes_object)
        found, warnings = _dry_run_apply(kubernetes_object, session)
        problems.extend(ObjectProblem(reference, message) for message in found)
        notes.extend(f"{reference}: the API server warns: {warning}" for warning in warnings)
    return problems, notes


def with_server_checks(report: ValidationReport, session: ServerSession) -> ValidationReport:
    """`report` plus what the API server refuses and warns about its objects."""
    problems, notes = server_problems(report.objects, session)
    return replace(
        report,
        problems=[*report.problems, *problems],
        notes=list(dict.fromkeys([*report.notes, *notes])),
    )


def _dry_run_apply(
    kubernetes_object: KubernetesObject, session: ServerSession
) -> tuple[list[str], list[str]]:
    api_version = str(kubernetes_object.get("apiVersion", ""))
    kind = str(kubernetes_object.get("kind", ""))
    resource = session.resource(api_version, kind)
    if resource is None:
        return [f"the cluster serves no {kind} in {api_version}: install what provides it "
                "(a CRD or an API extension) before this job syncs"], []
    name = name_of(kubernetes_object)
    namespace = namespace_of(kubernetes_object) or session.namespace
    sent = kubernetes_object
    path = resource.path
    if resource.namespaced:
        path += f"/namespaces/{urllib.parse.quote(namespace, safe='')}"
        if not namespace_of(kubernetes_object):
            sent = {**kubernetes_object,
                    "metadata": {**kubernetes_object["metadata"], "namespace": namespace}}
    path += f"/{resource.plural}/{urllib.parse.quote(name, safe='')}?" + urllib.parse.urlencode(
        {"dryRun": "All", "fieldManager": FIELD_MANAGER, "fieldValidation": "Strict",
         "force": "true"}
    )
    status, body, warnings = session.request(
        "PATCH", path, json.dumps(sent).encode("utf-8"), "application/apply-patch+yaml"
    )
    if 200 <= status < 300:
        return [], warnings
    if status in (401, 403) and _refused_identity(body):
        raise ClusterError(f"the current context may not apply {kind}: {_status_text(body)}")
    if status == 404 and resource.namespaced and _names_namespace(body, namespace):
        return [f"namespace {namespace} does not exist in the cluster: create it (or let "
                "Argo CD's CreateNamespace=true create it) before the first sync"], warnings
    return _refusals(body), warnings


def _refusals(body: Any) -> list[str]:
    """One message a refused field (`field: reason`), or the server's message as a whole."""
    if not isinstance(body, dict):
        return [f"the API server refuses it: {printable(str(body)[:500])}"]
    details = body.get("details") or {}
    causes = [cause for cause in details.get("causes") or [] if isinstance(cause, dict)]
    messages = []
    for cause in causes:
        reason = printable(without_value(str(cause.get("message", cause.get("reason", "")))))
        where = printable(str(cause.get("field", "")).removeprefix("."))
        messages.append(f"{where}: {reason} (refused by the API server)" if where
                        else f"{reason} (refused by the API server)")
    kind = printable(str(body.get("reason", "Failure")))
    return messages or [f"the API server refuses it ({kind}): "
                        f"{printable(without_value(str(body.get('message', ''))))}"]


def without_value(message: str) -> str:
    """`Invalid value: "x": must be …` → `Invalid value: must be …`: reason kept, value cut."""
    for value_type in _VALUE_TYPES:
        prefix = f"{value_type}: "
        if not message.startswith(prefix):
            continue
        rest = message[len(prefix):]
        end = _end_of_value(rest)
        if end is None:
            return value_type
        remainder = rest[end:].removeprefix(":").strip()
        return f"{value_type}: {remainder}" if remainder else value_type
    return message


def _end_of_value(text: str) -> int | None:
    """Where the value printed at the start of `text` ends (a quoted string or a bare token)."""
    if text.startswith('"'):
        position = 1
        while position < len(text):
            if text[position] == "\\":
                position += 2
                continue
            if text[position] == '"':
                return position + 1
            position += 1
        return None
    separator = text.find(": ")
    return None if separator < 0 else separator


def _names_namespace(body: Any, namespace: str) -> bool:
    details = body.get("details") if isinstance(body, dict) else None
    return isinstance(details, dict) and details.get("kind") == "namespaces" and \
        details.get("name") == namespace


def _refused_identity(body: Any) -> bool:
    """A 401, or a 403 from authorization (not from an admission plugin about the object)."""
    if not isinstance(body, dict):
        return True
    return body.get("code") == 401 or " cannot " in str(body.get("message", ""))


def _status_text(body: Any) -> str:
    if isinstance(body, dict):
        return printable(str(body.get("message") or body.get("reason") or body)[:500])
    return printable(str(body)[:500])


def _warning_text(header: str) -> str:
    match = _WARNING.match(header)
    if match is None:
        return printable(header)
    return printable(match.group("text").replace('\\"', '"').replace("\\\\", "\\"))


def _context_namespace(kubectl: str) -> str:
    completed = subprocess.run(
        [kubectl, "config", "view", "--minify", "--output",
         "jsonpath={.contexts[0].context.namespace}"],
        capture_output=True, check=False, timeout=_REQUEST_TIMEOUT_SECONDS,
    )
    if completed.returncode != 0:
        message = printable(completed.stderr.strip().removeprefix(b"error: "))
        raise ClusterError(f"no usable kubeconfig context ({message}); `validate --server` "
                           "checks against the current context of $KUBECONFIG or ~/.kube/config")
    return completed.stdout.decode("utf-8", errors="replace").strip() or "default"


def _wait_for_socket(process: subprocess.Popen[bytes], socket_path: Path) -> None:
    """Until the proxy accepts connections (its socket file appears just before it listens)."""
    deadline = time.monotonic() + _PROXY_START_SECONDS
    while not _accepts(socket_path):
        if process.poll() is not None:
            error = process.stderr.read().strip() if process.stderr is not None else b""
            raise ClusterError(f"`kubectl proxy` failed: {printable(error) or process.returncode}")
        if time.monotonic() > deadline:
            raise ClusterError("`kubectl proxy` did not start")
        time.sleep(0.05)


def _accepts(socket_path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(socket_path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over the proxy's Unix socket, which only this user can reach."""

    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=_REQUEST_TIMEOUT_SECONDS)
        self._socket_path = path

    def connect(self) -> None:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(_REQUEST_TIMEOUT_SECONDS)
        connection.connect(str(self._socket_path))
        self.sock = connection


def launcher_policy_lookup(session: ServerSession) -> Lookup:
    """The cluster's launcher policy objects, read through `session` (launcher_policy_check)."""

    def lookup(kind: str, name: str) -> tuple[Found, dict[str, Any] | None]:
        resource = session.resource(POLICY_GROUP, kind)
        if resource is None:
            return Found.NO_API, None
        status, body, _ = session.request(
            "GET", f"{resource.path}/{resource.plural}/{urllib.parse.quote(name, safe='')}")
        if status == 200 and isinstance(body, dict):
            return Found.PRESENT, body
        if status == 404:
            return Found.MISSING, None
        if status in (401, 403):
            return Found.FORBIDDEN, None
        raise ClusterError(f"reading {kind} {name} failed: {_status_text(body)}")

    return lookup
