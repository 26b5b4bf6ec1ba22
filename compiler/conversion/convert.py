"""`tfcompile convert`: read a TFJob file, convert its one TFJob, hold the job to the spec.

Reading goes through the spec's hostile-input reader (`read_plain_documents`: a regular file
of at most 256 KiB of UTF-8, the token limits, no explicit tags, strings the API server takes),
so a file that is not a TFJob is a located problem, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tfcompile.spec.loading import display_path, read_plain_documents
from tfcompile.spec.positions import Locations
from tfcompile.spec.problems import LocatedProblem, Location, SpecError

from .checking import hold_to_spec
from .mapping import convert_tfjob
from .notes import Findings
from .writing import job_text


@dataclass(frozen=True)
class Conversion:
    """The job file's text and the notes, each at its TFJob field's position."""

    text: str
    notes: list[LocatedProblem]


def _located(entries: list[tuple[tuple[str | int, ...], str]],
             locations: Locations) -> list[LocatedProblem]:
    located = [LocatedProblem(locations.locate(path), path, message)
               for path, message in entries]
    return sorted(located, key=lambda entry: (entry.location.line, entry.location.column))


def convert_file(path: Path) -> Conversion:
    """The job converted from the TFJob in `path`; raises `SpecError` with every problem."""
    shown = display_path(path)
    documents = [(data, locations) for data, locations in read_plain_documents(path)
                 if data is not None]
    if len(documents) != 1:
        line = 1 if not documents else documents[1][1].locate(()).line
        raise SpecError([LocatedProblem(Location(shown, line, 1), (),
                                        f"the file has {len(documents)} documents; convert "
                                        "reads a file of one TFJob")])
    tfjob, locations = documents[0]
    converted = convert_tfjob(tfjob)
    findings: Findings = converted.findings
    job = converted.job
    if job is not None:
        job = hold_to_spec(job, findings)
    if job is None:
        raise SpecError(_located(findings.problems, locations))
    notes = _located(findings.notes, locations)
    return Conversion(job_text(job, path.name, notes), notes)
