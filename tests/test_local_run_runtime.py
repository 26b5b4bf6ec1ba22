"""run-local with podman (needs root and the project's podman, tests/podman_fixture.py): pods in
their images on a network of the run's own, volumes, restarts, endings, and that nothing of the
run is left on the host after it, including a run stopped by a signal or killed."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tfcompile.compiler.local_run import (
    LocalRunOptions,
    RunOutcome,
    run_pods,
    supervisor,
)
from tfcompile.compiler.objects import launcher_interface as launcher
from tfcompile.compiler.objects.revision_gate import gate_settings
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.compiler.rendering.pods import Container, Pod, Volume, VolumeMount

pytestmark = [pytest.mark.end_to_end, pytest.mark.usefixtures("podman_images")]

IMAGE = "python:3.11"
STATE = Volume(launcher.STATE_VOLUME, "emptyDir", {})
STATE_MOUNT = VolumeMount(launcher.STATE_VOLUME, launcher.STATE_DIRECTORY, False, None)
WRITE_MARKER = f"open({launcher.SUCCESS_MARKER!r}, 'w').close()"


def python_container(code: str, *, name: str = "tensorflow",
                     mounts: list[VolumeMount] | None = None,
                     environment: dict[str, str] | None = None) -> Container:
    return Container(
        name=name, image=IMAGE,
        command=["python", "-c", textwrap.dedent(code)], args=[],
        environment=environment or {}, unresolved=[], volume_mounts=mounts or [], ports=[],
        working_dir=None, resources={},
    )


def make_pod(name: str, service: str, containers: list[Container], *,
             volumes: list[Volume] | None = None, init: list[Container] | None = None,
             namespace: str | None = None, grace: int = 30,
             security: dict[str, Any] | None = None) -> Pod:
    """A pod of StatefulSet `service`; `security` is its pod-level securityContext (none: root)."""
    return Pod(
        name=name, namespace=namespace, owner_kind="StatefulSet", owner_name=service,
        index=int(name.rsplit("-", 1)[1]), hostname=name, subdomain=service, labels={},
        annotations={}, containers=containers, init_containers=init or [],
        volumes=[STATE, *(volumes or [])], restart_policy="Always",
        termination_grace_period_seconds=grace,
        spec={"securityContext": security} if security is not None else {},
    )


def options(tmp_path: Path, output: io.StringIO, **settings: Any) -> LocalRunOptions:
    base = LocalRunOptions(backoff_initial_seconds=0.2, maximum_grace_seconds=0.5,
                           timeout_seconds=30.0, temporary_directory=tmp_path, output=output,
                           errors=output)
    return dataclasses.replace(base, **settings)


def _processes_mentioning(words: list[str]) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(word in command for word in words):
            found.append(f"{entry}: {command[:120]}")
    return found


def _of_the_node(mount_point: str) -> bool:
    """Whether a mount belongs to a real node of the test suite (scripts/control-plane.sh up
    --node, whose pods come and go while these tests run beside them): it lies in a control
    plane's run directory, marked at its top."""
    path = Path(mount_point)
    return any((parent / ".tfcompile-control-plane").exists() for parent in path.parents)


def _node_link(name: str) -> bool:
    """The real node's bridge and its pods' veths (their master is the bridge)."""
    master = Path(f"/sys/class/net/{name}/master")
    return name == "tfcompile0" or (master.exists() and master.resolve().name == "tfcompile0")


def _podman_objects() -> dict[str, list[str]]:
    listed = {}
    for what in (["ps", "--all"], ["pod", "ps"], ["network", "ls"]):
        shown = subprocess.run(["podman", *what, "--format", "{{.Names}}" if what[0] == "ps"
                                else "{{.Name}}"], capture_output=True, text=True, check=False)
        assert shown.returncode == 0, shown.stderr
        listed[" ".join(what)] = sorted(shown.stdout.split())
    return listed


def host_state() -> dict[str, object]:
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    mounts = [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if not _of_the_node(line.split()[4])]
    return {
        "ip netns": netns.stdout,
        "links": sorted(name for name in os.listdir("/sys/class/net") if not _node_link(name)),
        "mounts": mounts,
        "podman": _podman_objects(),
        "hostname": os.uname().nodename,
    }


@pytest.fixture
def token() -> str:
    """A word every pod command of the test carries, to find leftover processes."""
    return f"tfcompile-test-{secrets.token_hex(4)}"


@pytest.fixture
def unchanged_host(tmp_path: Path, token: str) -> Iterator[None]:
    before = host_state()
    yield
    deadline = time.monotonic() + 3
    while _processes_mentioning([token, str(tmp_path)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_mentioning([token, str(tmp_path)]) == []
    assert host_state() == before
    assert list(tmp_path.iterdir()) == []


def lines_of(output: io.StringIO, prefix: str) -> list[str]:
    return [line.split(" | ", 1)[1] for line in output.getvalue().splitlines()
            if line.startswith(prefix + " ") and " | " in line]


SERVER = """
    import os, signal, socket, sys, time  # {token}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    interfaces = sorted(name for _, name in socket.if_nameindex())
    print("identity", socket.gethostname(), os.environ["HOSTNAME"],
          os.path.realpath(sys.executable), sys.prefix, os.environ["CHECK"], interfaces,
          "canary" in os.environ, flush=True)
    server = socket.create_server(("0.0.0.0", 2222))
    for _ in range(4):
        connection, _ = server.accept()
        connection.sendall(b"hello")
        connection.close()
    print("served 4", flush=True)
"""

CLIENT = """
    import socket, time  # {token}
    variables = open("/proc/self/environ").read().split(chr(0))
    print("environment", sorted(v.split("=", 1)[0] for v in variables if v), flush=True)
    names = ["job-worker-0.job-worker", "job-worker-0.job-worker.ml",
             "job-worker-0.job-worker.ml.svc", "job-worker-0.job-worker.ml.svc.cluster.local"]
    for name in names:
        for attempt in range(100):
            try:
                with socket.create_connection((name, 2222), timeout=2) as connection:
                    print("reached", name, connection.recv(5).decode(), flush=True)
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
    with socket.create_connection(("job-chief-0", 2223), timeout=2):
        pass
    print("own hostname resolves", flush=True)
    with socket.create_connection(("127.0.0.1", 2222), timeout=2) as connection:
        print("loopback", connection.recv(5).decode(), flush=True)
    try:
        socket.create_connection(("192.0.2.1", 80), timeout=2)
    except OSError as error:
        print("outside", error.strerror, flush=True)
    time.sleep(3600)
"""

CLIENT_LISTENER = """
    import socket, threading  # {token}
    own = socket.create_server(("0.0.0.0", 2223))
    threading.Thread(target=lambda: [own.accept() for _ in range(10)], daemon=True).start()
    local = socket.create_server(("127.0.0.1", 2222))
    threading.Thread(target=lambda: [local.accept()[0].sendall(b"local") for _ in range(10)],
                     daemon=True).start()
"""


LAUNCHER = Volume(launcher.LAUNCHER_VOLUME, "configMap", {"name": "job-launcher"})
LAUNCHER_MOUNT = VolumeMount(launcher.LAUNCHER_VOLUME, launcher.LAUNCHER_DIRECTORY, True, None)
LAUNCHER_CONFIG_MAPS: dict[str, dict[str, str | bytes]] = {"job-launcher": {
    launcher.PROGRAM_FILE: shipped_launcher().archive,
    launcher.SETTINGS_FILE: launcher.settings_text({
        "stateConfigMap": "job-state", "successTasks": ["worker-0"], "evaluatorTasks": [],
        "onSuccess": "idle", "releaseFirst": ["job-worker"], "releaseLast": [],
        "failurePolicy": None, "revisionGate": gate_settings()}),
}}


def dns_pods(token: str) -> list[Pod]:
    server = Container(
        name="tensorflow", image=IMAGE,
        command=launcher.command("worker"),
        args=["python", "-c", textwrap.dedent(SERVER.format(token=token))],
        environment={"CHECK": "as-given"}, unresolved=[],
        volume_mounts=[STATE_MOUNT, LAUNCHER_MOUNT], ports=[], working_dir=None, resources={},
    )
    client_code = (textwrap.dedent(CLIENT.format(token=token))
                   .replace("import socket, time", textwrap.dedent(CLIENT_LISTENER.format(
                       token=token)) + "import socket, time", 1))
    client = python_container(client_code, environment={"TF_CONFIG": "{}"})
    return [
        make_pod("job-worker-0", "job-worker", [server], namespace="ml", volumes=[LAUNCHER]),
        make_pod("job-chief-0", "job-chief", [client], namespace="ml"),
    ]


def test_pods_reach_each_other_by_dns_names_in_two_runs_at_once(
        tmp_path: Path, token: str, unchanged_host: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pod runs in its image (the image's Python, not this machine's), on the run's own
    network: every cluster DNS name of a pod reaches it, its own hostname and loopback are its
    own, nothing beyond the network is reachable, and the runner's environment stays out."""
    monkeypatch.setenv("canary", "the runner's own variable")
    outputs = [io.StringIO(), io.StringIO()]
    outcomes: list[RunOutcome] = []

    def run(output: io.StringIO) -> None:
        outcomes.append(run_pods(dns_pods(token), options(
            tmp_path, output, success_pods=["job-worker-0"], config_maps=LAUNCHER_CONFIG_MAPS)))

    threads = [threading.Thread(target=run, args=(output,)) for output in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert [outcome.exit_code for outcome in outcomes] == [0, 0], [o.getvalue() for o in outputs]
    networks = set()
    for output in outputs:
        text = output.getvalue()
        networks.update(re.findall(r"on podman network (tfcompile-[0-9a-f]{6})", text))
        server = lines_of(output, "job-worker-0")
        assert server[0] == ("identity job-worker-0 job-worker-0 /usr/bin/python3.11 /usr "
                             "as-given ['eth0', 'lo'] False")
        assert "served 4" in server
        assert "tfcompile: training succeeded; idling (delete or suspend the job to stop)" in server
        client = lines_of(output, "job-chief-0")
        assert [line for line in client if line.startswith("reached")] == [
            "reached job-worker-0.job-worker hello",
            "reached job-worker-0.job-worker.ml hello",
            "reached job-worker-0.job-worker.ml.svc hello",
            "reached job-worker-0.job-worker.ml.svc.cluster.local hello",
        ]
        (environment,) = [line for line in client if line.startswith("environment")]
        assert {"'HOSTNAME'", "'PATH'", "'TF_CONFIG'"} <= set(
            environment.removeprefix("environment [").removesuffix("]").split(", "))
        assert "canary" not in environment
        assert "own hostname resolves" in client
        assert "loopback local" in client
        assert "outside Network is unreachable" in client
        assert re.search(r"job-worker-0 +0 +- +yes", text)
        assert "training succeeded (job-worker-0)" in text
    assert len(networks) == 2


VOLUME_WRITER = """
    import os, time  # {token}
    print("config", open("/opt/tfcompile/script/train.py").read(), flush=True)
    print("single", open("/etc/job/settings.ini").read(), flush=True)
    try:
        open("/opt/tfcompile/script/new", "w")
    except OSError as error:
        print("configmap write", error.strerror, flush=True)
    open("/mnt/shared/from-writer", "w").write("shared text")
    open("/{token}/data/scratch", "w").write("scratch")
    print("top-level dir", os.listdir("/{token}/data"), flush=True)
    open("/usr/local/written-by-pod-{token}", "w").write("stays in the pod")
    time.sleep(3600)
"""

VOLUME_READER = """
    import os, time  # {token}
    while not os.path.exists("/mnt/shared/from-writer"):
        time.sleep(0.05)
    print("reader sees", open("/mnt/shared/from-writer").read(), flush=True)
    print("own scratch", os.listdir("/{token}/data"), flush=True)
    {write_marker}
    time.sleep(3600)
"""


def test_volumes_appear_at_their_paths_without_touching_the_host(
        tmp_path: Path, token: str, unchanged_host: None) -> None:
    script = Volume("script", "configMap", {"name": "job-script-abc"})
    settings = Volume("settings", "configMap", {
        "name": "job-settings", "items": [{"key": "settings", "path": "conf/settings.ini"}]})
    shared = Volume("shared", "persistentVolumeClaim", {"claimName": "job-shared"})
    scratch = Volume("scratch", "emptyDir", {"medium": "Memory"})
    writer_mounts = [
        VolumeMount("script", "/opt/tfcompile/script", False, None),
        VolumeMount("settings", "/etc/job/settings.ini", False, "conf/settings.ini"),
        VolumeMount("shared", "/mnt/shared", False, None),
        VolumeMount("scratch", f"/{token}/data", False, None),
    ]
    reader_mounts = [STATE_MOUNT, VolumeMount("shared", "/mnt/shared", False, None),
                     VolumeMount("scratch", f"/{token}/data", False, None)]
    pods = [
        make_pod("job-worker-0", "job-worker",
                 [python_container(VOLUME_WRITER.format(token=token), mounts=writer_mounts)],
                 volumes=[script, settings, shared, scratch]),
        make_pod("job-worker-1", "job-worker",
                 [python_container(VOLUME_READER.format(token=token, write_marker=WRITE_MARKER),
                                   mounts=reader_mounts)],
                 volumes=[shared, scratch]),
    ]
    output = io.StringIO()
    config_maps = {"job-script-abc": {"train.py": "print('train')"},
                   "job-settings": {"settings": "[a]\nb = 1", "unused": "x"}}
    outcome = run_pods(pods, options(tmp_path, output, success_pods=["job-worker-1"],
                                     config_maps=config_maps))
    assert outcome.exit_code == 0, output.getvalue()
    writer = lines_of(output, "job-worker-0")
    assert "config print('train')" in writer
    assert "single [a]" in writer
    assert "configmap write Read-only file system" in writer
    assert "top-level dir ['scratch']" in writer
    reader = lines_of(output, "job-worker-1")
    assert "reader sees shared text" in reader
    assert "own scratch []" in reader
    assert not os.path.exists(f"/usr/local/written-by-pod-{token}")


LINKING = """
    import os, sys, time  # {token}
    count_file = "/opt/tfcompile/state/starts"
    starts = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
    open(count_file, "w").write(str(starts))
    print("start", starts, "sees", sorted(os.listdir("/data")), flush=True)
    if starts == 1:
        os.rmdir("/work/sub")
        os.symlink({host!r}, "/work/sub")
        sys.exit(3)
    {write_marker}
    time.sleep(3600)
"""


def test_a_sub_path_the_pod_replaced_with_a_link_is_not_followed_after_a_restart(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, token: str,
        unchanged_host: None) -> None:
    """run-local resolves a subPath as the host's root: it is resolved again at every start, and
    a folder the pod replaced with a link to a host directory stops the container from starting
    instead of mounting that directory into it."""
    host = tmp_path_factory.mktemp("host-directory")
    host.chmod(0o755)  # any user may look in: followed, the pod would list it
    (host / "secret").write_text("host's")
    before = {p.name: p.stat() for p in [host, *host.iterdir()]}
    work = Volume("work", "emptyDir", {})
    mounts = [STATE_MOUNT, VolumeMount("work", "/work", False, None),
              VolumeMount("work", "/data", False, "sub")]
    code = LINKING.format(token=token, host=str(host), write_marker=WRITE_MARKER)
    pods = [make_pod("job-worker-0", "job-worker", [python_container(code, mounts=mounts)],
                     volumes=[work])]
    output = io.StringIO()
    outcome = run_pods(pods, options(tmp_path, output, success_pods=["job-worker-0"],
                                     restart_limit=1))
    assert outcome.exit_code == 1, output.getvalue()
    assert lines_of(output, "job-worker-0")[0] == "start 1 sees []"
    assert not [line for line in lines_of(output, "job-worker-0") if "start 2" in line]
    assert ("cannot start the container: cannot prepare its volumes: subPath 'sub': sub is a "
            "symbolic link; a subPath is never followed through a link (the pod may have "
            "made it)") in output.getvalue()
    assert {p.name: p.stat() for p in [host, *host.iterdir()]} == before


RESTARTING = """
    import os, sys, time  # {token}
    count_file = "/opt/tfcompile/state/starts"
    starts = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
    open(count_file, "w").write(str(starts))
    print("start", starts, "init wrote", open("/opt/tfcompile/state/init").read(), flush=True)
    if starts < 3:
        sys.exit(3)
    {write_marker}
    time.sleep(3600)
"""


def test_empty_dir_survives_restarts_after_init_container(
        tmp_path: Path, token: str, unchanged_host: None) -> None:
    init = python_container(f"open('/opt/tfcompile/state/init', 'w').write('yes')  # {token}",
                            name="prepare", mounts=[STATE_MOUNT])
    main = python_container(RESTARTING.format(token=token, write_marker=WRITE_MARKER),
                            mounts=[STATE_MOUNT])
    pods = [make_pod("job-worker-0", "job-worker", [main], init=[init])]
    output = io.StringIO()
    outcome = run_pods(pods, options(tmp_path, output, success_pods=["job-worker-0"]))
    assert outcome.exit_code == 0, output.getvalue()
    assert [line for line in lines_of(output, "job-worker-0") if line.startswith("start")] == [
        "start 1 init wrote yes", "start 2 init wrote yes", "start 3 init wrote yes"]
    (summary,) = outcome.pods
    assert (summary.restarts, summary.last_exit_code, summary.succeeded) == (2, 3, True)


CRASHING = """
    import sys, time  # {token}
    for number in range(30):
        print("line", number, flush=True)
    sys.exit(7)
"""


def test_crash_loop_backs_off_then_fails_with_the_last_lines(
        tmp_path: Path, token: str, unchanged_host: None) -> None:
    healthy = python_container(f"import time  # {token}\ntime.sleep(3600)")
    pods = [make_pod("job-worker-0", "job-worker",
                     [python_container(CRASHING.format(token=token))]),
            make_pod("job-ps-0", "job-ps", [healthy], grace=0)]
    output = io.StringIO()
    started = time.monotonic()
    outcome = run_pods(pods, options(tmp_path, output, success_pods=["job-worker-0"],
                                     restart_limit=2, backoff_initial_seconds=0.3))
    elapsed = time.monotonic() - started
    text = output.getvalue()
    assert outcome.exit_code == 1, text
    assert outcome.ending == "failed"
    assert "restarting in 0.3 s" in text and "restarting in 0.6 s" in text
    assert elapsed >= 0.9
    assert "job-worker-0 exited with status 7 after 2 restart(s); the limit is 2" in text
    report = text.split("the last 20 line(s) of job-worker-0:\n", 1)[1].splitlines()
    assert report[:20] == [f"job-worker-0 | line {number}" for number in range(10, 30)]
    worker, parameter_server = outcome.pods
    assert (worker.restarts, worker.last_exit_code, worker.succeeded) == (2, 7, False)
    assert (parameter_server.restarts, parameter_server.last_exit_code) == (0, None)


def test_a_task_whose_failure_policy_says_stop_ends_the_run_as_failed(
        tmp_path: Path, token: str, unchanged_host: None) -> None:
    settings = json.loads(LAUNCHER_CONFIG_MAPS["job-launcher"][launcher.SETTINGS_FILE])
    settings["failurePolicy"] = {"maxRestarts": 5, "doNotRetryExitCodes": [2]}
    config_maps = {"job-launcher": {**LAUNCHER_CONFIG_MAPS["job-launcher"],
                                    launcher.SETTINGS_FILE: launcher.settings_text(settings)}}
    failing = Container(
        name="tensorflow", image=IMAGE, command=launcher.command("worker"),
        args=["python", "-c", f"raise SystemExit(2)  # {token}"], environment={},
        unresolved=[], volume_mounts=[STATE_MOUNT, LAUNCHER_MOUNT], ports=[], working_dir=None,
        resources={})
    output = io.StringIO()
    started = time.monotonic()
    outcome = run_pods([make_pod("job-worker-0", "job-worker", [failing], volumes=[LAUNCHER])],
                       options(tmp_path, output, success_pods=["job-worker-0"],
                               config_maps=config_maps, restart_limit=3,
                               timeout_seconds=600.0))
    text = output.getvalue()
    assert (outcome.exit_code, outcome.ending) == (1, "failed"), text
    assert time.monotonic() - started < 300  # not the timeout: the launcher stopped at once
    assert "that exit code means do not retry" in text
    assert "job-worker-0 stopped retrying (failurePolicy): exit 2 after 0 restarts" in text
    assert outcome.pods[0].restarts == 0


def test_timeout_ends_the_run_and_stubborn_pods_are_killed(
        tmp_path: Path, token: str, unchanged_host: None) -> None:
    stubborn = python_container(f"""
        import signal, time  # {token}
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("waiting", flush=True)
        time.sleep(3600)
    """)
    pods = [make_pod("job-worker-0", "job-worker", [stubborn], grace=1)]
    output = io.StringIO()
    started = time.monotonic()
    outcome = run_pods(pods, options(tmp_path, output, success_pods=["job-worker-0"],
                                     timeout_seconds=1.0, maximum_grace_seconds=0.5))
    assert outcome.exit_code == 1
    assert outcome.ending == "timed out"
    assert "timed out after 1 s before training succeeded (still waiting for: job-worker-0)" \
        in output.getvalue()
    assert time.monotonic() - started < 300  # not the container's hour of sleep


# What the compiled jobs ask for (Pod Security "restricted").
RESTRICTED = {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}

DAEMONIZING = """
    import subprocess, sys, time  # {token}
    # A process that leaves the container's session and process group, as a daemon does.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "{token}", "daemon"],
                     start_new_session=True)
    print("ready", flush=True)
    time.sleep(3600)
"""

INTERRUPTED_RUN = """
import dataclasses, sys
sys.path.insert(0, {tests!r})
from test_local_run_runtime import (DAEMONIZING, LAUNCHER_CONFIG_MAPS, RESTRICTED, dns_pods,
                                    make_pod, python_container)
from tfcompile.compiler.local_run import LocalRunOptions, run_pods
from pathlib import Path
from typing import Any
pods = dns_pods({token!r})
pods.append(make_pod("job-ps-0", "job-ps",
                     [python_container(DAEMONIZING.format(token={token!r}))]))
pods = [dataclasses.replace(pod, spec={{"securityContext": RESTRICTED}}) for pod in pods]
outcome = run_pods(pods, LocalRunOptions(temporary_directory=Path({tmp!r}),
                                         maximum_grace_seconds=1,
                                         config_maps=LAUNCHER_CONFIG_MAPS))
print("exit code", outcome.exit_code, outcome.ending, flush=True)
sys.exit(outcome.exit_code)
"""


def start_runner_until_ready(tmp_path: Path, token: str) -> tuple[subprocess.Popen[str], str]:
    script = INTERRUPTED_RUN.format(tests=str(Path(__file__).parent), token=token,
                                    tmp=str(tmp_path))
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    assert runner.stdout is not None
    seen = []
    for line in runner.stdout:
        seen.append(line)
        if line.startswith("job-ps-0") and line.rstrip().endswith("| ready"):
            break
    assert _processes_mentioning([token]), "".join(seen)
    return runner, "".join(seen)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_everything_and_cleans_up(
        tmp_path: Path, token: str, unchanged_host: None, number: signal.Signals) -> None:
    runner, seen = start_runner_until_ready(tmp_path, token)
    runner.send_signal(number)
    rest, _ = runner.communicate(timeout=30)
    text = seen + rest
    assert runner.returncode == 128 + number, text
    assert f"interrupted by {number.name}; stopping the pods" in text
    assert f"exit code {128 + number} interrupted" in text


def wait_until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still {what} after {seconds:g} s"
        time.sleep(0.1)


def test_a_killed_runner_leaves_no_pod_process_or_file(
        tmp_path: Path, token: str, unchanged_host: None) -> None:
    """SIGKILL cannot be caught: the run's guard sees the runner go and removes its pods (which
    run as a user other than root, one of them with a daemon in a session of its own), their
    network and the run's files."""
    runner, _ = start_runner_until_ready(tmp_path, token)
    wait_until(lambda: _processes_mentioning([f"{token} daemon"]), 120,
               "waiting for the daemon")  # its pod may start after the one that is ready
    assert len(_processes_mentioning([f"{token} daemon"])) == 1
    runner.kill()
    runner.communicate(timeout=10)
    wait_until(lambda: not _processes_mentioning([token]) and not list(tmp_path.iterdir())
               and not _podman_objects()["pod ps"], 120, "finding the run's pods or files")


def test_a_command_the_image_lacks_fails_its_start_and_then_the_run(
        tmp_path: Path, token: str, unchanged_host: None) -> None:
    output = io.StringIO()
    missing = python_container(f"# {token}", mounts=[STATE_MOUNT])
    missing = dataclasses.replace(missing, command=[f"no-such-program-{token}"], args=["x"])
    outcome = run_pods([make_pod("job-worker-0", "job-worker", [missing])],
                       options(tmp_path, output, restart_limit=0))
    text = output.getvalue()
    assert outcome.exit_code == 1, text
    assert re.search(rf"job-worker-0 \| .*no-such-program-{token}.*not found", text), text
    assert re.search(r"job-worker-0 exited with status 12[67] after 0 restart\(s\); the limit "
                     r"is 0", text), text


def test_an_image_that_is_not_there_fails_the_start_with_podmans_words(
        tmp_path: Path, token: str, unchanged_host: None) -> None:
    output = io.StringIO()
    absent = dataclasses.replace(python_container(f"# {token}"),
                                 image=f"localhost/tfcompile-test/absent-{token}:1")
    raw = {"containers": [{"name": "tensorflow", "imagePullPolicy": "Never"}]}
    pod = dataclasses.replace(make_pod("job-worker-0", "job-worker", [absent]), spec=raw)
    outcome = run_pods([pod], options(tmp_path, output, restart_limit=0))
    text = output.getvalue()
    assert outcome.exit_code == 1, text
    assert f"absent-{token}:1: image not known" in text


def test_a_setup_failure_ends_with_exit_1_and_leaves_nothing(
        tmp_path: Path, token: str, unchanged_host: None, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path.parent / f"{tmp_path.name}-storage.conf"
    broken.write_text("[storage\n")
    output = io.StringIO()
    pods = [make_pod("job-worker-0", "job-worker", [python_container(f"# {token}")])]
    with monkeypatch.context() as patch:
        patch.setenv("CONTAINERS_STORAGE_CONF", str(broken))
        outcome = run_pods(pods, options(tmp_path, output))
    broken.unlink()
    assert (outcome.exit_code, outcome.ending) == (1, "setup failed"), output.getvalue()
    assert "could not set up the run: `podman info --format` failed" in output.getvalue()


def test_an_unexpected_error_still_stops_and_removes_everything(
        tmp_path: Path, token: str, unchanged_host: None, monkeypatch: pytest.MonkeyPatch) -> None:
    output = io.StringIO()

    def broken(pod: supervisor.PodRun) -> bool:
        # Fail only once the container runs, however long a loaded machine takes to start it.
        deadline = time.monotonic() + 60
        while "job-worker-0 | up" not in output.getvalue() and time.monotonic() < deadline:
            time.sleep(0.1)
        raise RuntimeError("unexpected")

    monkeypatch.setattr(supervisor.PodRun, "succeeded", broken)
    code = f"import time  # {token}\nprint('up', flush=True)\ntime.sleep(3600)"
    pods = [make_pod("job-worker-0", "job-worker", [python_container(code)], grace=0)]
    with pytest.raises(RuntimeError, match="unexpected"):
        run_pods(pods, options(tmp_path, output, success_pods=["job-worker-0"]))
    assert "job-worker-0 | up" in output.getvalue()
