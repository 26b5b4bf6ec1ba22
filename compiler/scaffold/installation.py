"""Where this tfcompile was installed from, as a pip requirement that CI can install again.

`tfcompile init` writes CI that installs tfcompile on every run. It must install the same
tfcompile that wrote the scaffold (else CI compiles different output than the developer
committed), from a place CI can reach. pip records where each distribution came from in
`direct_url.json` (PEP 610); this module turns that record into a requirement, or says why it
cannot and asks for `--tfcompile-requirement`:

- a VCS install (`pip install git+URL@REV`): `git+URL@COMMIT`, the commit pip resolved;
- an archive by URL: that URL, with its recorded hash;
- a local directory (an editable install, `pip install .`): CI cannot see this machine's
  directories, so only if the directory is a git checkout with an `origin` on a network
  host: `git+ORIGIN@HEAD`, and the user is told so;
- no record: installed from a package index, so `tfcompile==VERSION`.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

DISTRIBUTION = "tfcompile"

# Written into shell lines (`pip install "…"`) of YAML files: no quotes, no `$`, no backslash,
# no YAML comment or mapping marker, not an option.
_SAFE_REQUIREMENT = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!&()*+,;=%<>^|\- ]+")
_GIT_TIMEOUT_SECONDS = 10
_SCP_LIKE = re.compile(r"^(?P<user>[\w.-]+)@(?P<host>[\w.-]+):(?P<path>(?!//).+)$")


class InstallationError(Exception):
    """No requirement for CI can be derived; the message says why and what to pass instead."""


@dataclass(frozen=True)
class Requirement:
    """A pip requirement for CI, and a sentence for the user when it is not the obvious one."""

    text: str
    note: str | None = None


def tfcompile_requirement(explicit: str | None = None) -> Requirement:
    """`explicit` when given (checked), else what this installation records about itself."""
    if explicit is not None:
        return Requirement(checked_requirement(explicit, "--tfcompile-requirement"))
    try:
        distribution = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise InstallationError(
            "tfcompile is not installed as a distribution, so there is no record of where it "
            "came from; " + _ASK
        ) from None
    return requirement_of(distribution)


def requirement_of(distribution: metadata.Distribution) -> Requirement:
    """The requirement that reinstalls `distribution`, from its `direct_url.json`."""
    recorded = distribution.read_text("direct_url.json")
    if recorded is None:
        text = f"{DISTRIBUTION}=={distribution.version}"
        return Requirement(checked_requirement(text, "the installed version"))
    try:
        direct_url = json.loads(recorded)
    except json.JSONDecodeError:
        raise InstallationError(
            "the installation's direct_url.json is not valid JSON; " + _ASK) from None
    if not isinstance(direct_url, dict) or not isinstance(direct_url.get("url"), str):
        raise InstallationError("the installation's direct_url.json has no url; " + _ASK)
    url: str = direct_url["url"]
    subdirectory = direct_url.get("subdirectory")
    if isinstance(direct_url.get("vcs_info"), dict):
        return _from_vcs(url, direct_url["vcs_info"], subdirectory)
    if isinstance(direct_url.get("archive_info"), dict):
        return _from_archive(url, direct_url["archive_info"], subdirectory)
    if isinstance(direct_url.get("dir_info"), dict):
        return _from_directory(url)
    raise InstallationError(
        "the installation's direct_url.json names no VCS, archive or directory; " + _ASK)


def checked_requirement(text: str, origin: str) -> str:
    """`text` if it can be written into a CI shell line as it is; else `InstallationError`."""
    if (not _SAFE_REQUIREMENT.fullmatch(text) or text.startswith(("-", " ")) or ": " in text
            or " #" in text or text.endswith(" ")):
        raise InstallationError(
            f"{origin}: not usable as a pip requirement in CI: give one line without quotes, "
            "`$`, backquotes, backslashes, `: ` or ` #`, not starting with `-` (for example "
            '"tfcompile==0.1.0" or "git+https://host/team/tfcompile.git@COMMIT")'
        )
    return text


_ASK = (
    "pass --tfcompile-requirement with what CI should `pip install` (for example "
    '"git+https://host/team/tfcompile.git@COMMIT")'
)


def _from_vcs(url: str, vcs_info: dict[str, Any], subdirectory: Any) -> Requirement:
    vcs, commit = vcs_info.get("vcs"), vcs_info.get("commit_id")
    if not isinstance(vcs, str) or not isinstance(commit, str) or not commit:
        raise InstallationError(
            "the installation's direct_url.json names no VCS commit; " + _ASK)
    location = _without_credentials(url)
    if _is_local(location):
        raise InstallationError(
            f"tfcompile was installed from the {vcs} repository {location}, on this machine, "
            "which CI cannot reach; " + _ASK)
    text = f"{vcs}+{location}@{commit}{_subdirectory(subdirectory)}"
    return Requirement(checked_requirement(text, "the recorded VCS source"))


def _from_archive(url: str, archive_info: dict[str, Any], subdirectory: Any) -> Requirement:
    location = _without_credentials(url)
    if _is_local(location):
        raise InstallationError(
            f"tfcompile was installed from the file {location}, on this machine, which CI "
            "cannot reach; " + _ASK)
    fragments = []
    hashes = archive_info.get("hashes")
    legacy = archive_info.get("hash")
    if isinstance(hashes, dict) and isinstance(hashes.get("sha256"), str):
        fragments.append(f"sha256={hashes['sha256']}")
    elif isinstance(legacy, str) and "=" in legacy:
        fragments.append(legacy)
    if isinstance(subdirectory, str) and subdirectory:
        fragments.append(f"subdirectory={subdirectory}")
    text = location + ("#" + "&".join(fragments) if fragments else "")
    return Requirement(checked_requirement(text, "the recorded archive URL"))


def _from_directory(url: str) -> Requirement:
    parts = urlsplit(url)
    if parts.scheme != "file":
        raise InstallationError(
            "the installation's direct_url.json names a directory that is not a local path; "
            + _ASK)
    directory = Path(url2pathname(parts.path))
    cannot = (f"tfcompile was installed from the directory {directory}, which CI cannot "
              "reach")
    top = _git(directory, "rev-parse", "--show-toplevel")
    commit = _git(directory, "rev-parse", "HEAD")
    if top is None or commit is None:
        raise InstallationError(f"{cannot}, and it is not a git checkout git can read; " + _ASK)
    origin = _git(directory, "remote", "get-url", "origin")
    if origin is None:
        raise InstallationError(
            f"{cannot}, and its git checkout has no `origin` remote; " + _ASK)
    location = _git_url(origin)
    if location is None:
        raise InstallationError(
            f"{cannot}, and the `origin` of its git checkout is on this machine too; " + _ASK)
    try:
        inside = directory.resolve().relative_to(Path(top).resolve()).as_posix()
    except ValueError:
        raise InstallationError(f"{cannot}, and git places it outside its checkout; "
                                + _ASK) from None
    text = f"git+{location}@{commit}{_subdirectory(inside if inside != '.' else None)}"
    requirement = checked_requirement(text, "the checkout's origin and HEAD")
    changed = _git(directory, "status", "--porcelain", "--untracked-files=no")
    note = (
        f"tfcompile runs from the git checkout {directory}: the CI will install its HEAD "
        f"commit from its origin ({requirement}); push that commit"
        + ("; uncommitted changes in the checkout are not part of it" if changed else "")
    )
    return Requirement(requirement, note)


def _git(directory: Path, *arguments: str) -> str | None:
    """Output of `git -C directory ARGUMENTS`, or None when git fails or is missing."""
    try:
        completed = subprocess.run(
            ["git", "-C", str(directory), *arguments], capture_output=True, text=True,
            check=False, timeout=_GIT_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.strip()


def _git_url(origin: str) -> str | None:
    """`origin` as a URL pip can clone from elsewhere, without credentials; None if local."""
    scp = _SCP_LIKE.match(origin)
    if scp is not None and "://" not in origin:
        return f"ssh://{scp['user']}@{scp['host']}/{scp['path']}"
    location = _without_credentials(origin)
    if _is_local(location) or "://" not in location:
        return None
    return location


def _without_credentials(url: str) -> str:
    """`url` without a user and password, except the plain user of an SSH URL (`git@`)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    user, _, host = parts.netloc.rpartition("@")
    if parts.scheme == "ssh" and ":" not in user:
        return url
    return urlunsplit(parts._replace(netloc=host))


def _is_local(url: str) -> bool:
    return "://" not in url or urlsplit(url).scheme == "file"


def _subdirectory(subdirectory: Any) -> str:
    return f"#subdirectory={subdirectory}" if isinstance(subdirectory, str) and subdirectory else ""
