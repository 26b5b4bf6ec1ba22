"""The launcher's calls to the API server: the job's state ConfigMap and its StatefulSets' scale.

With the pod's own service-account token, bound to the pod (what the cluster's launcher policy
reads to know which task is asking), the standard library's HTTPS client and a few retries.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from typing import Any, Dict

from .protocol import FIELD_MANAGER

ACCOUNT_DIRECTORY = "/var/run/secrets/kubernetes.io/serviceaccount"
API_SERVER = "https://kubernetes.default.svc"
Settings = Dict[str, Any]


class ApiServer:
    """The job's state ConfigMap and the scale of its StatefulSets, with the pod's token."""

    def __init__(self, url: str, account: str) -> None:
        with open(os.path.join(account, "token")) as token_file:
            self.token = token_file.read().strip()
        with open(os.path.join(account, "namespace")) as namespace_file:
            self.namespace = namespace_file.read().strip()
        self.url = url.rstrip("/")
        self.context = ssl.create_default_context(cafile=os.path.join(account, "ca.crt"))

    def call(self, method: str, path: str, body: Settings | None = None, attempts: int = 6,
             timeout: float = 30.0) -> Settings:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + self.token)
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/merge-patch+json")
        delay = 1.0
        problem: Exception = OSError("no attempt made")
        for attempt in range(attempts):
            try:
                with urllib.request.urlopen(request, context=self.context,
                                            timeout=timeout) as answer:
                    found = json.loads(answer.read() or b"{}")
                    return found if isinstance(found, dict) else {}
            except urllib.error.HTTPError as error:
                if error.code < 500 and error.code != 429:
                    raise
                problem = error
            except (OSError, ValueError) as error:
                problem = error
            if attempt < attempts - 1:
                time.sleep(delay)
                delay *= 2
        raise problem

    def config_map_path(self, name: str) -> str:
        return "/api/v1/namespaces/" + self.namespace + "/configmaps/" + name

    def records(self, name: str) -> dict[str, str]:
        """The ConfigMap's data; anything in it that is not text is left out."""
        data = self.call("GET", self.config_map_path(name)).get("data")
        if not isinstance(data, dict):
            return {}
        return {key: value for key, value in data.items()
                if isinstance(key, str) and isinstance(value, str)}

    def record(self, name: str, entries: dict[str, str], attempts: int = 6,
               timeout: float = 30.0) -> None:
        self.call("PATCH", self.config_map_path(name) + "?fieldManager=" + FIELD_MANAGER,
                  {"data": entries}, attempts, timeout)

    def scale_to_zero(self, statefulset: str) -> None:
        path = ("/apis/apps/v1/namespaces/" + self.namespace + "/statefulsets/" + statefulset
                + "/scale?fieldManager=" + FIELD_MANAGER)
        self.call("PATCH", path, {"spec": {"replicas": 0}})
