""""Did you mean …?": the one allowed name or value closest to a misspelt one, when one is
clearly closest.

A refused field name or enum value already lists what is allowed; a list of twenty-four fields
makes the reader search it for the one they meant. So the message names it too, when one
candidate stands out; when none does (a name of another tool, a guess), it says nothing more
than the list, since a wrong suggestion costs more than none.

How close is close enough:

- Case and word separators are slips, not spelling: `Replicas`, `mount_path`, `MOUNT-PATH` and
  `clusterip` are `replicas`, `mountPath` and `ClusterIP` with distance 0.
- Otherwise the Damerau-Levenshtein distance (optimal string alignment: one letter inserted,
  deleted, replaced, or two neighbours swapped, each counts 1) between the lower-case forms, at
  most a third of the candidate's length and never more than 2: one slip in `env` or `idle`
  (`evn`, `idel`), two in `onSuccess` or `release` (`onSucess`, `relese`); nothing but case
  for a name as short as `ps`, where one letter changed makes another word.
- The closest candidate must be alone at its distance: `abc` between `abd` and `abe` suggests
  neither.

The written text is compared, never shown: messages name only the candidate, which comes from
the allowed set (the written value may be a secret typed into the wrong field). Texts whose
lengths differ by more than 2 are not compared at all, so a long value costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

MOST_EDITS = 2
"""The largest distance suggested, for a candidate of six characters or more."""

_SEPARATORS = str.maketrans("", "", "_- ")


def _folded(text: str) -> str:
    """`text` in lower case without word separators: the form case and separator slips share."""
    return text.translate(_SEPARATORS).lower()


def edit_distance(first: str, second: str, *, limit: int = MOST_EDITS) -> int:
    """The optimal-string-alignment distance between `first` and `second`, or `limit + 1` when
    it is larger than `limit`. Texts whose lengths differ by more than `limit` are not compared,
    so the table is filled only for texts about as long as an allowed name."""
    if abs(len(first) - len(second)) > limit:
        return limit + 1
    previous_row: list[int] = []
    row = list(range(len(second) + 1))
    for index, letter in enumerate(first, start=1):
        before_previous, previous_row = previous_row, row
        row = [index, *([0] * len(second))]
        for other_index, other_letter in enumerate(second, start=1):
            cost = 0 if letter == other_letter else 1
            row[other_index] = min(previous_row[other_index] + 1, row[other_index - 1] + 1,
                                   previous_row[other_index - 1] + cost)
            swapped = (index > 1 and other_index > 1 and letter == second[other_index - 2]
                       and first[index - 2] == other_letter)
            if swapped:
                row[other_index] = min(row[other_index], before_previous[other_index - 2] + 1)
    return min(row[-1], limit + 1)


def _allowed_edits(candidate: str) -> int:
    return min(MOST_EDITS, len(candidate) // 3)


def closest(written: str, allowed: Iterable[str]) -> str | None:
    """The one candidate of `allowed` clearly closest to `written`, or None."""
    folded = _folded(written)
    best: list[tuple[int, str]] = []
    for candidate in dict.fromkeys(allowed):
        if candidate == written:
            return None  # written as allowed: what is wrong is not its spelling
        candidate_folded = _folded(candidate)
        distance = (0 if candidate_folded == folded
                    else edit_distance(folded, candidate_folded))
        if distance <= _allowed_edits(candidate_folded) or distance == 0:
            best.append((distance, candidate))
    if not best:
        return None
    best.sort(key=lambda found: found[0])
    if len(best) > 1 and best[0][0] == best[1][0]:
        return None
    return best[0][1]


def did_you_mean(written: object, allowed: Iterable[str]) -> str:
    """"; did you mean 'X'?" to end a message, or "" when nothing is clearly closest (or the
    value written is not text)."""
    if not isinstance(written, str):
        return ""
    found = closest(written, allowed)
    return f"; did you mean '{found}'?" if found is not None else ""
