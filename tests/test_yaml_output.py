"""The YAML writer's output reads back as the objects under both YAML versions Kubernetes meets.

Compiled files are read by kubectl and Argo CD (Go parsers that follow YAML 1.1: `on`, `y` and
`0777` are not strings there), by kustomize, and by YAML 1.2 parsers (ruamel.yaml, Flux's
tooling). So the property is checked against two independent readers, PyYAML (YAML 1.1) and
ruamel.yaml's pure-Python safe loader (YAML 1.2); neither shares the writer's rules for when to
quote. Documents are drawn from everything a compiled object can hold: nested maps and lists,
strings of any Unicode text, 64-bit integers, booleans and nulls.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from tfcompile.compiler.yaml_output import dump

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
"""Any Unicode text (lone surrogates are refused before anything is written)."""
TRICKY_TEXTS = [
    "on", "off", "y", "n", "yes", "No", "TRUE", "~", "null", "Null", "0777", "0o17", "0x1F",
    "1e3", "1_000", ".inf", "-.Inf", ".nan", "12:30:00", "2001-12-14", "=", "<<", "- a", "a: b",
    "#x", "x #y", "'", '"', "|", ">", "!tag", "&anchor", "*alias", "%YAML", "@", "`", "{", "[",
    " leading", "trailing ", "\ttab", "line\nbreak", "line\nbreak\n", "\n", "a\r\nb", "a\x85b",
    "a\u2028b", "\ufeffbom", "é", "\U0001F600", "", " ", "-", "?", ":", "---", "...",
    "script\x0cwith a form feed\n", "\x1b[31mred\x1b[0m", "nul\x00",
]
"""Strings a YAML 1.1 or 1.2 reader takes for something else when written plain, and text
only escapes can carry (scripts are files: any Unicode text may reach the writer)."""
TRICKY = st.sampled_from(TRICKY_TEXTS)
KEYS = st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=20) | TRICKY
SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT | TRICKY)
DOCUMENTS = st.dictionaries(KEYS, st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=20,
), min_size=1, max_size=5)


def read_as_yaml_1_1(text: str) -> Any:
    return yaml.safe_load(text)


def read_as_yaml_1_2(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(io.StringIO(text))


def _reads_back_equal(document: dict[str, Any]) -> None:
    text = dump(document)
    assert read_as_yaml_1_2(text) == document, text
    assert read_as_yaml_1_1(text) == document, text


def _derandomized(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


test_what_the_writer_writes_reads_back_equal_under_yaml_1_1_and_1_2 = _derandomized(50)(
    given(document=DOCUMENTS)(_reads_back_equal))
test_what_the_writer_writes_for_200_documents_reads_back_equal = pytest.mark.slow(
    _derandomized(200)(given(document=DOCUMENTS)(_reads_back_equal)))


def test_every_tricky_scalar_reads_back_as_a_string_and_as_a_key() -> None:
    for value in TRICKY_TEXTS:
        document = {value: value, "list": [value], "map": {value: [value]}}
        text = dump(document)
        assert read_as_yaml_1_2(text) == document, text
        assert read_as_yaml_1_1(text) == document, text
