"""Reading a candidate's diff for constructs that reach outside the kernel (DESIGN §12). Pure.

A candidate runs inside the bench's process, so it can patch the bench's timer, read the
reference result from the caller's frame, write the CSV itself and exit, cache results
between calls. kopt reads the candidate's diff against BEST for such constructs and sends a
candidate that has any to review with the lines quoted (`review_reason`). The scan is
advisory: a proposer reads these rules too, so a finding adds a review and no verdict rests
on the absence of one (docs/security.md lists what still gets through).

    findings = scan(diff_text, read=lambda path: police.read_for_scan(cand, path), allow=cfg.target.allow_constructs)

- The diff (`diffscan.diff`): lines as git counts them (LF only), links named.
- Python files: the whole new version, as bytes, decoded as the interpreter decodes them
  with git's lines mapped onto Python's (`diffscan.findings.read_python`: a lone CR, a declared encoding);
  a file not read as the diff shows it is `unread`, an encoding other than UTF-8
  `source-encoding` (every line counts), an added line with a break one reader sees and
  another does not, or a bidi control, `hidden-text`. Then `ast` (`diffscan.python`, with
  the names it knows in `diffscan.qualified`, `diffscan.giveaways` and `diffscan.state_names`,
  the bindings in `diffscan.bindings`; state kept
  between calls in `diffscan.state`, results that compute when read in `diffscan.lazy`,
  input-keyed caches in `diffscan.caches`), so aliases, `from x import y as z`, `t = time`,
  a loop variable or parameter handed a module are resolved; only findings on the
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

`RULES` lists every rule id with what it catches; `[target].allow_constructs` entries
"rule-id:path-glob" (`parse_allow`) let a target's legitimate cases through.
Limits: a static reading. It cannot see code that is built at run time from data it does
not hold, nor what an unchanged file does when called differently; the correctness rule,
the output's shape, the plausibility checks, the profiler, the output audit and the
fresh-process re-decision are the layers a verdict rests on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from kopt_supervisor.engine.diffscan.diff import FileDiff, new_file_diff, parse_diff
from kopt_supervisor.engine.diffscan.findings import (
    C_RULES,
    C_SUFFIXES,
    CYTHON_SUFFIXES,
    DOC_SUFFIXES,
    GENERIC_RULES,
    PY_SUFFIXES,
    PY_TEXT_RULES,
    RULES,
    SHADOWED,
    Allow,
    Finding,
    Undecodable,
    odd_characters,
    parse_allow,
    quote,
    read_python,
    review_reason,
    shown,
    text_rules,
)
from kopt_supervisor.engine.diffscan.python import scan_python

__all__ = [
    "RULES",
    "Allow",
    "FileDiff",
    "Finding",
    "new_file_diff",
    "parse_allow",
    "parse_diff",
    "review_reason",
    "scan",
]


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
