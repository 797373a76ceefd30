"""Text for a terminal. Ids, labels, paths and messages come from data anyone may have written:
printed raw, an escape sequence in an id could clear the screen, move the cursor or recolour
what follows, a newline could forge a line of ``gulpio check`` output, and a bidi override
could show a line in another order than it reads. Human output passes data through
:func:`printable`; JSON output goes through :func:`json_text`, which stays exact.
"""

from __future__ import annotations

import json
import re
from typing import Any

# C0 and C1 controls and DEL (ESC starts terminal sequences; CR and NL start forged lines),
# the Unicode line and paragraph separators, the bidi embedding, override and isolate
# controls, and lone surrogates (which cannot even be encoded for output).
_NOT_C0 = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x1f{_NOT_C0}]")
# The same without C0: JSON escapes those itself, and its own layout uses newlines.
_UNSAFE_IN_JSON = re.compile(f"[{_NOT_C0}]")

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``str(text)`` with every control character, line or paragraph separator, bidi control
    and lone surrogate written as a Python-style escape (``\\x1b``, ``\\n``, ``\\u202e``,
    ``\\udc80``); everything else, including non-ASCII letters and emoji, is kept."""
    text = str(text)
    return _UNSAFE.sub(_escape, text)


def json_text(value: object, **kwargs: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **kwargs)`` with the characters
    :func:`printable` escapes written as JSON ``\\uXXXX`` escapes: the same JSON value,
    readable non-ASCII text, nothing a terminal acts on, and always encodable as UTF-8."""
    text = json.dumps(value, ensure_ascii=False, **kwargs)
    # Outside strings JSON text is ASCII, so these characters are all inside strings, where
    # a \\uXXXX escape stands for the same character.
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
