"""What `validate` reads of rendered manifests and generated files (`yaml_input`, ruamel's safe
loader on the C parser, with its resolver looking up the YAML version and each plain text's tag
once per read) is what ruamel's own safe loader reads, value for value and type for type: a
text that appears plain and quoted in one document keeps its own tag each time."""

from __future__ import annotations

import itertools
from typing import Any

from ruamel.yaml import YAML

from tfcompile.compiler.yaml_input import read_generated_document, read_manifests

SPELLINGS = ("1", "-1", "0755", "0o17", "0x1F", "1_000", "1.5", "1e3", ".5", "-.inf", ".NaN",
             "true", "True", "false", "yes", "no", "on", "off", "y", "n", "null", "Null", "~",
             "2001-12-14", "2001-12-14t21:59:43.10-05:00", "12:30", "<<x", "abc",
             "0.1.2", "1e", "+1", "+.5")


def stock(text: str) -> list[Any]:
    return list(YAML(typ="safe", pure=False).load_all(text))


def document(order: list[str]) -> str:
    """Each spelling plain, single- and double-quoted, in `order`, under keys of its own."""
    lines = []
    for number, spelling in enumerate(order):
        lines += [f"plain{number}: {spelling}", f"single{number}: '{spelling}'",
                  f'double{number}: "{spelling}"', f"list{number}:", f"- {spelling}",
                  f"- '{spelling}'"]
    return "\n".join(lines) + "\n"


def typed(value: Any) -> Any:
    """`value` with the type of every leaf beside it (1 and True are equal in Python)."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    return (type(value).__name__, repr(value))


def test_every_spelling_reads_as_ruamels_safe_loader_reads_it_plain_or_quoted() -> None:
    forward = document(list(SPELLINGS))
    backward = document(list(reversed(SPELLINGS)))
    text = f"{forward}---\n{backward}---\n{forward}"
    assert typed(read_manifests(text)) == typed(stock(text))
    assert typed(read_generated_document(forward)) == typed(stock(forward)[0])


def test_a_text_read_plain_first_is_still_a_string_quoted_and_the_other_way_round() -> None:
    for first, second in itertools.permutations(["1", "'1'"]):
        read = read_manifests(f"a: {first}\nb: {second}\n---\nc: {first}\n")
        assert [type(value) for item in read for value in item.values()] == (
            [int, str, int] if first == "1" else [str, int, str])
