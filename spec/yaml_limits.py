"""Limits on the YAML text of a job file, checked on its tokens before any document is built.

ruamel.yaml builds nested collections by recursion (a few hundred levels end in RecursionError),
accepts only `%YAML 1.1` and `1.2` by an assertion, turns integers into Python `int`s (more
than 4,300 digits end in ValueError), and constructs a value as its explicit tag says
(`!!int x` ends in ValueError, `!!bool maybe` in KeyError; `!!binary`, `!!timestamp`, `!!set`
and local tags `!name` make values no field holds). The scanner that produces tokens is an
iterative state machine, so walking its tokens first turns each of these into a located
problem instead of a traceback; an explicit tag is refused wherever it stands (no field needs
one), at the node it tags, and `yaml_tags` then names the field. Error messages of the YAML
library are scrubbed here too: they quote input.

The walk also bounds what a file costs: every later step (building the document, copying it,
the secret scan, validation, compiling, writing) takes time in proportion to the number of
values, so a file with more than `MAXIMUM_VALUES` is refused at the first value too many,
before a document is built.

The tokens come from libyaml's scanner (ruamel.yaml.clib), an order of magnitude faster than the
pure-Python one and giving the same tokens; text it refuses (libyaml is stricter in a few
places, a colon in a plain scalar inside a flow mapping among them) is scanned again by the
pure-Python scanner, which decides as it always did.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.tokens import (
    AliasToken,
    AnchorToken,
    BlockEndToken,
    BlockEntryToken,
    BlockMappingStartToken,
    BlockSequenceStartToken,
    DirectiveToken,
    FlowMappingEndToken,
    FlowMappingStartToken,
    FlowSequenceEndToken,
    FlowSequenceStartToken,
    KeyToken,
    ScalarToken,
    TagToken,
    Token,
    ValueToken,
)

from .problems import LocatedProblem, Location

MAXIMUM_FILE_BYTES = 256 * 1024
"""A job file larger than 256 KiB is refused before it is read. A real job is a few KiB; a
larger file only makes a slower build (the YAML parser and the secret scan read every byte)."""

MAXIMUM_DEPTH = 64
"""Collections nested deeper than this are refused. The deepest field of a job is about ten
levels down (a Kubernetes pod fragment such as affinity reaches twenty); 64 leaves room for any
real spec while keeping every recursive step (YAML composer, copy, validation) far below
Python's recursion limit of 1,000 frames."""

MAXIMUM_NUMBER_CHARACTERS = 100
"""A number written with more characters than this is refused: Kubernetes numbers are 64-bit
(at most 20 characters), and Python refuses to convert integers of more than 4,300 digits."""

MAXIMUM_VALUES = 10_000
"""A file with more values than this (scalars, empty values, lists and mappings, keys included)
is refused, and so is a document that has more once its aliases are expanded (`plain_data.py`).
The largest example job has about a hundred; each value costs every step of a build some tens of
microseconds, so this keeps any file within `MAXIMUM_FILE_BYTES` building (or refused) in well
under two seconds."""

MAXIMUM_PURE_PARSER_VALUES = 5_000
"""The same for a file only ruamel's pure-Python parser reads (libyaml refuses it, say for a URL
in a flow list): that parser reads each value several times slower, so a file of 10,000 took
about two seconds of CPU to build; at this limit it takes about one."""

MAXIMUM_DOCUMENTS = 100
"""A file with more documents (jobs) than this is refused: each job costs a build some
milliseconds of compiling and writing a dozen files, so this keeps any file within two seconds.
More jobs go into more files."""

SUPPORTED_YAML_VERSIONS = ((1, 1), (1, 2))

EXPLICIT_TAG = (
    "an explicit YAML tag (such as !!int, !!str, !!binary, !!timestamp, !!set or a local !name) "
    "is not allowed in a job file: a tag makes a value no field holds (bytes, a date, a set) or "
    "one that cannot be read; allowed: plain values, with a string in quotes (\"3\", \"true\")"
)
"""The problem of every explicit tag (the tag itself is not repeated: it is input)."""

_NUMBER_LIKE = re.compile(r"[-+]?\.?[0-9][0-9a-fA-FxXoObB_:.eE+-]*")
_OPENING = (BlockMappingStartToken, BlockSequenceStartToken, FlowMappingStartToken,
            FlowSequenceStartToken)
_CLOSING = (BlockEndToken, FlowMappingEndToken, FlowSequenceEndToken)
_NUMBER_TAGS = ("int", "float")
_NODES = (*_OPENING, ScalarToken, AliasToken)
_PROPERTIES = (AnchorToken, TagToken)
_EXPECTING_NODE = (KeyToken, ValueToken, BlockEntryToken)


def _location(shown: str, token: Token) -> Location:
    mark = token.start_mark
    return Location(shown, mark.line + 1, mark.column + 1)


def check_tokens(text: str, shown: str, *, explicit_tags: bool = True) -> list[LocatedProblem]:
    """Problems of the YAML text that the YAML library would turn into a crash or a slow build:
    unsupported `%YAML` versions, nesting deeper than `MAXIMUM_DEPTH`, numbers too long to
    convert, more than `MAXIMUM_VALUES` values, explicit tags (`EXPLICIT_TAG`, each located
    where its node starts: at its anchor when one comes first; not with `explicit_tags` false,
    for files a job's are not). Raises the library's `MarkedYAMLError` for text that is not
    YAML at all."""
    try:
        problems = list(_token_problems(c_tokens(text), shown))
    except (YAMLError, ValueError, TypeError):
        problems = list(_token_problems(pure_tokens(text), shown, MAXIMUM_PURE_PARSER_VALUES))
    if explicit_tags:
        return problems
    return [problem for problem in problems if problem.message != EXPLICIT_TAG]


def pure_tokens(text: str) -> Iterator[Token]:
    """The tokens of ruamel's pure-Python scanner, the one the spec's parser uses."""
    return iter(YAML(typ="rt").scan(text))


def c_tokens(text: str) -> Iterator[Token]:
    """The tokens of libyaml's scanner, one at a time (a walk that stops early scans no
    further); without ruamel.yaml.clib, the pure-Python scanner's."""
    try:
        from _ruamel_yaml import CParser  # type: ignore[import-not-found]
    except ImportError:
        return pure_tokens(text)
    return _scanned(CParser(text))


def _scanned(parser: Any) -> Iterator[Token]:
    while (token := parser.get_token()) is not None:
        yield token


def starts_a_value(token: Token, previous: Token | None) -> bool:
    """Whether a value of the document (a node) starts at `token`: a scalar, alias, list or
    mapping (or the anchor or tag in front of one), or an empty value, which has no token of
    its own: a key, `:` or `-` followed by no value. Never counts a value twice; a few flow
    forms (`{a, b}`, `[a: b]`) hold values without tokens, which the copy counts."""
    if isinstance(token, (*_NODES, *_PROPERTIES)):
        return not isinstance(previous, _PROPERTIES)
    return isinstance(previous, _EXPECTING_NODE)


def _token_problems(tokens: Iterator[Token], shown: str,
                    maximum: int = MAXIMUM_VALUES) -> Iterator[LocatedProblem]:
    depth = 0
    values = 0
    previous: Token | None = None
    for token in tokens:
        if starts_a_value(token, previous):
            values += 1
            if values > maximum:
                yield LocatedProblem(
                    _location(shown, token), (),
                    f"more than {maximum} values (keys included) in the file; a job "
                    "spec needs far fewer",
                )
                return
        if isinstance(token, DirectiveToken) and token.name == "YAML":
            if tuple(token.value or ()) not in SUPPORTED_YAML_VERSIONS:
                yield LocatedProblem(
                    _location(shown, token), (),
                    "unsupported %YAML version; allowed: 1.1 and 1.2 (or no directive)",
                )
                return
        elif isinstance(token, _OPENING):
            depth += 1
            if depth > MAXIMUM_DEPTH:
                yield LocatedProblem(
                    _location(shown, token), (),
                    f"nested more than {MAXIMUM_DEPTH} levels deep; a job spec needs far fewer",
                )
                return
        elif isinstance(token, _CLOSING):
            depth = max(depth - 1, 0)
        elif isinstance(token, TagToken):
            node_start = previous if isinstance(previous, AnchorToken) else token
            yield LocatedProblem(_location(shown, node_start), (), EXPLICIT_TAG)
        elif isinstance(token, ScalarToken) and len(token.value) > MAXIMUM_NUMBER_CHARACTERS:
            tagged_number = isinstance(previous, TagToken) and str(
                (previous.value or ("", ""))[1]).endswith(_NUMBER_TAGS)
            if tagged_number or (token.plain and _NUMBER_LIKE.fullmatch(token.value)):
                yield LocatedProblem(
                    _location(shown, token), (),
                    f"a number of more than {MAXIMUM_NUMBER_CHARACTERS} characters; numbers in "
                    "Kubernetes are 64-bit (quote it if it is text)",
                )
        previous = token


_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_HARMLESS_QUOTE = re.compile(r"<[a-z ]+>|\\?.|[-,:\[\]{}?|>!&*#%@`]+")


def _scrub(match: re.Match[str]) -> str:
    inner = match.group(0)[1:-1]
    return match.group(0) if _HARMLESS_QUOTE.fullmatch(inner) else "(…)"


def describe_yaml_error(error: MarkedYAMLError) -> str:
    """What the YAML library found wrong, without the input it quotes (a duplicate key's
    values, an alias or tag name): quoted fragments other than YAML punctuation are dropped."""
    if type(error).__name__ == "DuplicateKeyError":
        return "a key appears twice in one mapping; each key may be given once"
    reason = " ".join(str(part) for part in (error.context, error.problem) if part)
    first_line = reason.strip().splitlines()[0] if reason.strip() else ""
    return _QUOTED.sub(_scrub, first_line) or "not valid YAML"
