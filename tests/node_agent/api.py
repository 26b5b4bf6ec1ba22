"""A small client of the Kubernetes API server: HTTPS with the client certificate of a kubeconfig.

The node agent needs a handful of calls (get, list, create, merge-patch, delete) and nothing else,
so it talks JSON over `urllib` instead of pulling in a client library. Only kubeconfigs whose user
authenticates with a client certificate and key (files or inline data) are understood, which is
what `scripts/control-plane.sh` writes.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompile.compiler.yaml_input import read_document

REQUEST_TIMEOUT_SECONDS = 30.0
MERGE_PATCH = "application/merge-patch+json"


class ApiError(Exception):
    """The API server answered with an error status (or could not be reached: status 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


def _named(entries: list[dict[str, Any]], name: str, what: str) -> dict[str, Any]:
    for entry in entries:
        if entry.get("name") == name:
            found: dict[str, Any] = entry.get(what) or {}
            return found
    raise ValueError(f"the kubeconfig has no {what} named {name!r}")


def _file_or_data(entry: Mapping[str, Any], key: str, base: Path, keep: list[Any]) -> str | None:
    """The path of `key` (a file) or of a private temporary file holding `key-data`."""
    if entry.get(key):
        return str((base / str(entry[key])).resolve())
    data = entry.get(f"{key}-data")
    if not data:
        return None
    holder = tempfile.NamedTemporaryFile(prefix="tfcompile-kubeconfig-")  # noqa: SIM115
    holder.write(base64.b64decode(str(data)))
    holder.flush()
    keep.append(holder)
    return holder.name


@dataclass
class ApiClient:
    """Requests to one API server as one user."""

    server: str
    context: ssl.SSLContext
    _keep: list[Any]

    @classmethod
    def from_kubeconfig(cls, path: Path) -> ApiClient:
        config = read_document(path.read_text(encoding="utf-8"))
        context_name = config.get("current-context")
        context = _named(config.get("contexts") or [], context_name, "context")
        cluster = _named(config.get("clusters") or [], context["cluster"], "cluster")
        user = _named(config.get("users") or [], context["user"], "user")
        keep: list[Any] = []
        base = path.parent
        authority = _file_or_data(cluster, "certificate-authority", base, keep)
        certificate = _file_or_data(user, "client-certificate", base, keep)
        key = _file_or_data(user, "client-key", base, keep)
        if certificate is None or key is None:
            raise ValueError(f"{path}: the user must authenticate with a client certificate")
        tls = ssl.create_default_context(cafile=authority)
        tls.load_cert_chain(certificate, key)
        return cls(str(cluster["server"]).rstrip("/"), tls, keep)

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json",
                query: Mapping[str, str] | None = None) -> Any:
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self.context,
                                        timeout=REQUEST_TIMEOUT_SECONDS) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", errors="replace")
            try:
                message = str(json.loads(detail).get("message", detail))
            except ValueError:
                message = detail
            raise ApiError(error.code, message) from None
        except (urllib.error.URLError, OSError) as error:
            raise ApiError(0, f"cannot reach {self.server}: {error}") from None
        return json.loads(text) if text else None

    def get(self, path: str, query: Mapping[str, str] | None = None) -> Any:
        return self.request("GET", path, query=query)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def create(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, content_type=MERGE_PATCH)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str, body: Any = None) -> Any:
        return self.request("DELETE", path, body)
