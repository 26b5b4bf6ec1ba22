"""The one module that writes YAML, so every file tfcompile emits looks the same.

The format (the same spec gives the same bytes; nothing that varies between runs is written):
- Layout: block style only; two-space indentation; a sequence's dashes at its key's column
  (not indented under it); the builders' key order (apiVersion, kind, metadata, spec), never
  sorted here; lines never folded, whatever their length; comment lines (the header) first.
- Scalars: integers in decimal, `true`/`false`, null as nothing (`key:`); empty maps and
  lists as `{}` and `[]`.
- Strings, keys and values alike, are plain unless a reader would take them for something
  else: single-quoted when a YAML 1.1 or a YAML 1.2 parser would read the plain text as
  another type (`on`, `y`, `0777`, `1e3`, `null`, ...) or the plain form is not allowed
  (leading `-`, `:`, `#`, quotes, spaces at either end, ...); double-quoted with escapes when
  they hold a control character other than tab and newline, a carriage return, the byte-order
  mark, or a YAML 1.1 line break (`\x85`, `\u2028`, `\u2029`); a value with a newline is a
  literal block (`|`, with the indentation and chomping indicators it needs) unless a line
  ends in spaces or tabs, which a block cannot keep (then it is quoted). Other Unicode is
  written as itself (UTF-8).
tests/test_yaml_output.py holds the writer to this: whatever it writes reads back equal under
PyYAML (YAML 1.1, as Go's parsers in kubectl and Argo CD read) and ruamel.yaml's safe loader
(YAML 1.2).

ruamel.yaml's emitter lays the text out. This module hands it the document's events directly,
with every scalar's style already chosen, instead of going through ruamel's representer and
serializer: the bytes are the ones those would produce, without the per-document cost of
building a dumper and resolving every scalar twice. The emitter's internals used here are
bounded by the ruamel.yaml versions pyproject.toml allows.

Why not one library call. libyaml's emitter (PyYAML's `CSafeDumper`, `yaml.dump(...,
sort_keys=False, allow_unicode=True, width=2**30)` with a representer choosing literal blocks
and quotes by the rules above) writes every committed file's bytes only when a document holds
none of what it lays out differently: a tab (a script's block becomes one double-quoted line),
a character beyond the Basic Multilingual Plane (escaped as `\\U...`), a `|+` block before the
end (`...` after the document), a null in a list, a key of 100 or more characters, or a string
with `'` it cannot write plain (double quotes here). Plain `yaml.dump` also misses what only
YAML 1.2 reads as a number (a revision `80524764e848` would lose its quotes in a committed
sweep). Written as a library call, such documents go to ruamel's own dumper (the reference in
tests/test_fast_paths.py) and the rest to libyaml: same bytes everywhere. It was measured
against this module on 100 fresh jobs (the fleet of scripts/benchmark.py, built without
records, into fresh output, alternating with 100 `helm template` runs of
scripts/benchmark_chart, helm v4.2.4; CPU seconds, user + system, least of 3 rounds, on a
loaded 2-core machine): this module 0.85 s, the library call 1.35 s, helm 5.02 s, that is
0.17x and 0.27x helm. The goal is at most 0.2x, so this module stays: libyaml's emitter
itself is fast, but PyYAML's representer costs about 0.25 ms a document in Python, where the
layout below reuses what it laid out before (0.03 ms).

Most documents take a shorter road still: the block layout above is written here directly,
scalar by scalar, with the style ruamel's emitter would choose from its own analysis of the
text. Whatever that layout does not cover (a key that is not a plain string, a nested sequence,
a double-quoted or multi-line quoted scalar, an empty collection in a sequence, a literal block
that keeps its trailing newlines, unusual line breaks) sends the whole document to ruamel's
emitter instead; a test compares both paths' bytes on fuzzed documents.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.emitter import Emitter, ScalarAnalysis
from ruamel.yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.tag import Tag

_YAML_1_1 = VersionedResolver(version=(1, 1))
_YAML_1_2 = VersionedResolver(version=(1, 2))
_PREFIX = "tag:yaml.org,2002:"
_STRING = Tag(suffix=_PREFIX + "str")
_INTEGER = Tag(suffix=_PREFIX + "int")
_BOOLEAN = Tag(suffix=_PREFIX + "bool")
_NULL = Tag(suffix=_PREFIX + "null")
_MAP = Tag(suffix=_PREFIX + "map")
_SEQUENCE = Tag(suffix=_PREFIX + "seq")
_REMEMBERED_MAXIMUM = 16_384
"""Entries each memo of short scalars keeps: the names, labels and keys that recur within a
job's files and across jobs; bounded, so that a build's memory does not grow with its jobs."""
_LITERAL = "|"
_SINGLE_QUOTED = "'"
_DOUBLE_QUOTED = '"'


@functools.lru_cache(maxsize=_REMEMBERED_MAXIMUM)
def _resolved_tag(text: str, version: tuple[int, int]) -> str:
    """The type a YAML `version` parser gives `text` written plain."""
    resolver = _YAML_1_1 if version == (1, 1) else _YAML_1_2
    return str(resolver.resolve(ScalarNode, text, (True, False)))


def _read_as_string_by_every_parser(text: str) -> bool:
    """Go's YAML 1.1 parsers read `on`, `y` or `0777` as other types; quote those strings."""
    return _resolved_tag(text, (1, 1)) == str(_STRING) == _resolved_tag(text, (1, 2))


_ESCAPED = frozenset("\r\x7f\x85\u2028\u2029\ufeff") | frozenset(
    chr(code) for code in [*range(0x20), *range(0x80, 0xA0)] if chr(code) not in "\t\n")
"""Characters written only as escapes in a double-quoted string: control characters (tabs and
newlines aside), the byte-order mark, and the line breaks YAML 1.1 knows beyond the newline
(a YAML 1.1 reader folds `\x85` or `\u2028` written raw into a space, a YAML 1.2 one may not)."""


def _needs_escapes(text: str) -> bool:
    return not _ESCAPED.isdisjoint(text)


def _block_safe(text: str) -> bool:
    """Literal blocks cannot keep trailing spaces or tabs exactly; quote those instead."""
    return not any(line != line.rstrip(" \t") for line in text.split("\n")) and "\r" not in text


def _scalar(tag: Tag, text: str, style: str | None = None) -> ScalarEvent:
    """A scalar event as ruamel's serializer makes it: `implicit` says whether the text, plain
    or quoted, reads back as `tag` (YAML 1.2, the version ruamel writes)."""
    plain = _resolved_tag(text, (1, 2)) == str(tag)
    quoted = tag == _STRING
    return ScalarEvent(None, tag, (plain, quoted, True), text, style=style)


_REMEMBERED_LENGTH_MAXIMUM = 256  # the names, labels and keys that recur from file to file
_LONG_REMEMBERED_LENGTH = 16 * 1024  # the launcher's program, the same in every job


def _string(text: str) -> ScalarEvent:
    if len(text) <= _REMEMBERED_LENGTH_MAXIMUM:
        return _remembered_string(text)
    return _new_string(text)


@functools.lru_cache(maxsize=_REMEMBERED_MAXIMUM)
def _remembered_string(text: str) -> ScalarEvent:
    return _new_string(text)


@functools.lru_cache(maxsize=_REMEMBERED_MAXIMUM)
def _key(text: str) -> ScalarEvent:
    # A key is never a literal block; otherwise it is quoted by the rules values follow.
    if _needs_escapes(text):
        return _scalar(_STRING, text, _DOUBLE_QUOTED)
    if not _read_as_string_by_every_parser(text):
        return _scalar(_STRING, text, _SINGLE_QUOTED)
    return _scalar(_STRING, text)


def _new_string(text: str) -> ScalarEvent:
    if _needs_escapes(text):
        return _scalar(_STRING, text, _DOUBLE_QUOTED)
    if "\n" in text and _block_safe(text):
        return _scalar(_STRING, text, _LITERAL)
    if not _read_as_string_by_every_parser(text):
        return _scalar(_STRING, text, _SINGLE_QUOTED)
    return _scalar(_STRING, text)


def _value(value: Any) -> ScalarEvent:
    if value is None:  # inside a document, ruamel writes null as nothing (`key:`)
        return _scalar(_NULL, "")
    if isinstance(value, bool):
        return _scalar(_BOOLEAN, "true" if value else "false")
    if isinstance(value, int):
        return _scalar(_INTEGER, str(value))
    raise TypeError(f"tfcompile writes no {type(value).__name__} values")


def _events(value: Any, events: list[Event]) -> None:
    if isinstance(value, Mapping):
        events.append(
            MappingStartEvent(None, _MAP, True, flow_style=False, nr_items=len(value))
        )
        for key, item in value.items():
            events.append(_key(key) if isinstance(key, str) else _value(key))
            _events(item, events)
        events.append(MappingEndEvent())
    elif isinstance(value, list | tuple):
        events.append(SequenceStartEvent(None, _SEQUENCE, True, flow_style=False))
        for item in value:
            _events(item, events)
        events.append(SequenceEndEvent())
    elif isinstance(value, str):
        events.append(_string(value))
    else:
        events.append(_value(value))


_ANALYSES: dict[str, tuple[Any, ...]] = {}


class _Emitter(Emitter):
    """ruamel's emitter, remembering how each short scalar may be written: the same names and
    labels recur in every file, and the analysis walks the text one character at a time. The
    analysis depends only on the text and on settings every document here shares."""

    def analyze_scalar(self, scalar: Any) -> Any:
        if len(scalar) > _REMEMBERED_LENGTH_MAXIMUM:
            return super().analyze_scalar(scalar)
        fields = _ANALYSES.get(scalar)
        if fields is None:
            found = super().analyze_scalar(scalar)
            if len(_ANALYSES) >= _REMEMBERED_MAXIMUM:
                _ANALYSES.clear()
            fields = _ANALYSES[scalar] = (
                found.scalar, found.empty, found.multiline, found.allow_flow_plain,
                found.allow_block_plain, found.allow_single_quoted, found.allow_double_quoted,
                found.allow_block,
            )
        # The emitter marks the analysis while choosing a style: hand it one of its own.
        return ScalarAnalysis(*fields)


class _Settings(YAML):
    """What the emitter asks its dumper: the YAML version written (1.2) and its serializer."""

    def __init__(self) -> None:
        super().__init__(typ="rt", pure=True)


_SETTINGS = _Settings()
_NEVER_FOLDED = 1 << 30
_INDENT = 2


def _emitter(stream: io.StringIO) -> _Emitter:
    """An emitter laid out like `YAML(typ="rt")` with `indent(mapping=2, sequence=2, offset=0)`
    and lines never folded: block style, sequences not indented under their key."""
    emitter = _Emitter(stream, width=_NEVER_FOLDED, allow_unicode=True, dumper=_SETTINGS)
    emitter.best_map_indent = _INDENT
    emitter.best_sequence_indent = _INDENT
    emitter.sequence_dash_offset = 0
    return emitter


def _dump_with_events(document: Mapping[str, Any], stream: io.StringIO) -> None:
    events: list[Event] = [StreamStartEvent(), DocumentStartEvent(explicit=False)]
    _events(document, events)
    events.extend([DocumentEndEvent(explicit=False), StreamEndEvent()])
    emitter = _emitter(stream)
    for event in events:
        emitter.emit(event)


class _NotInLayout(Exception):
    """The document holds something the direct layout does not write; ruamel's emitter does."""


_ANALYZER = _emitter(io.StringIO())
_LINE_BREAKS_BEYOND_NEWLINE = ("\x85", "\u2028", "\u2029", "\r")
_SIMPLE_KEY_LENGTH = 100  # ruamel writes `? key` from 128 characters with the tag: stay below


def _analysis(text: str) -> Any:
    return _ANALYZER.analyze_scalar(text)


@functools.lru_cache(maxsize=_REMEMBERED_MAXIMUM)
def _plain_key(key: str) -> str:
    """A key as ruamel writes a simple key, when it writes it plain."""
    analysis = _analysis(key)
    if (len(key) >= _SIMPLE_KEY_LENGTH or analysis.empty or analysis.multiline
            or not analysis.allow_block_plain or not _read_as_string_by_every_parser(key)):
        raise _NotInLayout
    return key


def _quoted(text: str, plain_requested: bool) -> str:
    """What ruamel's `choose_scalar_style` and `write_single_quoted` make of a string value
    outside a key, after the colon or dash (which leaves no whitespace behind it)."""
    analysis = _analysis(text)
    if analysis.multiline:
        raise _NotInLayout
    if plain_requested:
        if analysis.allow_block_plain:
            return " " + text
        if analysis.allow_double_quoted and "'" in text:
            raise _NotInLayout
    if not analysis.allow_single_quoted:
        raise _NotInLayout
    return " '" + text.replace("'", "''") + "'"


@functools.lru_cache(maxsize=_REMEMBERED_MAXIMUM)
def _remembered_scalar(text: str) -> str:
    return _short_scalar(text)


def _short_scalar(text: str) -> str:
    if _needs_escapes(text):
        raise _NotInLayout  # double-quoted, with escapes: ruamel's emitter writes those
    if "\n" in text and _block_safe(text):
        raise _NotInLayout  # a literal block: its indentation depends on where it is
    return _quoted(text, _read_as_string_by_every_parser(text))


def _literal(text: str, indent: int) -> str:
    """A literal block as ruamel's `write_literal` lays it out (not at the document's root)."""
    if any(character in text for character in _LINE_BREAKS_BEYOND_NEWLINE):
        raise _NotInLayout
    hints = "2" if text[0] in " \n" else ""
    if not text.endswith("\n"):
        hints += "-"
    elif len(text) == 1 or text[-2] == "\n":
        raise _NotInLayout  # `|+` may leave the stream open-ended (`...`)
    pad = " " * indent
    body = "\n".join(pad + line if line else "" for line in text.split("\n"))
    return f" |{hints}\n{body}" + ("" if text.endswith("\n") else "\n")


@functools.lru_cache(maxsize=8)
def _remembered_long_scalar(text: str) -> str:
    """A long one-line scalar that recurs in every job of a build (the launcher's program, as
    base64): its analysis is a pass over every character, done once."""
    if _needs_escapes(text):
        raise _NotInLayout
    return _quoted(text, _read_as_string_by_every_parser(text)) + "\n"


@functools.lru_cache(maxsize=_REMEMBERED_MAXIMUM)
def _remembered_text(value: str, indent: int) -> str:
    """A long or multi-line text (a script's file, every trial of a sweep ships the same) laid
    out once per build at each indentation."""
    if _needs_escapes(value):
        raise _NotInLayout
    if "\n" in value and _block_safe(value):
        return _literal(value, indent)
    return _quoted(value, _read_as_string_by_every_parser(value)) + "\n"


def _scalar_text(value: Any, indent: int) -> str:
    """A scalar after `key:` or `-`, with its line break; `indent` is where a block's lines go."""
    if isinstance(value, str):
        if len(value) <= _REMEMBERED_LENGTH_MAXIMUM and "\n" not in value:
            return _remembered_scalar(value) + "\n"
        if "\n" not in value and len(value) >= _LONG_REMEMBERED_LENGTH:
            return _remembered_long_scalar(value)
        return _remembered_text(value, indent)
    if value is True:
        return " true\n"
    if value is False:
        return " false\n"
    if isinstance(value, int):
        text = str(value)
        if (not _analysis(text).allow_block_plain
                or _resolved_tag(text, (1, 2)) != str(_INTEGER)):
            raise _NotInLayout
        return f" {text}\n"
    raise _NotInLayout


def _layout_mapping(mapping: Mapping[Any, Any], indent: int, out: list[str],
                    inline: bool) -> None:
    """A non-empty block mapping whose keys start at column `indent` (the first one right after
    a sequence's dash when `inline`)."""
    pad = " " * indent
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise _NotInLayout
        out.append(_plain_key(key) if inline else pad + _plain_key(key))
        inline = False
        if type(value) is str and len(value) <= _REMEMBERED_LENGTH_MAXIMUM and "\n" not in value:
            out.append(":" + _remembered_scalar(value) + "\n")  # most values: names, labels
        elif isinstance(value, Mapping):
            if value:
                out.append(":\n")
                _layout_mapping(value, indent + 2, out, inline=False)
            else:
                out.append(": {}\n")
        elif isinstance(value, list | tuple):
            if value:
                out.append(":\n")
                _layout_sequence(value, indent, out)
            else:
                out.append(": []\n")
        elif value is None:
            out.append(":\n")
        else:
            out.append(":" + _scalar_text(value, indent + 2))


_REMEMBERED_ENTRIES: dict[tuple[int, tuple[tuple[str, Any], ...]], str] = {}
"""Entries of a list laid out before, by indentation and their items when those are all short
texts (an environment variable, a port): a sweep repeats them in every trial."""


def _remembered_entry(item: Mapping[str, Any], indent: int) -> str | None:
    """The layout of `item` (after its dash) when its values are all short one-line texts."""
    if type(item) is not dict or len(item) > 4:
        return None
    values = item.values()
    if not all(type(value) is str and len(value) <= _REMEMBERED_LENGTH_MAXIMUM
               and "\n" not in value for value in values):
        return None
    key = (indent, tuple(item.items()))
    text = _REMEMBERED_ENTRIES.get(key)
    if text is None:
        out: list[str] = []
        _layout_mapping(item, indent, out, inline=True)
        text = "".join(out)
        if len(_REMEMBERED_ENTRIES) >= _REMEMBERED_MAXIMUM:
            _REMEMBERED_ENTRIES.clear()
        _REMEMBERED_ENTRIES[key] = text
    return text


def _layout_sequence(sequence: Sequence[Any], indent: int, out: list[str]) -> None:
    """A non-empty block sequence whose dashes are at column `indent`."""
    dash = " " * indent + "-"
    for item in sequence:
        out.append(dash)
        if isinstance(item, Mapping) and item:
            out.append(" ")
            remembered = _remembered_entry(item, indent + 2)
            if remembered is not None:
                out.append(remembered)
            else:
                _layout_mapping(item, indent + 2, out, inline=True)
        elif isinstance(item, Mapping | list | tuple) or item is None:
            raise _NotInLayout
        else:
            out.append(_scalar_text(item, indent + 2))


def dump(document: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """One YAML document, with optional comment lines before it."""
    lines = [f"# {line}\n" if line else "#\n" for line in header]
    if isinstance(document, Mapping) and document:
        out: list[str] = []
        try:
            _layout_mapping(document, 0, out, inline=False)
        except _NotInLayout:
            pass
        else:
            return "".join(lines) + "".join(out)
    stream = io.StringIO()
    stream.write("".join(lines))
    _dump_with_events(document, stream)
    return stream.getvalue()
