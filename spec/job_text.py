"""What a job file's text says it is: the kind and API group of a job spec, and a cheap look.

`discovery.py` reads the first bytes of each YAML file and asks `looks_like_job_text` whether it
was meant to be a job spec (its docstring says why the look is wide); the models take `KIND`
from here. Apart from discovery, which reads files, so that the models (and the compiler proper,
which imports them) import no file system.
"""

from __future__ import annotations

KIND = "TrainingJob"
API_GROUP_WORD = "tfcompile"


def _scalar(text: str) -> str:
    """A one-line YAML scalar as written after a key: without its tag, quotes or comment."""
    value = text.strip()
    while value.startswith("!"):  # a tag: `!!str TrainingJob`
        value = value.partition(" ")[2].lstrip()
    if value[:1] in ("'", '"'):
        end = value.find(value[0], 1)
        return value[1:end] if end > 0 else value[1:]
    return value.split(" #", 1)[0].strip()


def _distance(first: str, second: str) -> int:
    """How many letters to insert, delete or change to make one text the other."""
    previous = list(range(len(second) + 1))
    for index, letter in enumerate(first, 1):
        current = [index]
        for other_index, other in enumerate(second, 1):
            current.append(min(previous[other_index] + 1, current[other_index - 1] + 1,
                               previous[other_index - 1] + (letter != other)))
        previous = current
    return previous[-1]


def close_to_kind(kind: str) -> bool:
    """Whether a `kind` looks like a misspelt `TrainingJob`."""
    letters = "".join(character for character in kind.lower() if character.isalnum())
    return ("train" in letters and "job" in letters) or _distance(letters, KIND.lower()) <= 2


def names_tfcompile(api_version: str) -> bool:
    """Whether an `apiVersion` names tfcompile's API group (`tfcompile.dev/v1alpha1`)."""
    return API_GROUP_WORD in api_version.split("/", 1)[0].lower()


def looks_like_job_text(head: str) -> bool:
    """Whether the start of a YAML file looks like it was meant to be a job spec (see the
    module's docstring)."""
    api_versions: list[str] = []
    kinds: list[str] = []
    for line in head.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or ":" not in stripped:
            continue
        key, _, value = stripped.partition(":")
        key = key.strip().strip("'\"")
        if key == "apiVersion":
            api_versions.append(_scalar(value))
        elif key == "kind":
            kinds.append(_scalar(value))
    if KIND in kinds or any(names_tfcompile(version) for version in api_versions):
        return True
    return not api_versions and any(close_to_kind(kind) for kind in kinds)
