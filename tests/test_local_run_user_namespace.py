"""`run-local`'s pods run as no user of this machine: their IDs are those the pod asks for inside a
user namespace, and on the host IDs no account, group or subordinate range holds. So a pod running
as a real user's ID (or as root) cannot read that user's (or root's) private files, and what it
writes belongs to nobody real. The runtime cases need root."""

from __future__ import annotations

import io
import os
import secrets
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_local_run_runtime import (
    STATE_MOUNT,
    WRITE_MARKER,
    lines_of,
    make_pod,
    options,
    python_container,
)
from tfcompile.compiler.local_run import run_pods
from tfcompile.compiler.local_run.preflight import find_problems
from tfcompile.compiler.local_run.user_namespace import (
    FIRST_CANDIDATE,
    RANGE_SIZE,
    id_problems,
    unused_range,
)
from tfcompile.compiler.rendering.pods import Volume, VolumeMount

needs_root = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="the local runtime needs root on Linux",
)


def _entries(path: str) -> list[list[str]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line.split(":") for line in text.splitlines() if line.count(":") >= 2]


def accounts() -> set[int]:
    return {int(fields[2]) for fields in _entries("/etc/passwd")}


def groups() -> set[int]:
    return {int(fields[2]) for fields in _entries("/etc/group")}


def subordinate_ranges() -> list[range]:
    return [range(int(fields[1]), int(fields[1]) + int(fields[2]))
            for path in ("/etc/subuid", "/etc/subgid") for fields in _entries(path)]


# Choosing the range ---------------------------------------------------------------------------


def test_the_range_is_the_first_candidate_that_no_id_or_subordinate_range_touches() -> None:
    first = unused_range([(0, 1), (1000, 1001), (100000, 165536)])
    assert first is not None and first.start == FIRST_CANDIDATE
    skipped_id = unused_range([(FIRST_CANDIDATE + 5, FIRST_CANDIDATE + 6)])
    assert skipped_id is not None and skipped_id.start == FIRST_CANDIDATE + RANGE_SIZE
    subordinate = (FIRST_CANDIDATE - 10, FIRST_CANDIDATE + 2 * RANGE_SIZE + 1)
    after = unused_range([subordinate, (FIRST_CANDIDATE + 3 * RANGE_SIZE,
                                        FIRST_CANDIDATE + 3 * RANGE_SIZE + 1)])
    assert after is not None and after.start == FIRST_CANDIDATE + 4 * RANGE_SIZE
    assert unused_range([(0, 2**32)]) is None


def test_this_machines_range_belongs_to_no_account_group_or_subordinate_range() -> None:
    ids = unused_range()
    assert ids is not None
    mapped = range(ids.start, ids.start + ids.size)
    assert ids.size == 65536 and mapped[-1] < 2**31 - 1
    assert not [uid for uid in accounts() if uid in mapped]
    assert not [gid for gid in groups() if gid in mapped]
    assert not [taken for taken in subordinate_ranges()
                if taken.start < mapped.stop and mapped.start < taken.stop]
    assert unused_range() == ids  # the same from run to run: kept claims keep their owners


def test_ids_beyond_the_mapped_ones_refuse_the_run() -> None:
    pod = make_pod("job-worker-0", "job-worker", [python_container("pass")],
                   security={"runAsUser": 70000, "runAsGroup": 1000, "fsGroup": 65536})
    problems = id_problems([pod])
    assert problems == [
        "pod job-worker-0, container tensorflow: user 70000 is outside 0-65535, the IDs a local "
        "run maps into its user namespace (as Kubernetes maps a pod with hostUsers: false)",
        "pod job-worker-0, container tensorflow: supplementary group 65536 is outside 0-65535, "
        "the IDs a local run maps into its user namespace (as Kubernetes maps a pod with "
        "hostUsers: false)",
    ]
    assert set(problems) <= set(find_problems([pod], options(Path("/nonexistent"),
                                                              io.StringIO())))


# What a pod can read and what it is on the host --------------------------------------------


def real_user() -> tuple[int, int]:
    """A non-root account of this machine (a person's when there is one) and its group."""
    candidates = [(int(fields[2]), int(fields[3])) for fields in _entries("/etc/passwd")
                  if int(fields[2]) not in (0, 65534) and int(fields[2]) < RANGE_SIZE]
    people = [candidate for candidate in candidates if candidate[0] >= 1000]
    assert people or candidates, "this machine has no non-root account"
    return (people or candidates)[0]


READER = """
    import os, time  # {token}
    print("ids", os.getuid(), os.getgid(), flush=True)
    for name in ("owner-only", "group-only", "root-only", "everyone"):
        try:
            open("/tmp/{token}/" + name).read()
            print(name, "readable", flush=True)
        except OSError as error:
            print(name, error.strerror, flush=True)
    open("/mnt/shared/written-by-" + os.environ["HOSTNAME"], "w").write("x")
    while not os.path.exists("/mnt/shared/seen"):
        time.sleep(0.05)
    {write_marker}
    time.sleep(3600)
"""


@pytest.fixture
def token() -> str:
    return f"tfcompile-test-{secrets.token_hex(4)}"


@pytest.fixture
def host_files(token: str) -> Iterator[tuple[int, int]]:
    """Files of a real user in /tmp/TOKEN (which every user may enter): one only it may read
    (0600), one only its group may read (root's, 0640), one only root may read, one everyone
    may read. Yields the user and its group."""
    user, group = real_user()
    directory = Path("/tmp", token)
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    for name, owner, mode in (("owner-only", (user, group), 0o600),
                              ("group-only", (0, group), 0o640),
                              ("root-only", (0, 0), 0o600),
                              ("everyone", (0, 0), 0o644)):
        path = directory / name
        path.write_text(f"{name} text")
        os.chown(path, *owner)
        path.chmod(mode)
    yield user, group
    shutil.rmtree(directory)


def _status_ids(pid: int) -> dict[str, list[int]]:
    """The host's view of a process's IDs: Uid and Gid (real, effective, saved, filesystem)
    and supplementary Groups."""
    found: dict[str, list[int]] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, values = line.partition(":")
        if key in ("Uid", "Gid", "Groups"):
            found[key] = [int(value) for value in values.split()]
    return found


def _pod_processes(token: str, pod: str) -> list[int]:
    """PIDs of a pod's processes: those whose command names `token` and HOSTNAME is `pod`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes()
                    and f"HOSTNAME={pod}".encode() in (entry / "environ").read_bytes()):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@needs_root
def test_pods_run_as_no_user_of_the_host_and_read_only_what_everyone_may(
        tmp_path: Path, token: str, host_files: tuple[int, int]) -> None:
    user, group = host_files
    ids = unused_range()
    assert ids is not None
    shared = Volume("shared", "persistentVolumeClaim", {"claimName": "job-shared"})
    mounts = [STATE_MOUNT, VolumeMount("shared", "/mnt/shared", False, None)]
    code = textwrap.dedent(READER.format(token=token, write_marker=WRITE_MARKER))
    as_user = {"runAsUser": user, "runAsGroup": group, "fsGroup": group}
    as_root = {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False}
    pods = [make_pod(f"job-worker-{index}", "job-worker",
                     [python_container(code, mounts=mounts)], volumes=[shared], security=security)
            for index, security in enumerate((as_user, as_root))]
    claims = tmp_path / "claims"
    seen: dict[str, list[dict[str, list[int]]]] = {}

    def look_at_the_pods() -> None:
        deadline = time.monotonic() + 60
        for pod in ("job-worker-0", "job-worker-1"):
            written = claims / "job-shared" / f"written-by-{pod}"
            while not written.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            seen[pod] = [_status_ids(pid) for pid in _pod_processes(token, pod)]
        if (claims / "job-shared").is_dir():
            (claims / "job-shared" / "seen").write_text("")

    output = io.StringIO()
    watcher = threading.Thread(target=look_at_the_pods)
    watcher.start()
    outcome = run_pods(pods, options(tmp_path, output, claims_directory=claims,
                                     success_pods=["job-worker-0", "job-worker-1"]))
    watcher.join()
    assert outcome.exit_code == 0, output.getvalue()
    assert lines_of(output, "job-worker-0")[:5] == [
        f"ids {user} {group}", "owner-only Permission denied", "group-only Permission denied",
        "root-only Permission denied", "everyone readable"]
    assert lines_of(output, "job-worker-1")[:5] == [
        "ids 0 0", "owner-only Permission denied", "group-only Permission denied",
        "root-only Permission denied", "everyone readable"]
    for pod, container_id in (("job-worker-0", user), ("job-worker-1", 0)):
        (process,) = seen[pod]
        host_id = ids.host_id(container_id)
        assert process["Uid"] == [host_id] * 4
        assert host_id not in accounts()
    assert seen["job-worker-0"][0]["Gid"] == [ids.host_id(group)] * 4
    assert seen["job-worker-0"][0]["Groups"] == [ids.host_id(group)]
    assert ids.host_id(group) not in groups()
    owners = {path.name: (path.stat().st_uid, path.stat().st_gid)
              for path in (claims / "job-shared").iterdir()}
    assert owners["written-by-job-worker-0"] == (ids.host_id(user), ids.host_id(group))
    # The claim's directory is set-group-ID for fsGroup, so root's file has that group too.
    assert owners["written-by-job-worker-1"] == (ids.host_id(0), ids.host_id(group))
