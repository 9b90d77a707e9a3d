"""What git may run, and the environment it runs in: the settings that start a program,
neutralized at the command scope (fixed keys, and per-name keys for the names a repository's
config holds), the fixed environment of every git call, and the identity kopt commits as.

Pure: tables and functions of the config keys git reads (engine.gitops.invoke applies them).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple


class Actor(NamedTuple):
    name: str
    email: str


KOPT_AUTHOR = Actor("kopt", "kopt@localhost")


def author_env(author: Actor = KOPT_AUTHOR) -> dict[str, str]:
    """The variables that make `author` the author and committer of a commit (kopt's own
    name or address where `author` has none)."""
    name, email = author.name or KOPT_AUTHOR.name, author.email or KOPT_AUTHOR.email
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


# Executing /dev/null fails (EACCES): a value that names no program can ever start.
NO_PROGRAM = "/dev/null"

FIXED_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", NO_PROGRAM),
    ("core.fsmonitor", "false"),
    ("core.editor", ":"),  # git treats ":" as "no editor"
    ("sequence.editor", ":"),
    ("core.pager", "cat"),  # git treats "cat" as "no pager"
    ("core.askPass", ""),
    ("core.sshCommand", NO_PROGRAM),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("interactive.diffFilter", ""),
    ("core.attributesFile", os.devnull),  # only the tree's own .gitattributes count
    ("core.bare", "false"),
    ("core.sparseCheckout", "false"),  # sparse patterns would leave files unrestored
    ("core.sparseCheckoutCone", "false"),
    ("index.sparse", "false"),
    ("core.untrackedCache", "false"),  # a forged cache could hide untracked files
    ("core.splitIndex", "false"),
    ("core.fileMode", "true"),  # a mode change must show
    ("core.symlinks", "true"),
    ("core.ignoreCase", "false"),
    ("core.trustctime", "true"),  # ctime cannot be set back by a process: stat checks hold
    ("core.checkStat", "default"),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.useReplaceRefs", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("tag.forceSignAnnotated", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("merge.verifySignatures", "false"),
    ("gpg.format", "openpgp"),
    ("gpg.program", NO_PROGRAM),
    ("gpg.openpgp.program", NO_PROGRAM),
    ("gpg.x509.program", NO_PROGRAM),
    ("gpg.ssh.program", NO_PROGRAM),
    ("gpg.ssh.defaultKeyCommand", NO_PROGRAM),
    ("diff.external", ""),
    ("diff.tool", ""),
    ("diff.guitool", ""),
    ("merge.tool", ""),
    ("merge.guitool", ""),
    ("diff.ignoreSubmodules", "dirty"),  # never run git inside a nested repository
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.relative", "false"),
    ("color.ui", "false"),
    ("status.submoduleSummary", "false"),
    ("status.showUntrackedFiles", "normal"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("credential.helper", ""),  # an empty value clears the list of helpers
    ("protocol.allow", "never"),  # no transport at all: no ssh, proxy, remote helper
    ("uploadpack.packObjectsHook", ""),
    ("gc.auto", "0"),  # no background gc or maintenance started by a commit
    ("gc.autoDetach", "false"),
    ("maintenance.auto", "false"),
    ("init.templateDir", ""),
    ("advice.addEmbeddedRepo", "false"),
    ("advice.detachedHead", "false"),
)

# (section, key) of `section.<name>.key` entries that hold a program, and the neutral value.
PER_NAME_OVERRIDES: dict[tuple[str, str], str] = {
    ("filter", "clean"): "",  # an empty driver command is no command: content passes as is
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("filter", "required"): "false",
    ("diff", "command"): "",
    ("diff", "textconv"): "",
    ("merge", "driver"): "",
    ("difftool", "cmd"): "",
    ("difftool", "path"): "",
    ("mergetool", "cmd"): "",
    ("mergetool", "path"): "",
    ("credential", "helper"): "",
    ("remote", "uploadpack"): "",
    ("remote", "receivepack"): "",
    ("remote", "vcs"): "",
    ("remote", "proxy"): "",
    ("protocol", "allow"): "never",
    ("gpg", "program"): NO_PROGRAM,
    ("hook", "command"): "",
    ("browser", "cmd"): "",
    ("browser", "path"): "",
    ("man", "cmd"): "",
    ("man", "path"): "",
    ("submodule", "update"): "none",
}

# Key names (the part after the last dot, lowercased) that say the value is a program, for
# sections and names kopt cannot know in advance.
PROGRAM_KEY_SUFFIXES = (
    "command",
    "cmd",
    "program",
    "helper",
    "driver",
    "textconv",
    "askpass",
    "editor",
    "pager",
    "browser",
    "hook",
    "uploadpack",
    "receivepack",
)

# Environment variables set for every git call (after every GIT_* of kopt's own is dropped).
FIXED_ENV = {
    "LC_ALL": "C",
    "LANGUAGE": "C",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_PAGER": "cat",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_GRAFT_FILE": os.devnull,  # no info/grafts rewriting history
}


def config_overrides(entries: Sequence[str]) -> dict[str, str]:
    """The command-scope settings that neutralize every program-running setting, given the
    config keys git reads (as `git config --list` writes them: section and key lowercased,
    the subsection as written)."""
    out = dict(FIXED_OVERRIDES)
    fixed = {k.lower() for k in out}
    for key in entries:
        section, _, rest = key.partition(".")
        section = section.lower()
        sub, dot, name = rest.rpartition(".")
        name = name.lower()
        if key.lower() in fixed:
            continue
        if section == "pager" and not dot:
            out[key] = "false"
        elif dot and (section, name) in PER_NAME_OVERRIDES:
            out[key] = PER_NAME_OVERRIDES[(section, name)]
        elif name.endswith(PROGRAM_KEY_SUFFIXES):
            out[key] = ""
    return out
