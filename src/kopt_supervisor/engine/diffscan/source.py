"""A changed Python file read as the interpreter reads it, and git's line numbers mapped onto
Python's. Pure.

The diff numbers lines as git does (text between LF bytes, in the file's bytes); the
interpreter decodes the bytes first (a BOM, or a `# coding:` declaration on line 1 or 2) and
then ends a line at LF, CRLF or a lone CR. The two disagree on:

- a lone CR: one git line, two Python lines (`x = 1\\rimport os` runs `import os`);
- a declared encoding that decodes to line breaks git never sees (utf-7's `+AAo-`,
  unicode_escape's `\\u000a`): the whole tail of a "comment" can be code;
- characters other readers take for a line break (form feed, VT, \\x1c-\\x1e, \\x85, U+2028,
  U+2029): no break to git or Python, but `str.splitlines` and an editor break there, so a
  reviewer reading the quoted line may not see what follows; and bidi controls, which
  reorder what the reviewer sees of a line (Trojan Source), not what runs.

`read_python` decodes exactly as the tokenizer does and says, for each git line, which Python
lines it spans; where that cannot be told line by line (an encoding other than UTF-8 or a
single-byte one), every line of the file counts as the candidate's.
"""

from __future__ import annotations

import codecs
import io
import re
import tokenize
from dataclasses import dataclass, field

PY_BREAK = re.compile(r"\r\n|\r|\n")
"""Where Python ends a line (universal newlines)."""
ODD_CHARACTERS = re.compile(
    "\r(?!$)|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""In a git line (no LF): a CR that is not the CR of a CRLF, a character `str.splitlines`
and editors break at, or a bidi control."""
PLAIN_ENCODINGS = frozenset({"utf-8", "ascii"})
"""Declared encodings that need no review (their names as `codecs.lookup` gives them)."""


@dataclass(frozen=True)
class PySource:
    """A Python file as the interpreter reads it."""

    text: str
    """Decoded as the tokenizer decodes (BOM removed)."""
    encoding: str
    """codecs' name of the encoding it was decoded with."""
    cookie_line: int
    """The line of an encoding declaration (0: none, or one naming UTF-8)."""
    git_lines: list[str]
    """The file's lines as git counts them (LF-separated, decoded as git's output is)."""
    spans: list[tuple[int, int]] = field(default_factory=list)
    """Per git line (index 0 is line 1), the first and last Python line it spans; empty when
    the encoding does not map line by line (`exact` False)."""

    @property
    def exact(self) -> bool:
        return bool(self.spans)

    @property
    def lines(self) -> list[str]:
        """Python's lines (for quoting a finding at its ast line)."""
        return PY_BREAK.split(self.text)

    def git_line(self, python_line: int) -> int:
        """The git line a Python line lies on (itself when not `exact`)."""
        if not self.exact:
            return python_line
        lo, hi = 0, len(self.spans) - 1
        while lo < hi:  # the last git line starting at or before it
            mid = (lo + hi + 1) // 2
            if self.spans[mid][0] <= python_line:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def python_lines(self, git_lines: set[int]) -> set[int]:
        """The Python lines the given git lines span (every line when not `exact`)."""
        if not self.exact:
            return set(range(1, len(self.lines) + 1))
        out: set[int] = set()
        for n in git_lines:
            if 0 < n <= len(self.spans):
                lo, hi = self.spans[n - 1]
                out.update(range(lo, hi + 1))
        return out


class Undecodable(ValueError):
    """The interpreter would refuse the file's bytes (an unknown or failing encoding)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


def read_python(raw: bytes) -> PySource:
    """The file decoded as the tokenizer decodes it, with git's lines mapped onto Python's.
    Undecodable when the interpreter would refuse it too (its SyntaxError names the same)."""
    try:
        encoding, first = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise Undecodable(str(exc), getattr(exc, "lineno", 0) or 0) from None
    try:
        name = codecs.lookup(encoding).name
        body = raw[len(codecs.BOM_UTF8) :] if encoding == "utf-8-sig" and raw.startswith(codecs.BOM_UTF8) else raw
        text = body.decode("utf-8" if encoding == "utf-8-sig" else encoding)
    except (LookupError, UnicodeError, TypeError) as exc:  # TypeError: a bytes-to-bytes codec named
        raise Undecodable(f"the declared encoding {encoding!r} fails: {exc}", 1) from None
    cookie = 0
    if name not in PLAIN_ENCODINGS and not encoding.startswith("utf-8"):
        cookie = next((i + 1 for i, line in enumerate(first) if b"coding" in line), 1)
    git_lines = [b.decode("utf-8", "surrogateescape") for b in raw.split(b"\n")]
    return PySource(text, name, cookie, git_lines, _spans(body, encoding, text))


def _spans(body: bytes, encoding: str, text: str) -> list[tuple[int, int]]:
    """Per git line, the Python lines it spans; [] when decoding git line by git line does not
    give the text (the encoding makes or hides line breaks of its own)."""
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    pieces: list[str] = []
    for b in body.split(b"\n"):
        try:
            piece = b.decode(codec)
        except (UnicodeError, LookupError, TypeError):
            return []
        if "\n" in piece:
            return []
        pieces.append(piece)
    if "\n".join(pieces) != text:
        return []
    spans = []
    at = 1
    for k, piece in enumerate(pieces):
        last = k == len(pieces) - 1
        inner = piece.count("\r") - (1 if piece.endswith("\r") and not last else 0)
        spans.append((at, at + inner))
        at += inner + 1
    return spans


def odd_characters(line: str) -> list[str]:
    """The characters of a git line that are a line break to Python but not to git, or to other
    readers but not to Python, or a bidi control (escaped: `\\r`, `\\x0c`, `\\u202e`)."""
    return sorted({m.group(0).encode("unicode_escape").decode("ascii") for m in ODD_CHARACTERS.finditer(line)})


def shown(line: str) -> str:
    """A line as a reviewer should see it quoted: odd characters escaped, so the quote is one line."""
    return ODD_CHARACTERS.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), line)
