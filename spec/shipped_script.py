"""The training script as a job ships it: each file's ConfigMap key, path under the mount, text.

Plain data, apart from `scripts.py`, which reads the files (confined to the job's repository):
the compiler proper builds the script's ConfigMap and volume from it, and reads no file.
"""

from __future__ import annotations

from dataclasses import dataclass

KEY_SEPARATOR = "__"
"""What stands for `/` in the ConfigMap key of a file in a nested folder of a script folder."""


@dataclass(frozen=True)
class ScriptFile:
    """One shipped file: its ConfigMap key, its path under the mount, and its text."""

    key: str
    path: str
    text: str


@dataclass(frozen=True)
class Script:
    """The training script (one file, or every file of a folder) shipped in a ConfigMap."""

    files: tuple[ScriptFile, ...]
    directory: bool = False

    @property
    def file_name(self) -> str:
        """The one file's name (a single-file script)."""
        return self.files[0].key
