"""Mount paths as the kubelet and the container runtime read them, and the ones that are not
the spec's to take.

A mount path is a string to the API server, but a place in the container's file system to the
kubelet and the runtime: the kubelet puts `/` in front of a relative path, and the runtime
cleans the path, so `//opt/tfcompile/launcher`, `/opt/tfcompile/./launcher`,
`/opt/x/../tfcompile/launcher/` and `opt/tfcompile/launcher` all mount over the launcher. Every
check of a mount path therefore compares the path as it is mounted (`mounted_path`), never the
text as written; and a path written otherwise than it is mounted is refused (`form_problem`),
so that the spec, the output and the reviewer all read one path (as does Kubernetes' strategic
merge, which merges mounts by their path's text).

Two places are reserved:
- `RESERVED_MOUNT_PATH`, where tfcompile mounts its launcher, the launcher's state, the script
  and HOME in every TensorFlow container (and HOME in TensorBoard's);
- the service-account token (`TOKEN_DIRECTORIES`), which the launcher reads to record the job's
  state and to release it: Kubernetes adds no token mount to a container that mounts something
  at its path already, so the launcher would run without the API server.
A mount at one of them, inside it or around it (a parent) is refused: two mounts at one place
(another spelling of the path) or one inside the other leave what the container sees to the
order in which the runtime mounts them, and a mount around tfcompile's puts its folders on
another volume.
"""

from __future__ import annotations

import posixpath

RESERVED_MOUNT_PATH = "/opt/tfcompile"
"""Where tfcompile mounts its volumes in a TensorFlow container: the launcher
(`/opt/tfcompile/launcher`), its state (`/opt/tfcompile/state`), the script
(`/opt/tfcompile/script`) and HOME (`/opt/tfcompile/home`)."""

TOKEN_DIRECTORY = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where Kubernetes mounts a pod's service-account token (the launcher reads it there)."""

TOKEN_DIRECTORIES = (TOKEN_DIRECTORY, "/run/secrets/kubernetes.io/serviceaccount")
"""The token's folder, and the same folder through `/run`: images link `/var/run` to `/run`, so
a mount at `/run/secrets` hides the token as one at `/var/run/secrets` does."""

NORMAL_FORM = ("an absolute path as it is mounted: names with one `/` before each (such as "
               "/mnt/data), no `.` or `..` names, no `//` and no `/` at the end")
"""What a mount path must look like, for messages."""


def mounted_path(path: str) -> str:
    """Where a mount path mounts: `/` in front of a relative path (as the kubelet does), then
    cleaned (as the runtime does): no `.` or `..` components, no repeated or trailing `/`, and
    one leading `/` (POSIX leaves a leading `//` to the system; Linux reads it as `/`)."""
    cleaned = posixpath.normpath(path if path.startswith("/") else "/" + path)
    return "/" + cleaned.lstrip("/")


def inside(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or inside it, both as they are mounted."""
    path, directory = mounted_path(path), mounted_path(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def overlaps(path: str, directory: str) -> bool:
    """Whether a mount at `path` is at `directory`, inside it or around it."""
    return inside(path, directory) or inside(directory, path)


def form_problem(path: str) -> str | None:
    """Why a mount path is refused as written (relative, or not as it is mounted), or None."""
    if path == mounted_path(path):
        return None
    return ("a relative path, or one written otherwise than it is mounted (`//`, `.`, `..` or "
            f"a `/` at the end), is refused rather than changed; allowed: {NORMAL_FORM}")


def reserved_problem(path: str, *, token: bool) -> str | None:
    """Why a mount at `path` would hide what tfcompile or Kubernetes mounts, or None; `token`:
    whether the container reads the service-account token (the `tensorflow` container)."""
    if overlaps(path, RESERVED_MOUNT_PATH):
        return (f"{RESERVED_MOUNT_PATH} is where tfcompile mounts its launcher, the launcher's "
                "state, the script and HOME; a mount at it, inside it or around it (such as "
                "/opt) would hide them: choose a path apart from it")
    if token and any(overlaps(path, directory) for directory in TOKEN_DIRECTORIES):
        return (f"{TOKEN_DIRECTORY} (and {TOKEN_DIRECTORIES[1]}, since /var/run is a link to "
                "/run in images) is where Kubernetes mounts the service-account token the "
                "launcher records the job's state with; a mount at it, inside it or around it "
                "(such as /var/run, /run or /var) leaves the launcher without the API server: "
                "choose a path apart from them")
    return None
