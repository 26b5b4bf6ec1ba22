"""Text from a cluster, made safe to print on a terminal: every control character escaped.

What a job's pods write (their state records, their output), what the API server or kubectl
answers and what an annotation holds reach the user's terminal through `status`, `validate
--server`, `run-local` and the local node. A terminal acts on what it is sent: an escape sequence
can move the cursor, rewrite earlier lines, set the window title or (OSC 8, OSC 52) make links and
write the clipboard; a carriage return hides what came before it; a bidirectional override
reorders what follows, so a line reads other than it is. So every such character is printed as
its escape (`\\x1b`, `\\r`, `\\u202e`), never sent raw and never dropped silently, which would hide
that it was there.

Escaped: the C0 and C1 controls and DEL (Unicode category Cc), the invisible format characters
(Cf: the bidirectional marks, embeddings, overrides and isolates, zero-width characters), lone
surrogates (Cs: bytes that were not UTF-8) and the line and paragraph separators (Zl, Zp).
Everything else, letters of every script included, is printed as it is.
"""

from __future__ import annotations

import unicodedata

_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(character: str) -> str:
    if character in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[character]
    code = ord(character)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str | bytes, *, keep_newlines: bool = False) -> str:
    """`text` with each control, format or separator character replaced by its escape.

    With `keep_newlines`, a line feed still ends a line (for messages of several lines, each
    line escaped on its own); otherwise it is escaped too, so one value prints as one line.
    Bytes (what a program wrote, read without decoding, so that no carriage return has become
    a line feed) are decoded as UTF-8, each byte that is not shown as its escape.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="backslashreplace")
    if text.isprintable():  # the common case: nothing to escape (also no newline)
        return text
    if keep_newlines and "\n" in text:
        return "\n".join(printable(line) for line in text.split("\n"))
    return "".join(_escape(character)
                   if unicodedata.category(character) in _ESCAPED_CATEGORIES else character
                   for character in text)
