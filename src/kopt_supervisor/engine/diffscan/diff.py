"""A unified git diff, file by file: paths, added lines (new numbering), new/deleted/binary,
links. Pure.

Lines are what git counts: text between LF bytes. `str.splitlines` would also break at a form
feed, a lone CR, U+2028, \x1c-\x1e or \x85 inside an added line, and every added line after it
would be numbered one off (a payload on the next line then looked unchanged)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


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
