"""A diff's result as text for a terminal, or as markdown for a pull request.

Every value that comes from the files (job, role, object and component names) is printed
through `printable`, so a hostile output tree cannot send a terminal an escape sequence; in
markdown each is also a code span, fenced by more backticks than it holds, so it cannot become
a link, an image or HTML in the pull request. Jobs are printed in name order and each line's
items in a fixed order: the same trees give the same bytes. A count longer than a real one
(`SHOWN_DIGITS`) is shown by its ends and its length: a limit of millions of digits in the
files must not make a report of megabytes (a pull request's summary holds one MiB).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal

from tfcompile.compiler.printable import printable

from .comparison import WITH_THE_JOB, JobChange, RoleChange

ARROW = "→"
SHOWN_DIGITS = 30
"""Counts up to this many digits are printed whole (a 64-bit count has at most 20)."""
_BACKTICKS = re.compile(r"`+")


def code(value: str) -> str:
    """`value` as a markdown code span, whatever backticks it holds."""
    text = printable(value)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def number(value: Decimal) -> str:
    """A whole number as digits, or by its ends and its length when longer than
    `SHOWN_DIGITS`."""
    text = f"{value:f}"
    digits = len(text.lstrip("-"))
    if digits <= SHOWN_DIGITS:
        return text
    return f"{text[:-digits + 6]}…{text[-6:]} ({digits:,} digits)"


def _count(value: int | None) -> str:
    return "none" if value is None else str(value)


def _replicas(role: RoleChange, name: Callable[[str], str]) -> str:
    return (f"{name(role.role)} {_count(role.replicas_before)} {ARROW} "
            f"{_count(role.replicas_after)}")


def _with_the_job(change: JobChange, name: Callable[[str], str]) -> str:
    causes = ([f"{', '.join(name(role) for role in change.roles_changed)} changed"]
              if change.roles_changed else [])
    causes += ["a role added or removed"] if change.roles_added_or_removed else []
    return f"{WITH_THE_JOB} ({'; '.join(causes)})" if causes else WITH_THE_JOB


def _lines(change: JobChange, name: Callable[[str], str], strong: Callable[[str], str]
           ) -> list[str]:
    lines = []
    grouped: dict[tuple[str, ...], list[str]] = {}
    for role in change.restarting:  # roles restarting for the same reasons on one line
        grouped.setdefault(role.restart_reasons, []).append(name(role.role))
    for reasons, roles in grouped.items():
        shown = [_with_the_job(change, name) if reason == WITH_THE_JOB else reason
                 for reason in reasons]
        lines.append(f"{strong('restarts')} {', '.join(roles)}: {', '.join(shown)}")
    if change.rescaled:
        lines.append("replicas: " + ", ".join(_replicas(role, name) for role in change.rescaled))
    if change.gpus_before != change.gpus_after:
        lines.append(f"GPUs requested: {number(change.gpus_before)} {ARROW} "
                     f"{number(change.gpus_after)}")
    for recreation in change.recreations:
        lines.append(f"{strong('recreates')} StatefulSet {name(recreation.statefulset)}: "
                     f"{', '.join(recreation.fields)} cannot change in place (`tfcompile "
                     "build` refuses it without --allow-recreate)")
    for claim in change.deleted_claims:
        lines.append(f"{strong('deletes claim')} {name(claim)} and the data on it")
    for claim in change.kept_claims:
        lines.append(f"keeps claim {name(claim)} and the data on it (whenDeleted: Retain; "
                     "Argo CD and Flux leave it: delete it with kubectl when done)")
    if change.components_added or change.components_removed:
        parts = ([f"added {', '.join(name(c) for c in change.components_added)}"]
                 if change.components_added else [])
        parts += ([f"removed {', '.join(name(c) for c in change.components_removed)}"]
                  if change.components_removed else [])
        lines.append(f"components: {'; '.join(parts)} (pods they patch restart)")
    if change.other_objects:
        lines.append("also changes: " + ", ".join(
            f"{kind} {name(object_name)} {what}"
            for kind, object_name, what in change.other_objects))
    if change.state == "changed" and not change.restarting:
        lines.append("no pod restarts" if not (change.components_added
                                               or change.components_removed)
                     else "no pod restarts from the compiled objects")
    return lines


def _named(change: JobChange, name: Callable[[str], str]) -> str:
    """The job as a reviewer knows it: its directory, and a sweep's trial by its values too
    (`sweep-1b70d81c (HIDDEN_LAYERS=5, LEARNING_RATE=0.01)`), the sweep's TensorBoard as that."""
    if change.trial_values:
        return (f"{name(change.job)} ("
                + ", ".join(name(f"{parameter}={value}")
                            for parameter, value in change.trial_values) + ")")
    if change.board_of is not None:
        return f"{name(change.job)} (the TensorBoard of sweep {name(change.board_of)})"
    return name(change.job)


def _headline(change: JobChange) -> str:
    if change.state == "created":
        return "created"
    if change.state == "deleted":
        return "deleted: its pods stop and its objects are pruned"
    return "changed"


def as_text(base: str, commit: str, changes: Sequence[JobChange]) -> str:
    out = [f"tfcompile diff: output at {printable(base)} ({commit[:12]}) {ARROW} working tree"]
    if not changes:
        out.append("no job changes")
    for change in changes:
        out.append(f"{_named(change, printable)}: {_headline(change)}")
        out.extend(f"  {line}" for line in _lines(change, printable, lambda word: word))
    return "\n".join(out) + "\n"


def as_markdown(base: str, commit: str, changes: Sequence[JobChange]) -> str:
    out = ["### tfcompile diff", "",
           f"What merging does to the jobs, from `output/` at {code(base)} "
           f"(`{commit[:12]}`) to this change.", ""]
    if not changes:
        out.extend(["No job changes.", ""])
    for change in changes:
        out.append(f"#### {_named(change, code)}: {_headline(change)}")
        out.append("")
        out.extend(f"- {line}" for line in _lines(change, code, lambda word: f"**{word}**"))
        out.append("")
    return "\n".join(out)
