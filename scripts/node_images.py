"""Helpers of scripts/node-images.sh, with the standard library only.

    node_images.py mirror SUITE
        the Debian mirror this machine's apt uses for SUITE (its sources.list.d/*.sources or
        sources.list), printed as a URI
    node_images.py pip-settings DIRECTORY INSIDE
        this machine's pip configuration (`pip config list`: files and PIP_* variables) as
        lines for a pip run in a chroot: `env NAME=VALUE` and `bind HOST-DIRECTORY PATH`.
        Files the settings name (a certificate bundle) are copied into DIRECTORY, which the
        chroot sees as INSIDE; directories (find-links) are to be bind-mounted at PATH
        (created under DIRECTORY, a path inside the chroot under INSIDE)
    node_images.py layer DIRECTORY OUTPUT [--empty PATH]...
        a layer tar of DIRECTORY's tree, deterministic (sorted, numeric owners, whole-second
        times); each --empty PATH (relative) is kept as a directory without its contents
    node_images.py archive OUTPUT --config JSON (--tar FILE | --tree DIRECTORY
            | --overlay-upper DIRECTORY)...
        an OCI image archive (oci-layout, index.json, blobs) of one linux/amd64 image whose
        layers are, in order, the given layer tars and trees (an overlayfs upper directory's
        whiteouts become OCI whiteouts), uncompressed, and whose image config holds JSON as
        its `config` (Env, Cmd, Entrypoint, User, WorkingDir). The index names no image:
        `ctr images import --index-name NAME` gives it its name.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import BinaryIO

BLOCK = 512
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


# --- the Debian mirror -------------------------------------------------------------------------


def deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    stanza: dict[str, str] = {}
    key = ""
    for line in [*text.splitlines(), ""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, key = {}, ""
        elif line[0] in " \t" and key:
            stanza[key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            stanza[key] = value.strip()


def apt_sources(etc: Path) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """(URIs, suites, components) of each `deb` source, in apt's reading order."""
    lists = [etc / "sources.list"] if (etc / "sources.list").is_file() else []
    directory = etc / "sources.list.d"
    if directory.is_dir():
        lists += sorted(directory.glob("*.list")) + sorted(directory.glob("*.sources"))
    for path in lists:
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            for stanza in deb822_stanzas(text):
                if "deb" in stanza.get("types", "").split() and stanza.get(
                    "enabled", "yes"
                ).lower() not in ("no", "false"):
                    yield (
                        stanza.get("uris", "").split(),
                        stanza.get("suites", "").split(),
                        stanza.get("components", "").split(),
                    )
        else:
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if not words or words[0] != "deb":
                    continue
                words = words[1:]
                if words and words[0].startswith("["):  # options: [arch=amd64 signed-by=...]
                    while words and not words[0].endswith("]"):
                        words = words[1:]
                    words = words[1:]
                if len(words) >= 2:
                    yield [words[0]], [words[1]], words[2:]


def mirror(suite: str) -> int:
    for uris, suites, components in apt_sources(Path("/etc/apt")):
        if suite in suites and "main" in components and uris:
            print(uris[0])
            return 0
    print(
        f"no apt source for Debian {suite} (main) in /etc/apt/sources.list or "
        "/etc/apt/sources.list.d/",
        file=sys.stderr,
    )
    return 1


# --- pip's settings ----------------------------------------------------------------------------

# What a pip run in a chroot may take from this machine's configuration: where packages come
# from and how to reach it. Nothing that moves where pip installs.
PIP_SETTINGS = {
    "index-url",
    "extra-index-url",
    "find-links",
    "no-index",
    "trusted-host",
    "cert",
    "client-cert",
    "proxy",
    "timeout",
    "default-timeout",
    "retries",
    "only-binary",
    "prefer-binary",
    "pre",
}
PATH_SETTINGS = {"cert", "client-cert", "find-links", "index-url", "extra-index-url"}


def pip_configuration() -> dict[str, str]:
    """pip's merged settings for `pip install`: PIP_* variables over the [install] section over
    [global]."""
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    layers: dict[str, dict[str, str]] = {":env:": {}, "install": {}, "global": {}}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section in layers and name:
            try:
                parsed = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                parsed = value
            layers[section][name] = str(parsed)
    merged: dict[str, str] = {}
    for section in ("global", "install", ":env:"):
        merged.update(layers[section])
    return {name: value for name, value in merged.items() if name in PIP_SETTINGS}


def pip_settings(directory: Path, inside: str) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, value in sorted(pip_configuration().items()):
        words = []
        for word in value.split():
            path = Path(word.removeprefix("file://")) if name in PATH_SETTINGS else None
            if path is not None and path.is_absolute() and path.exists():
                count += 1
                moved = f"host-{count}-{path.name}"
                if path.is_dir():
                    (directory / moved).mkdir()
                    print(f"bind {path} {inside}/{moved}")
                else:
                    shutil.copyfile(path, directory / moved)
                prefix = "file://" if word.startswith("file://") else ""
                word = f"{prefix}{inside}/{moved}"
            words.append(word)
        print(f"env PIP_{name.upper().replace('-', '_')}={' '.join(words)}")
    return 0


# --- layers ------------------------------------------------------------------------------------


class HashingWriter(io.RawIOBase):
    """Writes through to a file, counting the bytes and hashing them."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.size = 0
        self.hash = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(data)
        self.file.write(view)
        self.hash.update(view)
        self.size += view.nbytes
        return view.nbytes


def walk(root: Path, relative: str = "") -> Iterator[tuple[str, Path]]:
    """(name in the layer, path) of everything under root, parents first, names sorted."""
    with os.scandir(root / relative if relative else root) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        child = f"{relative}/{name}" if relative else name
        path = root / child
        yield child, path
        if path.is_dir() and not path.is_symlink():
            yield from walk(root, child)


def tar_info(tar: tarfile.TarFile, path: Path, name: str) -> tarfile.TarInfo:
    info = tar.gettarinfo(str(path), arcname=name)
    info.uname = info.gname = ""
    info.mtime = int(info.mtime)
    return info


def write_tree(
    tar: tarfile.TarFile,
    root: Path,
    *,
    overlay_upper: bool = False,
    empty: frozenset[str] = frozenset(),
) -> None:
    """Add root's tree to tar. With overlay_upper, root is an overlayfs upper directory: a
    character device 0/0 is a deleted file (an OCI whiteout) and an opaque directory hides what
    lower layers hold under it."""
    skip: tuple[str, ...] = ()  # prefixes of paths whose contents stay out
    for name, path in walk(root):
        if skip and name.startswith(skip):
            continue
        status = path.lstat()
        if stat.S_ISSOCK(status.st_mode):
            continue
        if overlay_upper and stat.S_ISCHR(status.st_mode) and status.st_rdev == 0:
            parent, _, base = name.rpartition("/")
            whiteout = tarfile.TarInfo(f"{parent}/{WHITEOUT}{base}" if parent else WHITEOUT + base)
            whiteout.mtime = int(status.st_mtime)
            tar.addfile(whiteout)
            continue
        info = tar_info(tar, path, name)
        if info.isreg():
            with path.open("rb") as content:
                tar.addfile(info, content)
        else:
            tar.addfile(info)
        if info.isdir() and name in empty:
            skip = (*skip, name + "/")
        elif info.isdir() and overlay_upper and opaque(path):
            marker = tarfile.TarInfo(f"{name}/{OPAQUE}")
            marker.mtime = info.mtime
            tar.addfile(marker)


def opaque(path: Path) -> bool:
    for attribute in ("trusted.overlay.opaque", "user.overlay.opaque"):
        try:
            if os.getxattr(path, attribute, follow_symlinks=False) == b"y":
                return True
        except OSError:
            pass
    return False


def layer(directory: Path, output: Path, empty: list[str]) -> int:
    unfinished = output.with_name(output.name + ".partial")
    with (
        unfinished.open("wb") as file,
        tarfile.open(fileobj=file, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        write_tree(tar, directory, empty=frozenset(empty))
    unfinished.rename(output)
    return 0


# --- the OCI archive ---------------------------------------------------------------------------


class Archive:
    """An uncompressed tar written in one pass: a blob whose digest is known only once it is
    written gets a placeholder header, filled in afterwards (`blobs/sha256/<64 hex>` fits the
    header's name field)."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.names: set[str] = set()

    def member(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        self.file.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        self.file.write(data)
        self.pad(len(data))

    def pad(self, size: int) -> None:
        self.file.write(b"\0" * (-size % BLOCK))

    def blob(self, data: bytes) -> tuple[str, int]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.add_blob_name(digest)
        self.member(blob_path(digest), data)
        return digest, len(data)

    def add_blob_name(self, digest: str) -> bool:
        fresh = digest not in self.names
        self.names.add(digest)
        return fresh

    def streamed_blob(self, fill: Callable[[HashingWriter], None]) -> tuple[str, int]:
        start = self.file.tell()
        self.file.write(b"\0" * BLOCK)
        writer = HashingWriter(self.file)
        fill(writer)
        digest = "sha256:" + writer.hash.hexdigest()
        if not self.add_blob_name(digest):  # the same layer twice: keep one copy
            self.file.seek(start)
            self.file.truncate()
            return digest, writer.size
        self.pad(writer.size)
        end = self.file.tell()
        info = tarfile.TarInfo(blob_path(digest))
        info.size = writer.size
        info.mode = 0o644
        self.file.seek(start)
        self.file.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        self.file.seek(end)
        return digest, writer.size

    def close(self) -> None:
        self.file.write(b"\0" * (2 * BLOCK))


def blob_path(digest: str) -> str:
    return "blobs/" + digest.replace(":", "/")


def descriptor(media_type: str, digest: str, size: int, **extra: object) -> dict[str, object]:
    return {"mediaType": media_type, "digest": digest, "size": size, **extra}


def canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def copy_file(path: Path, writer: HashingWriter) -> None:
    with path.open("rb") as source:
        shutil.copyfileobj(source, writer, 1 << 20)


def tar_tree(path: Path, overlay_upper: bool, writer: HashingWriter) -> None:
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        write_tree(tar, path, overlay_upper=overlay_upper)


def archive(output: Path, config: dict[str, object], layers: list[tuple[str, Path]]) -> int:
    unfinished = output.with_name(output.name + ".partial")
    with unfinished.open("w+b") as file:
        out = Archive(file)
        out.member("oci-layout", canonical({"imageLayoutVersion": "1.0.0"}))
        descriptors = []
        for kind, path in layers:
            fill = partial(copy_file, path) if kind == "tar" else partial(
                tar_tree, path, kind == "overlay-upper"
            )
            digest, size = out.streamed_blob(fill)
            descriptors.append(descriptor(OCI_LAYER, digest, size))
        image_config = {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in descriptors]},
        }
        config_digest, config_size = out.blob(canonical(image_config))
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor(OCI_CONFIG, config_digest, config_size),
            "layers": descriptors,
        }
        manifest_digest, manifest_size = out.blob(canonical(manifest))
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                descriptor(
                    OCI_MANIFEST,
                    manifest_digest,
                    manifest_size,
                    platform={"architecture": "amd64", "os": "linux"},
                )
            ],
        }
        out.member("index.json", canonical(index))
        out.close()
    unfinished.rename(output)
    return 0


def layer_argument(kind: str) -> Callable[[str], tuple[str, Path]]:
    return lambda value: (kind, Path(value))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="node_images.py")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("mirror")
    command.add_argument("suite")
    command = commands.add_parser("pip-settings")
    command.add_argument("directory", type=Path)
    command.add_argument("inside")
    command = commands.add_parser("layer")
    command.add_argument("directory", type=Path)
    command.add_argument("output", type=Path)
    command.add_argument("--empty", action="append", default=[])
    command = commands.add_parser("archive")
    command.add_argument("output", type=Path)
    command.add_argument("--config", required=True, type=json.loads)
    for kind in ("tar", "tree", "overlay-upper"):
        command.add_argument(
            f"--{kind}",
            dest="layers",
            action="append",
            type=layer_argument(kind),
        )
    arguments = parser.parse_args(argv)
    if arguments.command == "mirror":
        return mirror(arguments.suite)
    if arguments.command == "pip-settings":
        return pip_settings(arguments.directory, arguments.inside)
    if arguments.command == "layer":
        return layer(arguments.directory, arguments.output, arguments.empty)
    if not arguments.layers:
        parser.error("archive: give at least one layer")
    return archive(arguments.output, arguments.config, arguments.layers)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
