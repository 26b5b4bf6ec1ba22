"""Text from a cluster reaches the terminal escaped: `printable`, and every place that prints such
text (`status`, `validate --server`, kubectl's and kustomize's errors, the console of `run-local`
and of the local node).

`status` and `validate --server` run here as the command a user types, against a stand-in
kubectl on PATH that answers what a cluster whose users wrote terminal escapes would answer
(the cluster tier shows `status` against a real API server).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

import pytest

from tests.conftest import OUTPUT
from tfcompile.compiler.checking.validation.report import ObjectProblem, ValidationReport
from tfcompile.compiler.local_run.console import Console
from tfcompile.compiler.printable import printable
from tfcompile.compiler.rendering.kustomize import kustomize_message

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")

# What a hostile pod or user can put into text a cluster hands back, and how it is printed.
HOSTILE = {
    "\x1b[2J\x1b[H": "\\x1b[2J\\x1b[H",  # CSI: clear the screen, cursor home
    "\x1b]0;pwned\x07": "\\x1b]0;pwned\\x07",  # OSC: set the window title, ended by BEL
    "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\":  # OSC 8: a hidden hyperlink
        "\\x1b]8;;https://example.com\\x1b\\link\\x1b]8;;\\x1b\\",
    "\x1b]52;c;ZWNobyBoaQ==\x07": "\\x1b]52;c;ZWNobyBoaQ==\\x07",  # OSC 52: write the clipboard
    "\x07": "\\x07",  # BEL
    "failed\rsucceeded": "failed\\rsucceeded",  # CR: the second word hides the first
    "tab\there": "tab\\there",
    "line\nforged": "line\\nforged",
    "\x9b2J": "\\x9b2J",  # C1 CSI in one character
    "\x85next": "\\x85next",  # C1 NEL
    "\x7f": "\\x7f",  # DEL
    "abc\u202edcba": "abc\\u202edcba",  # RIGHT-TO-LEFT OVERRIDE
    "\u2066isolated\u2069": "\\u2066isolated\\u2069",  # LEFT-TO-RIGHT ISOLATE ... POP
    "\u200fmark": "\\u200fmark",  # RIGHT-TO-LEFT MARK
    "zero\u200bwidth": "zero\\u200bwidth",  # ZERO WIDTH SPACE
    "para\u2029graph": "para\\u2029graph",  # PARAGRAPH SEPARATOR
    "bytes\udcff": "bytes\\udcff",  # a byte that was not UTF-8, decoded with surrogateescape
    "\U000e0041tag": "\\U000e0041tag",  # TAG LATIN CAPITAL LETTER A (invisible)
}


def controls(text: str) -> list[str]:
    """The characters a terminal would act on or hide (none may be printed)."""
    return [character for character in text
            if unicodedata.category(character) in {"Cc", "Cf", "Cs", "Zl", "Zp"}
            and character != "\n"]


@pytest.mark.parametrize(("raw", "shown"), HOSTILE.items())
def test_every_control_character_is_escaped_not_dropped(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable(shown) == shown  # escaping twice changes nothing


def test_ordinary_text_of_every_script_is_printed_as_it_is() -> None:
    for text in ("worker-0: failed 2f81910aa15a exit 3 after 2 restarts", "Grüße, 東京, مرحبا",
                 "emoji \U0001f680", "C:\\path\\x1b is a backslash, not an escape", ""):
        assert printable(text) == text


def test_bytes_a_program_wrote_are_escaped_as_written() -> None:
    """Read without decoding, a carriage return is still one (text mode would make it a line
    feed), and a byte that is not UTF-8 shows as itself."""
    assert printable(b"kubectl: \x1b[31mred\r\xff\xe2\x80\xae") == \
        "kubectl: \\x1b[31mred\\r\\xff\\u202e"


def test_a_message_of_several_lines_keeps_its_lines_when_asked() -> None:
    assert printable("first\x1b[31m\nsecond\r", keep_newlines=True) == "first\\x1b[31m\nsecond\\r"
    assert printable("first\nsecond") == "first\\nsecond"


# A stand-in for kubectl: `config view` names the namespace; `get` prints what a cluster whose
# pods wrote escapes holds; `proxy --unix-socket` serves an API server that refuses with them.
FAKE_KUBECTL = textwrap.dedent('''\
    import http.server, json, os, socketserver, sys

    HOSTILE = json.loads(os.environ["HOSTILE_TEXT"])
    arguments = sys.argv[1:]
    if arguments[:2] == ["config", "view"]:
        print("default")
    elif arguments[:1] == ["kustomize"]:
        os.execv(os.environ["REAL_KUBECTL"], ["kubectl", *arguments])
    elif arguments[:1] == ["get"]:
        if os.environ.get("FAKE_GET_FAILS"):
            sys.stderr.write("error: the server says " + HOSTILE + "\\n")
            sys.exit(1)
        namespace = arguments[arguments.index("--namespace") + 1]
        items = json.loads(os.environ["FAKE_ITEMS"]) if namespace == "default" else []
        print(json.dumps({"items": items}))
    elif arguments[:1] == ["proxy"]:
        path = arguments[1].split("=", 1)[1]

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self, status, body, warning=None):
                data = json.dumps(body).encode()
                self.send_response(status)
                if warning:
                    self.send_header("Warning", '299 - "' + warning + '"')
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/version":
                    self.answer(200, {"major": "1", "minor": "33"})
                else:
                    kinds = ["ConfigMap", "Service", "ServiceAccount", "StatefulSet", "Role",
                             "RoleBinding", "NetworkPolicy", "PersistentVolumeClaim"]
                    self.answer(200, {"resources": [
                        {"kind": kind, "name": kind.lower() + "s", "namespaced": True}
                        for kind in kinds]})

            def do_PATCH(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.answer(422, {
                    "kind": "Status", "reason": "Invalid",
                    "message": "refused: " + HOSTILE,
                    "details": {"causes": [{"field": "metadata.name" + HOSTILE,
                                            "message": "Invalid value: " + HOSTILE}]}},
                    warning="the webhook says \\x1b]0;pwned\\x07\\x9b")

            def log_message(self, *arguments):
                pass

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

            def get_request(self):
                connection, _ = super().get_request()
                return connection, ("local", 0)

        Server(path, Handler).serve_forever()
    ''')

ATTACK = "\x1b]0;pwned\x07\x1b[2J\rok\u202eevil\x9b"


def fake_kubectl(tmp_path: Path, items: list[dict[str, object]],
                 fails: bool = False) -> dict[str, str]:
    """PATH with the stand-in kubectl first, and what it is to answer."""
    directory = tmp_path / "bin"
    directory.mkdir(exist_ok=True)
    kubectl = directory / "kubectl"
    kubectl.write_text(f"#!{sys.executable}\n" + FAKE_KUBECTL)
    kubectl.chmod(0o755)
    real = shutil.which("kubectl")
    assert real is not None, "kubectl is needed on PATH (it renders with `kubectl kustomize`)"
    environment = {**os.environ, "PATH": f"{directory}:{os.environ['PATH']}",
                   "REAL_KUBECTL": real, "HOSTILE_TEXT": json.dumps(ATTACK),
                   "FAKE_ITEMS": json.dumps(items)}
    if fails:
        environment["FAKE_GET_FAILS"] = "1"
    return environment


def state_items() -> list[dict[str, object]]:
    """A job whose pod wrote escapes into its record and whose revision annotation holds some."""
    labels = {"tfcompile.dev/job": "mnist", "tfcompile.dev/role": "worker"}
    template = {"metadata": {"annotations": {"tfcompile.dev/revision": "abc" + ATTACK}}}
    return [
        {"kind": "StatefulSet", "metadata": {"name": "mnist-worker", "namespace": "default",
                                              "labels": labels,
                                              "annotations": {"tfcompile.dev/replicas": "2"}},
         "spec": {"replicas": 2, "template": template}},
        {"kind": "ConfigMap", "metadata": {"name": "mnist-state", "namespace": "default",
                                            "labels": {"tfcompile.dev/job": "mnist"},
                                            "annotations": {"tfcompile.dev/success-tasks":
                                                            "worker-0"}},
         "data": {"worker-0": f"failed abc{ATTACK} exit 3 after 2 restarts {ATTACK}",
                  f"worker-1{ATTACK}": "x"}},
    ]


@pytest.mark.slow
def test_status_prints_what_pods_wrote_escaped(tmp_path: Path) -> None:
    environment = fake_kubectl(tmp_path, state_items())
    completed = subprocess.run([TFCOMPILE, "status", "-o", str(OUTPUT)], capture_output=True,
                               text=True, check=False, timeout=120, env=environment)
    assert completed.returncode == 0, completed.stderr
    assert controls(completed.stdout + completed.stderr) == []
    shown = printable(ATTACK)
    assert f"revision deployed abc{shown}, committed" in completed.stdout
    assert f"failed worker-0: exit 3 after 2 restarts {shown}" in completed.stdout
    # JSON escapes them itself.
    as_json = subprocess.run([TFCOMPILE, "status", "--json", "-o", str(OUTPUT)],
                             capture_output=True, text=True, check=False, timeout=120,
                             env=environment)
    assert controls(as_json.stdout) == []
    found = {status["name"]: status for status in json.loads(as_json.stdout)}
    assert found["mnist"]["deployed_revision"] == "abc" + ATTACK


@pytest.mark.slow
def test_kubectl_s_error_is_printed_escaped(tmp_path: Path) -> None:
    completed = subprocess.run([TFCOMPILE, "status", "-o", str(OUTPUT)], capture_output=True,
                               text=True, check=False, timeout=120,
                               env=fake_kubectl(tmp_path, [], fails=True))
    assert completed.returncode == 1
    assert completed.stderr.startswith("tfcompile: status: kubectl get failed: error: the "
                                       f"server says {printable(ATTACK)}")
    assert controls(completed.stderr) == []


@pytest.mark.slow
def test_validate_server_prints_the_server_s_reasons_and_warnings_escaped(
        tmp_path: Path) -> None:
    completed = subprocess.run(
        [TFCOMPILE, "validate", "--server", str(OUTPUT / "mnist")], capture_output=True,
        text=True, check=False, timeout=120, env=fake_kubectl(tmp_path, []))
    assert completed.returncode == 1, completed.stderr
    assert controls(completed.stdout + completed.stderr) == []
    assert f"metadata.name{printable(ATTACK)}: Invalid value" in completed.stdout
    assert "the API server warns: the webhook says \\x1b]0;pwned\\x07" in completed.stdout


def test_kustomize_s_message_is_escaped_line_by_line() -> None:
    quoted = json.dumps(f"accumulating resources: {ATTACK}\nsecond line\x1b[0m")
    message = kustomize_message(f'E1126 12:00:00.000 1 run.go:72] "command failed" err={quoted}')
    assert message == f"accumulating resources: {printable(ATTACK)}\nsecond line\\x1b[0m"


def test_a_validation_report_prints_every_line_escaped() -> None:
    report = ValidationReport(
        directory=Path("output/job"), kubernetes_version="1.33", objects=[],
        problems=[ObjectProblem(f"ConfigMap/x{ATTACK}", f"refused {ATTACK}")], prerequisites=[],
        notes=[f"note {ATTACK}"])
    text = report.to_text()
    assert controls(text) == []
    assert f"  error: ConfigMap/x{printable(ATTACK)}: refused {printable(ATTACK)}" in text


def test_the_console_prints_pod_output_and_notices_escaped() -> None:
    stream = io.StringIO()
    console = Console(stream, prefix_width=12)
    console.pod_line("worker-0", f"epoch 1 {ATTACK}")
    console.notice(f"worker-0 exited: {ATTACK}")
    console.plain(f"node-agent: API server: 403: {ATTACK}\nforged line")
    lines = stream.getvalue().split("\n")
    assert lines == [f"worker-0     | epoch 1 {printable(ATTACK)}",
                     f"run-local: worker-0 exited: {printable(ATTACK)}",
                     f"node-agent: API server: 403: {printable(ATTACK)}\\nforged line", ""]
