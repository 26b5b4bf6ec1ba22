"""The one module that writes YAML, so every file tfcompile emits looks the same.

Objects are plain dicts whose key order the builders chose (apiVersion, kind, metadata, spec);
multi-line strings become literal blocks, long lines are never folded, and nothing that varies
between runs (times, versions) is written: the same spec gives the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarstring import LiteralScalarString, SingleQuotedScalarString

_YAML_1_1 = VersionedResolver(version=(1, 1))
_STRING_TAG = "tag:yaml.org,2002:str"


def _read_as_string_by_every_parser(text: str) -> bool:
    """Go's YAML 1.1 parsers read `on`, `y` or `0777` as other types; quote those strings."""
    for resolver in (_YAML_1_1, VersionedResolver(version=(1, 2))):
        if resolver.resolve(ScalarNode, text, (True, False)) != _STRING_TAG:
            return False
    return True


def _prepare(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _prepare(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_prepare(item) for item in value]
    if isinstance(value, str) and "\n" in value and _block_safe(value):
        return LiteralScalarString(value)
    if isinstance(value, str) and not _read_as_string_by_every_parser(value):
        return SingleQuotedScalarString(value)
    return value


def _block_safe(text: str) -> bool:
    """Literal blocks cannot keep trailing spaces or tabs exactly; quote those instead."""
    return not any(line != line.rstrip(" \t") for line in text.split("\n")) and "\r" not in text


def _writer() -> YAML:
    writer = YAML(typ="rt", pure=True)
    writer.default_flow_style = False
    writer.width = 1 << 30
    writer.indent(mapping=2, sequence=2, offset=0)
    writer.explicit_start = False
    return writer


def dump(document: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """One YAML document, with optional comment lines before it."""
    stream = io.StringIO()
    for line in header:
        stream.write(f"# {line}\n" if line else "#\n")
    _writer().dump(_prepare(document), stream)
    return stream.getvalue()
