"""Where each value of a job file was: positions by field path, and a problem's `file:line:col`.

The loader records them while it copies a parsed document into plain data (`plain_data.py`);
a `LoadedJob` keeps them, so that a problem found later (a name too long, a sweep's trial) is
located too. Apart from the copier, which reads ruamel.yaml's nodes: the compiler proper holds
positions and imports no YAML library.
"""

from __future__ import annotations

from .problems import FieldPath, Location


class Locations:
    """Positions of the values (and keys) of one YAML document, by field path."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._values: dict[FieldPath, tuple[int, int]] = {}
        self._keys: dict[FieldPath, tuple[int, int]] = {}
        self._collections: set[FieldPath] = set()

    def record(
        self,
        path: FieldPath,
        value: tuple[int, int],
        key: tuple[int, int] | None,
        collection: bool = False,
    ) -> None:
        self._values.setdefault(path, value)
        if key is not None:
            self._keys.setdefault(path, key)
        if collection:
            self._collections.add(path)

    def locate(self, path: FieldPath, *, key: bool = False) -> Location:
        """The position of `path`, or of its nearest parent that the file has. A mapping or
        list is located at its key (`roles:`), a scalar at its value."""
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            on_key = key if end == len(path) else True
            table = self._keys if on_key or prefix in self._collections else self._values
            if prefix in table:
                line, column = table[prefix]
                return Location(self.file, line + 1, column + 1)
            if prefix in self._values:
                line, column = self._values[prefix]
                return Location(self.file, line + 1, column + 1)
        return Location(self.file, 1, 1)
