"""An index file read without starting git: its entries' paths, modes and flags.

Only the plain file git writes is read here: versions 2 to 4, a trailing checksum that
verifies with the repository's hash, entries in git's order with the modes git writes, and no
extension that changes what the entries are. Everything else (a split index, a sparse index,
an end-of-entries or offset table that git may read the entries by instead, an extension git
would refuse, a link or FIFO in the file's place, a truncated or padded file) answers None,
and the caller asks git (`git ls-files`), which then reads the file as it always did. So an
answer from here is the one git would give; it only saves the process.

git's reader (read-cache.c, `do_read_index` and `create_from_disk`, unchanged from 2.31 to
2.5x) is the reference: each entry's 16-bit flags hold assume-valid (0x8000), extended
(0x4000), the stage and the name's length; the extended flags (version 3 and later) hold
skip-worktree (0x4000) and intent-to-add (0x2000), and any other bit makes git die; a version
4 name strips bytes from the end of the previous one and appends its own. git does not verify
the checksum when it reads: a file whose checksum does not verify is one kopt did not see git
write, so git is asked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kopt_supervisor.engine.sandbox.paths import read_output

MAX_BYTES = 64 << 20
"""A larger index is left to git (a repository of a million files)."""

_HASHES = {20: hashlib.sha1, 32: hashlib.sha256}
_MODES = frozenset({0o100644, 0o100755, 0o120000, 0o160000})
# optional extensions (an upper-case first letter) that do not change the entries: the cache
# tree, resolve-undo, the untracked cache and the fsmonitor's data (kopt turns both off)
_EXTENSIONS = frozenset({b"TREE", b"REUC", b"UNTR", b"FSMN"})
_EOIE_WITH_HEADER = 4 + 4 + 4 + 20  # "EOIE", its size, an offset and a SHA-1, whatever the repository's hash
_NAMEMASK = 0x0FFF
_ASSUME_VALID = 0x8000
_EXTENDED = 0x4000
_SKIP_WORKTREE = 0x4000  # of the extended flags
_INTENT_TO_ADD = 0x2000


@dataclass(frozen=True)
class Entry:
    path: str  # as git prints it with -z (surrogate-escaped)
    mode: int
    stage: int
    assume_valid: bool
    skip_worktree: bool

    @property
    def flagged(self) -> bool:
        """What `git ls-files -v` tags `S` (skip-worktree, stage 0) or in lower case (assume-valid)."""
        return self.assume_valid or (self.skip_worktree and self.stage == 0)


def read_index(path: str | Path, rawsz: int | None = None) -> list[Entry] | None:
    """The entries of the index file at `path`, or None where git must be asked (see the
    module's docstring). `rawsz`: the repository's hash size (20 for SHA-1, 32 for SHA-256);
    None accepts the one hash whose checksum verifies."""
    data = _read(Path(path))
    if data is None:
        return None
    size = _verified_hash_size(data, rawsz)
    if size is None:
        return None
    return _parse(data, size)


def _read(path: Path) -> bytes | None:
    """The file's bytes, read as any file another process could have written
    (sandbox.paths.read_output: no link, no FIFO, regular files only); None past MAX_BYTES."""
    try:
        data = read_output(path, MAX_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_BYTES else None


def _verified_hash_size(data: bytes, rawsz: int | None) -> int | None:
    sizes = [rawsz] if rawsz is not None else list(_HASHES)
    ok = [
        n
        for n in sizes
        if n in _HASHES and len(data) >= 12 + n and _HASHES[n](data[: len(data) - n]).digest() == data[len(data) - n :]
    ]
    return ok[0] if len(ok) == 1 else None


def _varint(data: bytes, p: int, end: int) -> tuple[int, int] | None:
    """git's offset varint (varint.c); None where git's own decoding would overflow."""
    if p >= end:
        return None
    c = data[p]
    p += 1
    val = c & 127
    while c & 128:
        val += 1
        if val >= 1 << 32 or p >= end:
            return None
        c = data[p]
        p += 1
        val = (val << 7) + (c & 127)
    return val, p


def _parse(data: bytes, rawsz: int) -> list[Entry] | None:
    end = len(data) - rawsz
    if data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    tail = end - _EOIE_WITH_HEADER
    if tail >= 12 and data[tail : tail + 4] == b"EOIE":
        return None  # git may read the extensions, and then the entries, from where it says
    fixed = 40 + rawsz + 2  # stat data, mode, ids, sizes; the object id; the flags
    entries: list[Entry] = []
    prev = b""
    off = 12
    for i in range(count):
        if off + fixed > end:
            return None
        mode = int.from_bytes(data[off + 24 : off + 28], "big")
        flags = int.from_bytes(data[off + fixed - 2 : off + fixed], "big")
        p = off + fixed
        extended = 0
        if flags & _EXTENDED:
            if version < 3 or p + 2 > end:
                return None
            extended = int.from_bytes(data[p : p + 2], "big")
            p += 2
            if extended & ~(_SKIP_WORKTREE | _INTENT_TO_ADD):
                return None  # git dies: "unknown index entry format"
        length = flags & _NAMEMASK
        if version == 4:
            got = _varint(data, p, end)
            if got is None:
                return None
            strip, p = got
            if i and strip > len(prev):
                return None  # git dies: "malformed name field"
            copy = len(prev) - strip if i else 0
            nul = data.find(b"\0", p, end)
            if nul < 0:
                return None
            name = prev[:copy] + data[p:nul]
            off = nul + 1
        else:
            if length == _NAMEMASK:
                nul = data.find(b"\0", p, end)
                if nul < 0:
                    return None
            else:
                nul = p + length
                if nul >= end or data[nul] != 0:
                    return None
            name = data[p:nul]
            off += (fixed + (2 if flags & _EXTENDED else 0) + len(name) + 8) & ~7
            if off > end:
                return None
        if (length == _NAMEMASK and len(name) < _NAMEMASK) or (length != _NAMEMASK and len(name) != length):
            return None  # a length that does not match the name: git would read another name
        if not name or b"\0" in name or mode not in _MODES:
            return None
        stage = (flags >> 12) & 3
        if i and (prev > name or (prev == name and (entries[-1].stage == 0 or entries[-1].stage >= stage))):
            return None  # out of git's order
        entries.append(
            Entry(
                name.decode("utf-8", "surrogateescape"),
                mode,
                stage,
                bool(flags & _ASSUME_VALID),
                bool(extended & _SKIP_WORKTREE),
            )
        )
        prev = name
    while off < end:  # the extensions
        if off + 8 > end or data[off : off + 4] not in _EXTENSIONS:
            return None
        off += 8 + int.from_bytes(data[off + 4 : off + 8], "big")
    return entries if off == end else None
