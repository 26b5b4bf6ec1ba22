"""Parse a job file into round-trip documents (values with line and column), quickly.

The round-trip loader of ruamel.yaml is what gives every value its position, but its parser is
pure Python and was the largest part of a build. libyaml (ruamel.yaml.clib) parses about seven
times faster and its nodes carry the same marks, so the round-trip constructor is fed libyaml's
nodes: the documents are the same maps and lists with the same positions. Where libyaml could
decide differently, the pure-Python parser decides, exactly as before:

- text with a `%YAML` directive (the directive chooses how scalars resolve, which only the
  pure-Python parser passes on);
- text libyaml refuses or that fails while it is being built: the pure-Python parser parses it
  again and reports its own error (or accepts what libyaml is stricter about).

`tests/test_loader_fuzz.py` holds the two parsers to the same documents and positions.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.resolver import VersionedResolver

try:
    from _ruamel_yaml import CParser  # type: ignore[import-not-found]
except ImportError:  # ruamel.yaml.clib is missing: everything goes to the pure-Python parser
    CParser = None


def pure_documents(text: str) -> list[Any]:
    """The documents of ruamel's pure-Python round-trip parser (empty documents left out)."""
    return [document for document in YAML(typ="rt").load_all(text) if document is not None]


def fast_documents(text: str) -> list[Any] | None:
    """The same documents through libyaml, or None where the pure-Python parser must decide."""
    if CParser is None or "%YAML" in text:
        return None
    loader = _LibyamlRoundTripLoader(text)
    try:
        documents = []
        while loader.check_data():
            document = loader.get_data()
            if document is not None:
                documents.append(document)
        return documents
    except Exception:  # any refusal is the pure-Python parser's to report
        return None
    finally:
        loader.dispose()


def documents(text: str) -> list[Any]:
    """The documents of `text`, as the round-trip loader builds them; raises ruamel's errors."""
    fast = fast_documents(text)
    return fast if fast is not None else pure_documents(text)


if CParser is not None:

    class _LibyamlRoundTripLoader(
        CParser, RoundTripConstructor, VersionedResolver  # type: ignore[misc]
    ):
        """libyaml's parser and composer under ruamel's round-trip constructor and YAML 1.2
        resolver: the pieces `YAML(typ="rt")` uses, with the parser swapped."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            self._parser = self._composer = self
            self.comment_handling = None
            RoundTripConstructor.__init__(self, loader=self)
            self.allow_duplicate_keys = False
            VersionedResolver.__init__(self, version=None, loadumper=self)
