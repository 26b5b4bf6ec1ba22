"""What a conversion says about the TFJob, each at the TFJob field it concerns.

A note is a field that has no equivalent (or changes meaning), a problem a field that stops
the conversion. Both name the TFJob's field (its path in the input), never its value: a TFJob
may hold credentials, and notes are printed and written into the job file's header.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tfcompile.spec.problems import FieldPath

OutputPath = tuple[str | int, ...]


@dataclass
class Findings:
    """Notes and problems of one conversion, and where each output field came from."""

    notes: list[tuple[FieldPath, str]] = field(default_factory=list)
    problems: list[tuple[FieldPath, str]] = field(default_factory=list)
    origins: dict[OutputPath, FieldPath] = field(default_factory=dict)

    def note(self, source: FieldPath, message: str) -> None:
        self.notes.append((source, message))

    def problem(self, source: FieldPath, message: str) -> None:
        self.problems.append((source, message))

    def came_from(self, output: OutputPath, source: FieldPath) -> None:
        """Record that the output field `output` (and what is under it, path for path) was
        the TFJob's `source`."""
        self.origins.setdefault(output, source)

    def source_of(self, output: OutputPath) -> FieldPath:
        """The TFJob field an output field came from: its own origin, or its nearest recorded
        parent's with the rest of the path appended (a copied subtree keeps its shape)."""
        for end in range(len(output), -1, -1):
            source = self.origins.get(output[:end])
            if source is not None:
                return (*source, *output[end:])
        return ()
