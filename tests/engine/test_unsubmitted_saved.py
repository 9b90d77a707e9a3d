"""What an engineer leaves in cand/ and no iteration holds (a manual proposer's edits not yet
submitted) survives the reset that puts cand/ back at BEST: kept as a patch under saved/ and
said (a new user's hand edits were wiped by `kopt stop` and by the next `kopt run`)."""

from __future__ import annotations

import subprocess

from kopt_supervisor.engine.daemon import run_engine
from kopt_supervisor.engine.workspace import Workspace


def test_edits_left_in_cand_are_saved_before_its_reset_and_apply_back(baselined) -> None:
    repo, root = baselined([])
    ws = Workspace(root, "t")
    cand = ws.dir / "cand"
    kernel = next(p for p in sorted(cand.rglob("*.py")) if ".git" not in p.parts)
    before = kernel.read_text()
    kernel.write_text(before + "# my hand edit\n")
    (cand / "notes.txt").write_bytes(b"a new file\x00with a NUL\n")
    assert run_engine(ws, max_iters=0) == 0  # the start's recovery puts cand/ back at BEST
    assert kernel.read_text() == before and not (cand / "notes.txt").exists()
    (saved,) = sorted((ws.dir / "saved").glob("cand-lane0-*.diff"))
    assert "+# my hand edit" in saved.read_text()
    with ws.open_store(readonly=True) as store:
        said = [e.message for e in store.events() if e.kind == "recover" and "saved/" in e.message]
    assert said and "cand/ held changes no iteration holds" in said[0], said
    subprocess.run(["git", "apply", "--binary", str(saved)], cwd=cand, check=True)
    assert kernel.read_text().endswith("# my hand edit\n")
    assert (cand / "notes.txt").read_bytes() == b"a new file\x00with a NUL\n"


def test_a_clean_cand_saves_nothing(baselined) -> None:
    _, root = baselined([])
    ws = Workspace(root, "t")
    assert run_engine(ws, max_iters=0) == 0
    assert not (ws.dir / "saved").exists()
