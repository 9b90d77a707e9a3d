"""Reading a candidate's diff for constructs that reach outside the kernel (DESIGN §12). Pure.

A candidate runs inside the bench's process, so it can patch the bench's timer, read the
reference result from the caller's frame, write the CSV itself and exit, cache results
between calls. kopt reads the candidate's diff against BEST for such constructs and sends a
candidate that has any to review with the lines quoted (`review_reason`).

    findings = scan(diff_text, read=lambda path: (cand / path).read_text(), allow=cfg.target.allow_constructs)

- Python files: `ast` on the candidate's whole new version of each changed .py file
  (`diffscan.python`, with the names it knows in `diffscan.names`; state kept between calls
  in `diffscan.state`, results that compute when read in `diffscan.lazy`), so aliases,
  `from x import y as z` and a `t = time` are resolved; only
  findings on the candidate's added lines count, or on unchanged lines that use a name the
  candidate bound anew (a changed `import x as t` makes an old `t.f = g` the candidate's).
  String constants passed to exec/eval/compile are parsed and scanned too; C-like code in
  Python strings (load_inline sources) meets the C rules.
- C, C++, CUDA, HIP: text rules on the added lines (`diffscan.text.C_RULES`).
- Every other text file: the generic rules (LD_PRELOAD, --wrap=, KOPT_, /proc/; prose and
  data files only the first). The diff itself: `diffscan.diff`.
- New files named like a module the bench imports (time.py, torch.py), startup hooks
  (sitecustomize.py, *.pth) and binary files are findings by their name.

`RULES` lists every rule id with what it catches; `[target].allow_constructs` entries
"rule-id:path-glob" (`parse_allow`) let a target's legitimate cases through.
Limits: a static reading. It cannot see code that is built at run time from data it does
not hold, nor what an unchanged file does when called differently; the plausibility checks
and the fresh-process re-verification remain the other layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

from kopt_supervisor.engine.diffscan.diff import FileDiff, new_file_diff, parse_diff
from kopt_supervisor.engine.diffscan.findings import (
    RULES,
    Allow,
    Finding,
    parse_allow,
    review_reason,
)
from kopt_supervisor.engine.diffscan.python import scan_python
from kopt_supervisor.engine.diffscan.text import (
    C_RULES,
    C_SUFFIXES,
    DOC_SUFFIXES,
    GENERIC_RULES,
    PY_SUFFIXES,
    PY_TEXT_RULES,
    SHADOWED,
    text_rules,
)

__all__ = ["RULES", "Allow", "FileDiff", "Finding", "new_file_diff", "parse_allow", "parse_diff", "review_reason",
           "scan"]


def scan(diff: str, read: Callable[[str], str | None], *, allow: Sequence[str | Allow] = (),
         truncated: bool = False) -> list[Finding]:
    """The findings of a candidate's diff, in file and line order, without those the
    allow-list covers. `read(path)` gives the candidate's new version of a changed file (None
    when it cannot: then the added lines are all there is). truncated: the caller cut the
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
        suffix = PurePosixPath(fd.path).suffix.lower()
        first = fd.added.get(1, "")
        if suffix in PY_SUFFIXES or (not suffix and first.startswith("#!") and "python" in first):
            source = read(fd.path)
            found += scan_python(fd.path, source, fd.added) if source is not None else []
            if source is None:
                found += text_rules(fd.path, fd.added, PY_TEXT_RULES + GENERIC_RULES)
        elif suffix in C_SUFFIXES:
            found += text_rules(fd.path, fd.added, C_RULES + GENERIC_RULES, strip_comments=True)
        elif suffix in DOC_SUFFIXES:
            found += text_rules(fd.path, fd.added, GENERIC_RULES[:1])
        else:
            found += text_rules(fd.path, fd.added, GENERIC_RULES)
    unique = {(f.path, f.line, f.rule): f for f in found}
    kept = [f for _, f in sorted(unique.items()) if not any(a.covers(f) for a in allows)]
    cut = [Finding("diff-truncated", "", 0, f"the diff was cut at {len(diff)} characters")] if truncated else []
    return kept + cut


def _by_name(fd: FileDiff) -> list[Finding]:
    p = PurePosixPath(fd.path)
    out = []
    if fd.binary:
        out.append(Finding("binary-file", fd.path, 0, "binary file"))
    if fd.new_file:
        if p.name in ("sitecustomize.py", "usercustomize.py") or p.suffix == ".pth":
            out.append(Finding("startup-hook", fd.path, 0, f"new file {p.name}"))
        elif p.suffix == ".py" and (p.stem in SHADOWED or (p.name == "__init__.py" and p.parent.name in SHADOWED)):
            out.append(Finding("shadow-module", fd.path, 0, f"new file {fd.path}: a module of that name is imported "
                                                             "by benches"))
    return out
