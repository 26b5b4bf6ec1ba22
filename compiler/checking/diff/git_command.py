"""git as `diff` runs it: no setting of the repository starts a program, and no object is
fetched.

`diff` runs in CI on a clone it did not make, with a BASE a pull request may name, so the
repository's configuration is input too. What `diff` asks of git (`rev-parse` of a commit,
`cat-file --batch-check` and `--batch` by object id) runs nothing by itself: `cat-file` applies
no textconv or filter driver unless asked to (`--textconv`, `--filters`), no hook runs, and no
pager starts when output is not a terminal. What remains, and how each is closed:

- `core.fsmonitor` runs its program (or starts the fsmonitor daemon) whenever git reads the
  index; BASE syntax that reaches the index (`:0:path`) is refused before git sees it, and
  `-c core.fsmonitor=` turns it off besides: an empty value is "no hook" for gits before 2.36
  and false since (the word `false` would be a program's name to the older ones);
- `-c core.hooksPath=/dev/null`: no hook, whatever a command would run;
- a partial clone fetches a missing object from its promisor remote by starting `git fetch`,
  which would run the transport the remote names (`core.sshCommand`, a remote helper, `ext::`,
  a credential helper). `GIT_NO_LAZY_FETCH=1` stops git 2.44 and later from starting the fetch
  at all; older gits start it, and `GIT_ALLOW_PROTOCOL` set empty makes it refuse every
  transport before connecting or starting anything (it overrides `protocol.*.allow`), so the
  object stays missing on every version. git then ends the read (`could not fetch … from
  promisor remote`), and `git_objects` says which path is not in this clone (exit 2);
- `GIT_TERMINAL_PROMPT=0` and `--no-pager`: git never waits for a person.

The user's system and global configuration are still read (`GIT_CONFIG_NOSYSTEM` is not set):
CI images keep `safe.directory` there, without which git refuses a checkout another user owns;
nothing in them can start a program in these commands once the settings above are given on the
command line, which takes precedence over every file.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import DiffInputError

SETTINGS = ("--no-pager", "-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null")
ENVIRONMENT = {"GIT_NO_LAZY_FETCH": "1", "GIT_ALLOW_PROTOCOL": "", "GIT_TERMINAL_PROMPT": "0"}


def run_git(arguments: list[str], directory: Path, stdin: bytes | None = None
            ) -> subprocess.CompletedProcess[bytes]:
    """git with `SETTINGS` and `ENVIRONMENT`, its output captured (its messages are not shown:
    they may echo BASE or a file's name unescaped)."""
    try:
        return subprocess.run(["git", *SETTINGS, *arguments], cwd=directory, input=stdin,
                              capture_output=True, check=False,
                              env={**os.environ, **ENVIRONMENT})
    except FileNotFoundError:
        raise DiffInputError("git is not installed; diff reads BASE with it") from None


def git_output(arguments: list[str], directory: Path) -> bytes | None:
    """What git printed, or None when it failed."""
    process = run_git(arguments, directory)
    return process.stdout if process.returncode == 0 else None
