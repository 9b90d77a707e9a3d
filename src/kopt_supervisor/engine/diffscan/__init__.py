"""Reading a candidate's diff for constructs that reach outside the kernel (DESIGN §12): the
scan, and the diff it reads file by file. Pure.

A candidate runs inside the bench's process, so it can patch the bench's timer, read the
reference result from the caller's frame, write the CSV itself and exit, cache results
between calls. kopt reads the candidate's diff against BEST for such constructs and sends a
candidate that has any to review with the lines quoted (`review_reason`). The scan is
advisory: a proposer reads these rules too, so a finding adds a review and no verdict rests
on the absence of one (docs/security.md lists what still gets through).

    findings = scan(diff_text, read=lambda path: police.read_for_scan(cand, path), allow=cfg.target.allow_constructs)

- The diff (`parse_diff`, here): paths, added lines (new numbering), new/deleted/binary, links
  named. Lines are what git counts: text between LF bytes; `str.splitlines` would also break at
  a form feed, a lone CR, U+2028, \x1c-\x1e or \x85 inside an added line, and every added line
  after it would be numbered one off (a payload on the next line then looked unchanged).
- Python files: the whole new version, as bytes, decoded as the interpreter decodes them
  with git's lines mapped onto Python's (`findings.read_python`: a lone CR, a declared encoding);
  a file not read as the diff shows it is `unread`, an encoding other than UTF-8
  `source-encoding` (every line counts), an added line with a break one reader sees and
  another does not, or a bidi control, `hidden-text`. Then `ast` (`diffscan.python`, with
  the names it knows in `diffscan.qualified` and `diffscan.giveaways`,
  the bindings in `diffscan.bindings`; state kept
  between calls and results that compute when read in `diffscan.state`,
  what outlives a call and input-keyed caches in `diffscan.lifetimes`), so aliases,
  `from x import y as z`, `t = time`, a loop variable or parameter handed a module are resolved; only findings on the
  candidate's added lines count, or on unchanged lines that use a name the candidate bound
  anew (a changed `import x as t` makes an old `t.f = g` the candidate's). String constants
  passed to exec/eval/compile are parsed and scanned too; C-like code in Python strings and
  the folded source handed to load_inline and kin meet the C rules.
- C, C++, CUDA, HIP: text rules on the added lines (`diffscan.findings.C_RULES`); Cython the
  Python and C text rules.
- Every other text file: the generic rules (LD_PRELOAD, --wrap=, KOPT_, /proc/; prose and
  data files only the first).
- New files named like a module the bench imports (time.py, torch.py), startup hooks
  (sitecustomize.py, *.pth) and binary files are findings by their name.

`RULES` (findings.py) lists every rule id with what it catches; `[target].allow_constructs` entries
"rule-id:path-glob" (`parse_allow`) let a target's legitimate cases through.
Limits: a static reading. It cannot see code that is built at run time from data it does
not hold, nor what an unchanged file does when called differently; the correctness rule,
the output's shape, the plausibility checks, the profiler, the output audit and the
fresh-process re-decision are the layers a verdict rests on.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from kopt_supervisor.engine.diffscan.findings import (
    C_RULES,
    C_SUFFIXES,
    CYTHON_SUFFIXES,
    DOC_SUFFIXES,
    GENERIC_RULES,
    PY_SUFFIXES,
    PY_TEXT_RULES,
    SHADOWED,
    Allow,
    Finding,
    Undecodable,
    odd_characters,
    parse_allow,
    quote,
    read_python,
    shown,
    text_rules,
)
from kopt_supervisor.engine.diffscan.python import scan_python


def scan(
    diff: str, read: Callable[[str], str | bytes | None], *, allow: Sequence[str | Allow] = (), truncated: bool = False
) -> list[Finding]:
    """The findings of a candidate's diff, in file and line order, without those the
    allow-list covers. `read(path)` gives the candidate's new version of a changed file (None
    when it cannot: then the added lines are all there is, and that is an `unread` finding;
    bytes are decoded as the interpreter decodes them, str is taken as UTF-8). truncated: the caller cut the
    diff (a size cap); that is a finding of its own (`diff-truncated`), never allowed
    away: whatever came after the cut was not read."""
    allows = parse_allow([a for a in allow if isinstance(a, str)]) + tuple(a for a in allow if isinstance(a, Allow))
    found: list[Finding] = []
    for fd in parse_diff(diff):
        if fd.deleted:
            continue
        found += _by_name(fd)
        if fd.binary:
            continue
        if fd.link:
            found.append(
                Finding(
                    "unread",
                    fd.path,
                    0,
                    f"a {fd.link}: the diff shows "
                    f"{'its target' if fd.link == 'symlink' else 'a commit'}, not the code that runs",
                )
            )
            continue
        suffix = PurePosixPath(fd.path).suffix.lower()
        first = fd.added.get(1, "")
        if suffix in PY_SUFFIXES or (not suffix and first.startswith("#!") and "python" in first):
            found += _python_file(fd, read(fd.path))
        elif suffix in C_SUFFIXES:
            found += _hidden_text(fd, fd.added)
            found += text_rules(fd.path, fd.added, C_RULES + GENERIC_RULES, strip_comments=True)
        elif suffix in CYTHON_SUFFIXES:
            found += _hidden_text(fd, fd.added)
            found += text_rules(fd.path, fd.added, PY_TEXT_RULES + C_RULES + GENERIC_RULES)
        elif suffix in DOC_SUFFIXES:
            found += text_rules(fd.path, fd.added, GENERIC_RULES[:1])
        else:
            found += text_rules(fd.path, fd.added, GENERIC_RULES)
    unique = {(f.path, f.line, f.rule): f for f in found}
    kept = [f for _, f in sorted(unique.items()) if not any(a.covers(f) for a in allows)]
    cut = [Finding("diff-truncated", "", 0, f"the diff was cut at {len(diff)} characters")] if truncated else []
    return kept + cut


def _python_file(fd: FileDiff, got: str | bytes | None) -> list[Finding]:
    """The Python rules on the file as the interpreter reads it (`source.read_python`), on
    the Python lines its added git lines span; `unread` where the file is not the one the
    diff shows (none, or cut at a read limit, or changed since), `source-encoding` for a
    declared encoding other than UTF-8 (then every line counts), `hidden-text` for an added
    line with a break only one of git and Python sees, or a bidi control."""
    fallback = text_rules(fd.path, fd.added, PY_TEXT_RULES + GENERIC_RULES)
    if got is None:
        return [
            Finding(
                "unread",
                fd.path,
                0,
                "could not be read (gone, not a regular file, or past the read "
                "limit): its added lines met the text rules only",
            )
        ] + fallback
    raw = got.encode("utf-8", "surrogateescape") if isinstance(got, str) else got
    try:
        src = read_python(raw)
    except Undecodable as exc:
        return [Finding("unparsed", fd.path, exc.line, quote(f"does not decode: {exc}"))] + fallback
    found: list[Finding] = []
    differ = [n for n, text in sorted(fd.added.items()) if n > len(src.git_lines) or src.git_lines[n - 1] != text]
    if differ:
        n = differ[0]
        found.append(
            Finding(
                "unread",
                fd.path,
                n,
                quote(
                    f"{shown(fd.added[n])}  # the file read differs from the "
                    f"diff here ({len(differ)} added lines): cut or changed"
                ),
            )
        )
        found += fallback
    if src.cookie_line:
        line = src.git_lines[src.cookie_line - 1] if src.cookie_line <= len(src.git_lines) else ""
        found.append(
            Finding(
                "source-encoding",
                fd.path,
                src.cookie_line,
                quote(f"{line}  # decoded as {src.encoding}: every line of the file counts"),
            )
        )
    found += _hidden_text(fd, {n: src.git_lines[n - 1] for n in fd.added if n <= len(src.git_lines)})
    found += [
        dataclasses.replace(f, line=src.git_line(f.line)) if f.line else f
        for f in scan_python(fd.path, src.text, src.python_lines(set(fd.added)), fd.added)
    ]
    return found


def _hidden_text(fd: FileDiff, lines: dict[int, str]) -> list[Finding]:
    """`hidden-text`: added lines holding a break git does not count (a lone CR), one other
    readers take for a line end (form feed, U+2028...) or a bidi control, quoted with those
    escaped."""
    return [
        Finding("hidden-text", fd.path, n, quote(f"{shown(text)}  # {', '.join(odd)}"))
        for n, text in sorted(lines.items())
        if (odd := odd_characters(text))
    ]


def _by_name(fd: FileDiff) -> list[Finding]:
    p = PurePosixPath(fd.path)
    out = []
    if fd.binary:
        out.append(Finding("binary-file", fd.path, 0, "binary file"))
    if fd.new_file:
        if p.name in ("sitecustomize.py", "usercustomize.py") or p.suffix == ".pth":
            out.append(Finding("startup-hook", fd.path, 0, f"new file {p.name}"))
        elif p.suffix == ".py" and (p.stem in SHADOWED or (p.name == "__init__.py" and p.parent.name in SHADOWED)):
            out.append(
                Finding(
                    "shadow-module", fd.path, 0, f"new file {fd.path}: a module of that name is imported by benches"
                )
            )
    return out


@dataclass(frozen=True)
class FileDiff:
    """One file of a unified diff."""

    path: str
    """The candidate's path (the old one for a deleted file)."""
    added: dict[int, str] = field(default_factory=dict)
    """New-file line number -> added line."""
    new_file: bool = False
    deleted: bool = False
    binary: bool = False
    link: str = ""
    """What the new version is when it is a link, "symlink" (mode 120000) or "gitlink"
    (160000): its content in the diff is a path or a commit, not the code that runs."""


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_diff(text: str) -> list[FileDiff]:
    """The files of a unified git diff with default prefixes (`git diff --src-prefix=a/
    --dst-prefix=b/ --no-renames BEST TREE`: new files included, renames as delete + add)."""
    files: list[FileDiff] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("diff --git "):
            i += 1
            continue
        header = lines[i]
        i += 1
        old = new = None
        new_file = deleted = binary = False
        link = ""
        added: dict[int, str] = {}
        while i < len(lines) and not lines[i].startswith("diff --git "):
            line = lines[i]
            if line.startswith(("new file mode ", "new mode ")):
                new_file = new_file or line.startswith("new file mode")
                link = _LINK_MODES.get(line.rsplit(" ", 1)[-1].strip(), "")
            elif line.startswith("index ") and line.count(" ") == 2:  # "index a..b 120000": mode unchanged
                link = _LINK_MODES.get(line.rsplit(" ", 1)[-1].strip(), link)
            elif line.startswith("deleted file mode"):
                deleted = True
            elif line.startswith("Binary files ") or line.startswith("GIT binary patch"):
                binary = True
            elif line.startswith("--- "):
                old = _diff_path(line[4:], "a/")
            elif line.startswith("+++ "):
                new = _diff_path(line[4:], "b/")
            elif (m := _HUNK.match(line)) is not None:
                old_left = int(m.group(1)) if m.group(1) is not None else 1
                new_at = int(m.group(2))
                new_left = int(m.group(3)) if m.group(3) is not None else 1
                i += 1
                while i < len(lines) and (old_left > 0 or new_left > 0):
                    body = lines[i]
                    if body.startswith("+"):
                        added[new_at] = body[1:]
                        new_at += 1
                        new_left -= 1
                    elif body.startswith("-"):
                        old_left -= 1
                    elif body.startswith("\\"):
                        pass  # "\ No newline at end of file"
                    else:
                        new_at += 1
                        new_left -= 1
                        old_left -= 1
                    i += 1
                continue
            i += 1
        path = new or old or _header_path(header)
        if path:
            files.append(FileDiff(path, added, new_file, deleted, binary, "" if deleted else link))
    return files


_LINK_MODES = {"120000": "symlink", "160000": "gitlink"}


def _diff_path(raw: str, prefix: str) -> str | None:
    raw = raw.rstrip("\t").split("\t")[0]
    if raw == "/dev/null":
        return None
    if raw.startswith('"') and raw.endswith('"'):
        raw = _unquote(raw[1:-1])
    return raw[len(prefix) :] if raw.startswith(prefix) else raw


def _header_path(header: str) -> str | None:
    m = re.match(r'^diff --git "?a/(.+?)"? "?b/(.+?)"?$', header)
    return _unquote(m.group(2)) if m else None


def _unquote(s: str) -> str:
    """git's C-style quoting of unusual paths (octal bytes of UTF-8, \\t, \\n, \\", \\\\)."""
    out = bytearray()
    i = 0
    simple = {"n": 10, "t": 9, '"': 34, "\\": 92, "a": 7, "b": 8, "f": 12, "r": 13, "v": 11}
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", s[i + 1 : i + 4]):
                out.append(int(s[i + 1 : i + 4], 8))
                i += 4
                continue
            if nxt in simple:
                out.append(simple[nxt])
                i += 2
                continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", errors="replace")


def new_file_diff(path: str, text: str | None) -> str:
    """A git-style diff that adds `path` whole (None: a binary file): for files the candidate
    created that `git diff` does not show (ignored by a .gitignore it may have edited)."""
    if text is None:
        return f"diff --git a/{path} b/{path}\nnew file mode 100644\nBinary files /dev/null and b/{path} differ\n"
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )
