"""The files of `projected` and `downwardAPI` volumes, which `local_run` does not make.

Every pod the API server admits gets a projected service-account volume (a bound token, the
cluster's CA bundle from ConfigMap `kube-root-ca.crt`, the namespace) unless it opts out, so a node
must make one. The token comes from the TokenRequest API, bound to the pod, as the kubelet asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfcompile.compiler.local_run import volumes
from tfcompile.compiler.local_run.user_namespace import IdRange
from tfcompile.compiler.local_run.volumes import ProjectedFile, relative_path_problem

from .api import ApiClient
from .sources import PodSources

KINDS = ("projected", "downwardAPI")
DEFAULT_MODE = 0o644
DEFAULT_TOKEN_SECONDS = 3607


def _field_value(path: str, pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    simple = {"metadata.name": "name", "metadata.namespace": "namespace", "metadata.uid": "uid"}
    if path in simple:
        return str(metadata.get(simple[path], ""))
    for prefix, key in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        values = metadata.get(key) or {}
        if path == prefix:
            return "".join(f'{name}="{value}"\n' for name, value in sorted(values.items()))
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str(values.get(path[len(prefix) + 2:-2], ""))
    return ""


def _items(items: list[dict[str, Any]] | None, data: Mapping[str, str],
           mode: int) -> list[ProjectedFile]:
    if items is None:
        return [ProjectedFile(key, value, mode) for key, value in sorted(data.items())]
    return [ProjectedFile(str(item["path"]), data[str(item["key"])], int(item.get("mode", mode)))
            for item in items if str(item.get("key")) in data]


def _token(client: ApiClient, pod: Mapping[str, Any], source: Mapping[str, Any]) -> str:
    metadata, spec = pod["metadata"], pod.get("spec") or {}
    account = spec.get("serviceAccountName") or "default"
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [source["audience"]] if source.get("audience") else [],
            "expirationSeconds": int(source.get("expirationSeconds", DEFAULT_TOKEN_SECONDS)),
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": metadata["name"],
                               "uid": metadata["uid"]},
        },
    }
    answer = client.create(
        f"/api/v1/namespaces/{metadata['namespace']}/serviceaccounts/{account}/token", request)
    return str(answer["status"]["token"])


def volume_files(client: ApiClient, pod: Mapping[str, Any], volume: Mapping[str, Any],
                 sources: PodSources) -> list[ProjectedFile]:
    """The files of one projected or downwardAPI volume of `pod`."""
    if volume.get("downwardAPI") is not None:
        downward = volume["downwardAPI"]
        mode = int(downward.get("defaultMode", DEFAULT_MODE))
        return [ProjectedFile(str(item["path"]),
                              _field_value(str((item.get("fieldRef") or {}).get("fieldPath", "")),
                                           pod), int(item.get("mode", mode)))
                for item in downward.get("items") or []]
    projected = volume.get("projected") or {}
    mode = int(projected.get("defaultMode", DEFAULT_MODE))
    files: list[ProjectedFile] = []
    for source in projected.get("sources") or []:
        if source.get("serviceAccountToken"):
            token = source["serviceAccountToken"]
            files.append(ProjectedFile(str(token.get("path", "token")),
                                       _token(client, pod, token), mode))
        elif source.get("configMap"):
            name = str(source["configMap"].get("name", ""))
            files += _items(source["configMap"].get("items"), sources.config_maps.get(name, {}),
                            mode)
        elif source.get("secret"):
            name = str(source["secret"].get("name", ""))
            data = {key: value for (secret, key), value in sources.secrets.items()
                    if secret == name}
            files += _items(source["secret"].get("items"), data, mode)
        elif source.get("downwardAPI"):
            files += volume_files(client, pod, {"downwardAPI": source["downwardAPI"]}, sources)
    return files


def write_files(directory: Path, files: list[ProjectedFile], ids: IdRange) -> None:
    """Write the files whose paths stay inside `directory`, owned by the container's root."""
    volumes.write_files(directory, [projected for projected in files
                                    if relative_path_problem(projected.path) is None], ids)
