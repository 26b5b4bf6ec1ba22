"""A git server over smart HTTP on loopback, for the GitOps controllers of the local control plane.

Flux's source-controller speaks git through go-git, which knows only smart HTTP (and SSH): neither
`git daemon` nor a static ("dumb") HTTP server will do, and Argo CD's repo-server is happiest with
the same URL. Git ships the smart-HTTP protocol as a CGI program, `git http-backend`; this is the
small web server in front of it. Every bare repository under the root (`NAME.git`) is served at
`http://127.0.0.1:PORT/NAME.git`, fetch and push, without authentication: it listens on loopback
only, for the tests and for trying the controllers by hand (`scripts/control-plane.sh up
--gitops ...`).

Only the standard library and `git` are used. Request bodies are de-chunked (git sends large
pushes with chunked transfer encoding, which a CGI program cannot read) and passed on with their
content encoding, which http-backend undoes itself.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

CGI_TIMEOUT_SECONDS = 300


class GitHandler(BaseHTTPRequestHandler):
    """GET and POST of git's smart-HTTP protocol, handed to `git http-backend`."""

    protocol_version = "HTTP/1.1"
    server: GitServer

    def do_GET(self) -> None:
        self.run_backend()

    def do_POST(self) -> None:
        self.run_backend()

    def request_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def run_backend(self) -> None:
        target = urlsplit(self.path)
        body = self.request_body() if self.command == "POST" else b""
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            # Pushes are allowed (http-backend refuses them to anonymous users otherwise).
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.receivepack",
            "GIT_CONFIG_VALUE_0": "true",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": target.path,
            "QUERY_STRING": target.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        for header, variable in (("Git-Protocol", "GIT_PROTOCOL"),
                                 ("Content-Encoding", "HTTP_CONTENT_ENCODING")):
            if self.headers.get(header):
                environment[variable] = self.headers[header]
        try:
            completed = subprocess.run(
                [self.server.git, "http-backend"], input=body, capture_output=True,
                env=environment, timeout=CGI_TIMEOUT_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            self.send_error(504, "git http-backend took too long")
            return
        head, separator, content = completed.stdout.partition(b"\r\n\r\n")
        if not separator:
            head, separator, content = completed.stdout.partition(b"\n\n")
        if not separator:
            self.log_message("git http-backend failed: %s",
                             completed.stderr.decode(errors="replace").strip())
            self.send_error(500, "git http-backend failed")
            return
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split(" ", 1)[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            if name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


class GitServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, root: Path, git: str) -> None:
        super().__init__(("127.0.0.1", port), GitHandler)
        self.root = root
        self.git = git


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--root", type=Path, required=True,
                        help="the directory whose NAME.git bare repositories are served")
    parser.add_argument("--port", type=int, required=True, help="the port on 127.0.0.1")
    arguments = parser.parse_args()
    git = shutil.which("git")
    if git is None:
        print("git is needed on PATH (Debian/Ubuntu: apt-get install git)", file=sys.stderr)
        return 1
    server = GitServer(arguments.port, arguments.root.resolve(), git)
    print(f"serving {server.root} at http://127.0.0.1:{arguments.port}/", file=sys.stderr,
          flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
