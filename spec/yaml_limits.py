"""Limits on the YAML text of a job file, checked on its tokens before any document is built.

ruamel.yaml builds nested collections by recursion (a few hundred levels end in RecursionError),
accepts only `%YAML 1.1` and `1.2` by an assertion, and turns integers into Python `int`s (more
than 4,300 digits end in ValueError). The scanner that produces tokens is an iterative state
machine, so walking its tokens first turns each of these into a located problem instead of a
traceback. Error messages of the YAML library are scrubbed here too: they quote input.

The tokens come from libyaml's scanner (ruamel.yaml.clib), an order of magnitude faster than the
pure-Python one and giving the same tokens; text it refuses (libyaml is stricter in a few
places, a colon in a plain scalar inside a flow mapping among them) is scanned again by the
pure-Python scanner, which decides as it always did.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.tokens import (
    BlockEndToken,
    BlockMappingStartToken,
    BlockSequenceStartToken,
    DirectiveToken,
    FlowMappingEndToken,
    FlowMappingStartToken,
    FlowSequenceEndToken,
    FlowSequenceStartToken,
    ScalarToken,
    TagToken,
    Token,
)

from .problems import LocatedProblem, Location

MAXIMUM_FILE_BYTES = 256 * 1024
"""A job file larger than 256 KiB is refused before it is parsed. A real job is a few KiB; the
YAML parser is pure Python and needs about three seconds for 256 KiB on a busy CI core (ten
times that for the 1 MiB an object may have), so a larger file only makes a slow build."""

MAXIMUM_DEPTH = 64
"""Collections nested deeper than this are refused. The deepest field of a job is about ten
levels down (a Kubernetes pod fragment such as affinity reaches twenty); 64 leaves room for any
real spec while keeping every recursive step (YAML composer, copy, validation) far below
Python's recursion limit of 1,000 frames."""

MAXIMUM_NUMBER_CHARACTERS = 100
"""A number written with more characters than this is refused: Kubernetes numbers are 64-bit
(at most 20 characters), and Python refuses to convert integers of more than 4,300 digits."""

SUPPORTED_YAML_VERSIONS = ((1, 1), (1, 2))

_NUMBER_LIKE = re.compile(r"[-+]?\.?[0-9][0-9a-fA-FxXoObB_:.eE+-]*")
_OPENING = (BlockMappingStartToken, BlockSequenceStartToken, FlowMappingStartToken,
            FlowSequenceStartToken)
_CLOSING = (BlockEndToken, FlowMappingEndToken, FlowSequenceEndToken)
_NUMBER_TAGS = ("int", "float")


def _location(shown: str, token: Token) -> Location:
    mark = token.start_mark
    return Location(shown, mark.line + 1, mark.column + 1)


def check_tokens(text: str, shown: str) -> list[LocatedProblem]:
    """Problems of the YAML text that the YAML library would turn into a crash: unsupported
    `%YAML` versions, nesting deeper than `MAXIMUM_DEPTH`, numbers too long to convert.
    Raises the library's `MarkedYAMLError` for text that is not YAML at all."""
    try:
        return list(_token_problems(c_tokens(text), shown))
    except (YAMLError, ValueError, TypeError):
        return list(_token_problems(pure_tokens(text), shown))


def pure_tokens(text: str) -> Iterator[Token]:
    """The tokens of ruamel's pure-Python scanner, the one the spec's parser uses."""
    return iter(YAML(typ="rt").scan(text))


def c_tokens(text: str) -> Iterator[Token]:
    """The tokens of libyaml's scanner; without ruamel.yaml.clib, the pure-Python scanner's."""
    try:
        from _ruamel_yaml import CParser  # type: ignore[import-not-found]
    except ImportError:
        return pure_tokens(text)
    parser = CParser(text)
    tokens: list[Token] = []
    while (token := parser.get_token()) is not None:
        tokens.append(token)
    return iter(tokens)


def _token_problems(tokens: Iterator[Token], shown: str) -> Iterator[LocatedProblem]:
    depth = 0
    previous: Token | None = None
    for token in tokens:
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
