"""Writes the synthesised range samples of tests/data (see README.md): NOT captures.

    python3 tests/data/synth_range_samples.py        # from the repository root

ncu_nvtx_*/: the two CSVs kopt prints from one ncu report (NcuProfiler.after_commands):
`ncu_import.csv` (`ncu --import R --csv --page raw --print-units base --print-kernel-base
function`) and `ncu_nvtx.csv` (the same with `--print-nvtx-rename kernel`: a launch made
inside an NVTX push/pop range is named after its innermost range). The raw-page layout is
the one of tests/data/ncu_doc_raw_page.csv; the renaming follows the ncu CLI documentation
("rename kernels with the most recent enclosing NVTX push/pop range").

rocprofv3_ranges_*/: `kopt_<pid>_kernel_trace.csv`, `_marker_api_trace.csv` and
`_hip_api_trace.csv` with the columns rocprofiler-sdk's rocprofv3 writes (its
source/docs/data/*.csv and source/lib/rocprofiler-sdk-tool/generateCSV.cpp).

The workload imitates kopt's harness for a bench with config columns dclass and n, three
configs (dclass=narrow: n=1024, n=2048; dclass=wide: n=4096): per config an input fill
outside any range, one warm-up call and six timed calls each inside a range
`kopt:dclass=<d>,n=<n>` (the same name every time), an L2 flush before each timed call
outside the ranges. Durations carry a seeded pseudo-random spread (0.3%), so the files are
the same every run.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

DATA = Path(__file__).resolve().parent
CONFIGS = (("narrow", 1024, 5000.0), ("narrow", 2048, 9000.0), ("wide", 4096, 600000.0))
TIMED = 6
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC","dram__bytes.sum","gpu__time_duration.sum","launch__registers_per_thread"')
UNITS = '"","","","","","","","","","","","byte","nsecond","register/thread"'


def rng_for(name: str) -> random.Random:
    return random.Random(sum(map(ord, name)) * 7919)


def workload(
    rng: random.Random,
    *,
    kernel: dict[str, str] | None = None,
    scale: dict[str, float] | None = None,
    outside: dict[str, tuple[str, float]] | None = None,
    split: dict[str, tuple[str, str]] | None = None,
) -> list[tuple[str, float, str]]:
    """[(kernel, ns, range)] in launch order; range "" = outside any range.

    kernel: class -> the name of the config's kernel (default _rms_kernel); scale: class ->
    factor on its time; outside: class -> (kernel, ns) launched once per config outside the
    ranges (work moved out); split: class -> two kernels sharing the config's time."""
    kernel, scale, outside, split = kernel or {}, scale or {}, outside or {}, split or {}
    out: list[tuple[str, float, str]] = []

    def jitter(ns: float) -> float:
        return round(ns * (1.0 + rng.gauss(0.0, 0.003)))

    for dclass, n, ns in CONFIGS:
        rng_name = f"kopt:dclass={dclass},n={n}"
        out.append(("fill_kernel", jitter(3000.0), ""))
        if dclass in outside:
            name, extra = outside[dclass]
            out.append((name, jitter(extra), ""))
        for call in range(1 + TIMED):
            if call:
                out.append(("flush_l2_kernel", jitter(20000.0), ""))
            t = ns * scale.get(dclass, 1.0)
            if dclass in split:
                a, b = split[dclass]
                out.append((a, jitter(t * 0.55), rng_name))
                out.append((b, jitter(t * 0.5), rng_name))
            else:
                out.append((kernel.get(dclass, "_rms_kernel"), jitter(t), rng_name))
    return out


def ncu_pair(folder: Path, launches: list[tuple[str, float, str]], pid: str = "4242") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    expect(folder, launches, "synthesised by tests/data/synth_range_samples.py to the documented ncu CSV "
           "layouts (raw page; --print-nvtx-rename kernel); not a capture", "ncu")
    plain, renamed = [HEADER, UNITS], [HEADER, UNITS]
    for i, (name, ns, rng_name) in enumerate(launches):
        for rows, shown in ((plain, name), (renamed, rng_name or name)):
            rows.append(f'"{i}","{pid}","python3.12","127.0.0.1","{shown}","1","7","(256, 1, 1)",'
                        f'"(1024, 1, 1)","0","9.0","{int(ns * 3000):,}","{int(ns):,}","32"')
    prof = [f"==PROF== Connected to process {pid} (/usr/bin/python3.12)",
            f"==PROF== Disconnected from process {pid}"]
    (folder / "ncu_import.csv").write_text("\n".join(prof + plain) + "\n")
    (folder / "ncu_nvtx.csv").write_text("\n".join(prof + renamed) + "\n")


KERNEL_HEAD = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
               '"Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count",'
               '"Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z",'
               '"Grid_Size_X","Grid_Size_Y","Grid_Size_Z"')
API_HEAD = '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"'


def rocprof_set(folder: Path, launches: list[tuple[str, float, str]], *, pid: int = 7001,
                untraced: tuple[str, ...] = (), nested: dict[str, str] | None = None) -> None:
    """One process, one thread: each launch a hipLaunchKernel call; each ranged launch in
    its own push/pop range (the harness opens one range per call: consecutive launches of
    one call share it). untraced: kernels dispatched with no HIP API row (a runtime-internal
    fill). nested: range name -> a second kopt range opened inside it around its launches."""
    folder.mkdir(parents=True, exist_ok=True)
    nested = nested or {}
    tid, t = pid, 1_000_000_000
    kernels, markers, calls = [KERNEL_HEAD], [API_HEAD], [API_HEAD]
    corr = 0
    open_range: tuple[str, int] | None = None

    def close(at: int) -> None:
        nonlocal open_range
        if open_range is not None:
            name, start = open_range
            if name in nested:
                markers.append(f'"MARKER_CORE_API","{nested[name]}",{pid},{tid},{corr + 900000},{start + 50},{at - 50}')
            markers.append(f'"MARKER_CORE_API","{name}",{pid},{tid},{corr + 800000},{start},{at}')
            open_range = None

    for dispatch, (name, ns, rng_name) in enumerate(launches, start=1):
        corr += 1
        if open_range is not None and (rng_name != open_range[0] or name in ("_rms_kernel", "_pa_first")):
            close(t)
            t += 1000
        if rng_name and open_range is None:
            open_range = (rng_name, t)
            t += 200
        if name not in untraced:
            calls.append(f'"HIP_RUNTIME_API","hipLaunchKernel",{pid},{tid},{corr},{t},{t + 4000}')
        t += 5000
        start = t + 10000
        kernels.append(f'"KERNEL_DISPATCH","Agent 4",1,0,{tid},{dispatch},{10 + dispatch % 7},"{name}",{corr},'
                       f'{start},{start + int(ns)},0,0,32,0,24,256,1,1,4096,1,1')
        if not rng_name:
            close(t)
        t = start + int(ns) + 2000
    close(t)
    markers.append(f'"MARKER_CORE_API","bench start",{pid},{tid},{corr + 700000},900000000,900000000')
    (folder / f"kopt_{pid}_kernel_trace.csv").write_text("\n".join(kernels) + "\n")
    (folder / f"kopt_{pid}_marker_api_trace.csv").write_text("\n".join(markers) + "\n")
    (folder / f"kopt_{pid}_hip_api_trace.csv").write_text("\n".join(calls) + "\n")


def expect(folder: Path, launches: list[tuple[str, float, str]], origin: str, tool: str) -> None:
    """expect.json: kernel totals (tests/profile/test_profile_parsers.py, empty regex) and the
    launches per (range, note, kernel) (tests/profile/test_profile_attribution.py)."""
    totals: dict[str, list[float]] = {}
    for name, ns, _ in launches:
        totals.setdefault(name, []).append(ns)
    anchor = min(totals, key=lambda k: (len(totals[k]), -sum(totals[k])))
    doc = {
        "origin": origin,
        "kernel_regex": "",
        "launches": len(launches),
        "calls": len(totals[anchor]),
        "anchor": anchor,
        "target_total_ns": sum(ns for _, ns, _ in launches),
        "kernels": {k: {"calls": len(v), "total_ns": sum(v)} for k, v in sorted(totals.items())},
        "tool": tool,
        "groups": groups(launches, untraced=("fill_kernel",) if tool == "rocprofv3" else ()),
    }
    (folder / "expect.json").write_text(json.dumps(doc, indent=2) + "\n")


def groups(launches: list[tuple[str, float, str]], untraced: tuple[str, ...]) -> list[list[object]]:
    """[range, note, kernel, launches], sorted, as the adapters should read them back."""
    count: dict[tuple[str, str, str], int] = {}
    for name, _, rng_name in launches:
        note = "its launch call is not in the HIP API trace" if name in untraced else ""
        key = ("" if note else rng_name, note, name)
        count[key] = count.get(key, 0) + 1
    return [[*k, n] for k, n in sorted(count.items())]


def main() -> None:
    ncu_pair(DATA / "ncu_nvtx_best", workload(rng_for("best")))
    # the candidate renames the wide class's kernel (same work) and speeds up dclass=narrow by 3.7%
    ncu_pair(DATA / "ncu_nvtx_renamed",
             workload(rng_for("renamed"), kernel={"wide": "_rms_whole_tiles"}, scale={"narrow": 0.963}))
    # the candidate moves 40% of the narrow kernels' work into a kernel launched before the ranges
    ncu_pair(DATA / "ncu_nvtx_moved",
             workload(rng_for("moved"), kernel={"narrow": "_rms_apply"}, scale={"narrow": 0.6},
                      outside={"narrow": ("_rms_precompute", 0.4 * 7 * 7000.0)}))
    best = workload(rng_for("roc-best"))
    rocprof_set(DATA / "rocprofv3_ranges_best", best, untraced=("fill_kernel",))
    expect(DATA / "rocprofv3_ranges_best", best,
           "synthesised by tests/data/synth_range_samples.py to rocprofv3's documented columns; not a capture",
           "rocprofv3")
    split = workload(rng_for("roc-split"), split={"narrow": ("_pa_first", "_pa_second")})
    rocprof_set(DATA / "rocprofv3_ranges_split", split, untraced=("fill_kernel",),
                nested={"kopt:dclass=wide,n=4096": "inner_region"})
    expect(DATA / "rocprofv3_ranges_split", split,
           "synthesised by tests/data/synth_range_samples.py to rocprofv3's documented columns; not a capture",
           "rocprofv3")


if __name__ == "__main__":
    main()
