#!/usr/bin/env python3
# bench_smoke.py — the CI smoke test of the benchmark matrix (meson test --suite smoke).
#
# Runs every bench_<family> binary given on the command line with --sb_matrix=smoke
# (tiny sizes, one repetition, tiny min_time) into a temporary json dir, plus the
# `semantics` program, then checks each JSON: it parses, has the sb_* context of
# docs/BENCHMARKS.md, every run name is <sb_family>/key:value/... with the contract's
# keys in order, no run reported an error (but "no CUDA device" in GPU binaries on a
# machine without a GPU), counters are numbers. Then it runs scripts/collect
# (when that script exists) into a temporary results root with --no-plots and checks
# that results/<sb_machine>/ holds raw/*.json, raw/semantics.json, machine.json and a
# non-empty TABLES.md. Before collect, scripts/recheck re-measures one pair of runs
# through the real binary (its exact-name filter in Google Benchmark's regex engine).
# Exit 0 on success, 1 with a message naming what failed.
#
# Usage: bench_smoke.py --collect=SCRIPT --semantics EXE BENCH_EXE...
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from stridebench.names import FAMILIES, KEYS  # PYTHONPATH: scripts/ (benchmarks/meson.build)
NO_DEVICE = "no CUDA device"  # GPU runs skip with this where no GPU is present
GBENCH_SEGMENTS = re.compile(r"^(manual_time|real_time|repeats:\d+|iterations:\d+|"
                             r"min_time:[\d.]+|min_warmup_time:[\d.]+|threads:\d+)$")
CONTEXT = ["sb_machine", "sb_cpu_model", "sb_cores", "sb_threads", "sb_simd", "sb_cpu_allocator", "sb_caches",
           "sb_cpu_arch", "sb_tuning", "sb_tuning_basis", "sb_fma512",
           "sb_compiler", "sb_flags", "sb_openmp", "sb_gpu_name", "sb_gpu_memory",
           "sb_gpu_sms", "sb_gpu_cc", "sb_gpu_l2", "sb_cuda_driver", "sb_cuda_runtime", "sb_git_revision",
           "sb_date", "sb_matrix", "sb_family"]
NONEMPTY = ["sb_machine", "sb_cpu_model", "sb_cores", "sb_threads", "sb_simd", "sb_cpu_allocator",
            "sb_caches", "sb_cpu_arch", "sb_tuning", "sb_tuning_basis", "sb_fma512", "sb_compiler", "sb_flags", "sb_git_revision", "sb_date",
            "sb_matrix", "sb_family"]


class Fail(Exception):
    pass


def check_name(name, family):
    segs = name.split("/")
    if segs[0] != family:
        raise Fail(f"{name}: family is not {family}")
    last = -1
    seen = set()
    ours = [s for s in segs[1:] if not GBENCH_SEGMENTS.match(s)]
    # Google Benchmark's segments come after ours; ours are key:value in order.
    for s in ours:
        key, sep, value = s.partition(":")
        if not sep or key not in KEYS or not value:
            raise Fail(f"{name}: segment {s!r} is not key:value with a contract key")
        if key in seen or KEYS.index(key) < last:
            raise Fail(f"{name}: key {key!r} repeated or out of order")
        seen.add(key)
        last = KEYS.index(key)
    for need in ("op", "impl", "device"):
        if need not in seen:
            raise Fail(f"{name}: no {need}: segment")
    if "regime:" in name:
        raise Fail(f"{name}: the regime belongs in the label")


def check_json(path):
    with open(path) as f:
        doc = json.load(f)
    ctx = doc.get("context", {})
    for k in CONTEXT:
        if k not in ctx:
            raise Fail(f"{path}: context has no {k}")
    for k in NONEMPTY:
        if not ctx[k]:
            raise Fail(f"{path}: context {k} is empty")
    family = ctx["sb_family"]
    if ctx["sb_matrix"] != "smoke":
        raise Fail(f"{path}: sb_matrix is {ctx['sb_matrix']}")
    # Note [Machine slug] (bench_common.h): words, family/model, last-level cache, cores, GPU
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*?(-f\d+m\d+)?-l\d-\d+[mk]-\d+c(-[a-z0-9]+)*", ctx["sb_machine"]):
        raise Fail(f"{path}: sb_machine {ctx['sb_machine']!r} is not a slug")
    runs = doc.get("benchmarks", [])
    if not runs:
        raise Fail(f"{path}: no runs")
    for r in runs:
        if r.get("error_occurred") and r.get("error_message") != NO_DEVICE:
            raise Fail(f"{path}: {r['name']}: {r.get('error_message')}")
        check_name(r.get("run_name", r["name"]), family)
        label = r.get("label", "")
        if label and not re.fullmatch(r"regime:(L1|L2|LLC|DRAM)", label):
            raise Fail(f"{path}: {r['name']}: label {label!r}")
        if r.get("run_type") == "iteration":
            for k in ("bytes", "flop", "peak_alloc_bytes", "allocs_per_iter"):
                if k in r and not isinstance(r[k], (int, float)):
                    raise Fail(f"{path}: {r['name']}: counter {k} is not a number")
    no_device = all(r.get("error_occurred") and r.get("error_message") == NO_DEVICE for r in runs)
    return ctx["sb_machine"], len(runs), no_device


PROGRESS = re.compile(r"^\[ *(\d+)/(\d+)\] \d+:\d\d left  (\S+)  (.+)$")


def check_progress(exe, stdout, out, log):
    """Note [Progress lines] (bench_common.cpp): one line per case, k/N up to N = the
    cases in the JSON, Google Benchmark's own rows in the log file, not on the terminal."""
    lines = [m for m in (PROGRESS.match(l) for l in stdout.splitlines()) if m]
    with open(out) as f:
        names = {e["run_name"] for e in json.load(f)["benchmarks"]}
    if len(lines) != len(names) or any(int(m.group(2)) != len(names) for m in lines) or \
            [int(m.group(1)) for m in lines] != list(range(1, len(names) + 1)):
        raise Fail(f"{exe}: {len(lines)} progress lines for {len(names)} cases:\n{stdout[-2000:]}")
    if "_median" in stdout or "_stddev" in stdout:
        raise Fail(f"{exe}: Google Benchmark's aggregate rows reached the terminal")
    with open(log) as f:
        text = f.read()
    if not all(n.split("/min_time:")[0] in text for n in names):
        raise Fail(f"{log}: not every case's Google Benchmark row")


def check_progress_of_aggregates(exe, json_dir):
    """At quick, add_run shows only the aggregates (5 repetitions): one progress line for
    the case all the same, with its median (Note [Progress lines])."""
    first = subprocess.run([exe, "--sb_matrix=quick", "--benchmark_list_tests"], capture_output=True,
                           text=True).stdout.split()[0]
    log = os.path.join(json_dir, "aggregates.log")
    p = subprocess.run([exe, "--sb_matrix=quick", "--sb_progress", "--sb_log=" + log,
                        "--benchmark_filter=^" + re.escape(first) + "$"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [m for m in (PROGRESS.match(l) for l in p.stdout.splitlines()) if m]
    if p.returncode != 0 or len(lines) != 1 or lines[0].group(1, 2) != ("1", "1") or \
            not re.match(r"^[\d.]+ (ns|us|ms|s) \(sd \d+%\)$", lines[0].group(4)):
        raise Fail(f"{exe} at quick: progress {p.stdout[-1500:]}")


def check_keys(exe):
    """The binary's run-name keys (--sb_keys) are names.py's, in its order, and its
    family is one names.py knows: one vocabulary for both languages."""
    p = subprocess.run([exe, "--sb_keys"], capture_output=True, text=True)
    lines = p.stdout.split()
    if p.returncode != 0 or not lines or not lines[0].startswith("family:"):
        raise Fail(f"{exe} --sb_keys: exit {p.returncode}, {p.stdout[:200]!r}")
    if lines[0][len("family:"):] not in FAMILIES or tuple(lines[1:]) != tuple(KEYS):
        raise Fail(f"{exe} --sb_keys: {lines} differs from scripts/stridebench/names.py "
                   f"(FAMILIES {FAMILIES}, KEYS {KEYS})")


def check_run_overrides(exe, json_dir):
    """--sb_repetitions / --sb_min_time (what scripts/recheck gives each round) replace
    the matrix's; a bad value, or a bad or unknown --sb_gpu_* (the GPU rows' stopping
    rule), is refused with exit 2 and runs nothing."""
    first = subprocess.run([exe, "--sb_matrix=quick", "--benchmark_list_tests"], capture_output=True,
                           text=True).stdout.split()[0].split("/min_time:")[0]  # the suffix names the window
    out = os.path.join(os.path.dirname(json_dir), "overrides.json")  # beside the run's JSON: collect reads json_dir
    p = subprocess.run([exe, "--sb_matrix=quick", "--sb_repetitions=2", "--sb_min_time=0.001",
                        "--benchmark_filter=^" + re.escape(first) + "/", "--benchmark_out=" + out,
                        "--benchmark_out_format=json"], capture_output=True, text=True)
    if p.returncode != 0:
        raise Fail(f"{exe} --sb_repetitions=2 --sb_min_time=0.001 exited {p.returncode}: {p.stderr[-500:]}")
    with open(out) as f:
        its = [b for b in json.load(f)["benchmarks"] if b.get("run_type") == "iteration"]
    if len(its) != 2 or not all("/min_time:0.001/" in b["name"] and b["repetitions"] == 2 for b in its):
        raise Fail(f"{exe}: --sb_repetitions=2 --sb_min_time=0.001 ran {[b['name'] for b in its]}")
    # SB_TUNING (Note [Tuning by microarchitecture]): recorded in the context; malformed, refused
    p = subprocess.run([exe, "--sb_matrix=quick", "--sb_repetitions=1", "--sb_min_time=0.001",
                        "--benchmark_filter=^" + re.escape(first) + "/",
                        "--benchmark_out=" + out, "--benchmark_out_format=json"], capture_output=True, text=True,
                       env=dict(os.environ, SB_TUNING="kc=384,bands=32"))
    with open(out) as f:
        ctx = json.load(f)["context"]
    if p.returncode != 0 or not ctx["sb_tuning"].startswith("kc=384,") or ",bands=32," not in ctx["sb_tuning"] \
            or "SB_TUNING=kc=384,bands=32" not in ctx["sb_tuning_basis"]:
        raise Fail(f"{exe} under SB_TUNING=kc=384,bands=32: exit {p.returncode}, context {ctx.get('sb_tuning')!r} "
                   f"{ctx.get('sb_tuning_basis')!r}")
    p = subprocess.run([exe, "--benchmark_filter=^" + re.escape(first) + "/"], capture_output=True, text=True,
                       env=dict(os.environ, SB_TUNING="kc=7"))
    if p.returncode != 2 or "SB_TUNING='kc=7'" not in p.stderr:
        raise Fail(f"{exe} under SB_TUNING=kc=7: exit {p.returncode}, {p.stderr[-300:]!r}")
    for bad in ("--sb_repetitions=0", "--sb_repetitions=1.5", "--sb_min_time=-1", "--sb_min_time=abc",
                "--sb_gpu_max_rse=0", "--sb_gpu_max_seconds=abc", "--sb_gpu_min_samples=2.5", "--sb_gpu_throttle=2",
                "--sb_gpu_bogus=1"):
        p = subprocess.run([exe, bad, "--benchmark_filter=^" + re.escape(first) + "/"], capture_output=True, text=True)
        if p.returncode != 2 or bad.split("=")[0] not in p.stderr:
            raise Fail(f"{exe} {bad}: exit {p.returncode}, {p.stderr[-300:]!r}")


def check_one_warm_up_per_run(exe, json_dir):
    """Note [One warm-up per run] (bench_common.h): a repetition that follows one of the
    same run reuses its allocation counts, any other call measures its own. In order and
    with Google Benchmark's random interleaving (the re-check's), each run reports the
    same counts in every repetition, the same in both orders, and the counts its style
    implies: no allocation for out= and in-place, at least one out of place."""
    counts = []
    for extra in ([], ["--benchmark_enable_random_interleaving=true"]):
        out = os.path.join(os.path.dirname(json_dir), "warm_up.json")  # collect reads json_dir
        p = subprocess.run([exe, "--sb_matrix=smoke", "--sb_repetitions=3", "--benchmark_out=" + out,
                            "--benchmark_out_format=json", *extra], capture_output=True, text=True)
        if p.returncode != 0:
            raise Fail(f"{exe} --sb_repetitions=3 {' '.join(extra)} exited {p.returncode}: {p.stderr[-500:]}")
        with open(out) as f:
            its = [b for b in json.load(f)["benchmarks"] if b.get("run_type") == "iteration"]
        by = {}
        for b in its:
            by.setdefault(b["run_name"], set()).add((b["allocs_per_iter"], b["peak_alloc_bytes"]))
        for name, c in by.items():
            if len(c) != 1:
                raise Fail(f"{exe} {' '.join(extra)}: {name}: allocation counts differ between repetitions: {sorted(c)}")
            allocs = next(iter(c))[0]
            if ("/style:out/" in name or "/style:inplace/" in name) and allocs != 0 or \
                    "/style:outofplace" in name and allocs < 1:
                raise Fail(f"{exe} {' '.join(extra)}: {name}: allocs_per_iter {allocs}")
        counts.append({n: next(iter(c)) for n, c in by.items()})
    if counts[0] != counts[1]:
        diff = sorted(n for n in counts[0] if counts[0][n] != counts[1].get(n))
        raise Fail(f"{exe}: allocation counts differ between run orders: {diff[:4]}")


def recheck(py, script, json_dir, benches):
    """scripts/recheck --pair on two runs of the first CPU family, one round, through the
    real binary (Google Benchmark's own regex engine takes the exact-name filter):
    the pair must come back measured. False when the script is absent."""
    if not os.path.exists(script):
        print(f"bench_smoke: {script} not found: recheck step skipped")
        return False
    from stridebench import results as sbtables  # PYTHONPATH: scripts/ (benchmarks/meson.build)
    cpu = [e for e in benches if os.path.basename(e) in ("bench_baseline", "bench_copy", "bench_elementwise")]
    exe = (cpu or benches)[0]
    _, runs, _ = sbtables.load_gbench(os.path.join(json_dir, os.path.basename(exe)[len("bench_"):] + ".json"))
    names = [r.name for r in runs if r["device"] == "cpu"][:2]
    if len(names) < 2:
        raise Fail(f"{exe}: fewer than 2 CPU runs to re-check")
    print(f"== scripts/recheck --rounds 1 --pair {names[0]} {names[1]}", flush=True)
    p = subprocess.run([py, script, "--json-dir", json_dir, "--bench-dir", os.path.dirname(exe), "--rounds", "1",
                        "--pair", names[0], names[1]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout, end="")
    if p.returncode != 0:
        raise Fail(f"scripts/recheck exited with {p.returncode}")
    doc = sbtables.load_recheck(os.path.join(json_dir, "recheck.json"))
    [c] = doc["cases"]
    if (c["a"], c["b"]) != (names[0], names[1]) or len(c["rounds"]) != 1 or "ratio" not in c:
        raise Fail(f"recheck.json: the pair was not measured: {c}")
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--collect", default="")
    ap.add_argument("--semantics", required=True)
    ap.add_argument("benches", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sb-smoke-") as tmp:
        json_dir = os.path.join(tmp, "bench-json")
        slug = None
        gpu_only = []  # files whose every run skipped: no GPU here
        for exe in a.benches:
            stem = os.path.basename(exe)[len("bench_"):]
            out = os.path.join(json_dir, stem + ".json")
            print(f"== {os.path.basename(exe)} --sb_matrix=smoke", flush=True)
            log = os.path.join(json_dir, stem + ".log")  # as `ninja benchmark` runs them
            p = subprocess.run([exe, "--sb_matrix=smoke", "--benchmark_out=" + out,
                                "--benchmark_out_format=json", "--sb_progress", "--sb_log=" + log],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                print(p.stdout)
                raise Fail(f"{exe} exited with {p.returncode}")
            check_keys(exe)
            slug, n, no_device = check_json(out)
            check_progress(exe, p.stdout, out, log)
            print(f"   {n} entries, machine {slug}" + (f" (every run: {NO_DEVICE})" if no_device else ""))
            if no_device:
                gpu_only.append(os.path.basename(out))
        ew = [e for e in a.benches if os.path.basename(e) == "bench_elementwise"]
        if ew:
            check_one_warm_up_per_run(ew[0], json_dir)
        views = [e for e in a.benches if os.path.basename(e) == "bench_views"]
        if views:  # its cases take microseconds
            check_progress_of_aggregates(views[0], json_dir)
            check_run_overrides(views[0], json_dir)
        p = subprocess.run([a.semantics, os.path.join(json_dir, "semantics.json")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(p.stdout, end="")
        with open(os.path.join(json_dir, "semantics.json")) as f:
            sem = json.load(f)
        if sorted(sem) != ["V1", "V2", "V3", "V4"] or not all(v is True for v in sem.values()):
            raise Fail(f"semantics.json: {sem}")
        if p.returncode != 0:
            raise Fail(f"semantics exited with {p.returncode}")
        if not a.collect or not os.path.exists(a.collect):
            print(f"bench_smoke: scripts/collect not found ({a.collect or 'no path'}): "
                  "collect step skipped")
            return 0
        results = os.path.join(tmp, "results")
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        rechecked = recheck(py, os.path.join(os.path.dirname(a.collect), "recheck"), json_dir, a.benches)
        p = subprocess.run([py, a.collect, "--json-dir", json_dir, "--results", results,
                            "--no-plots"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        print(p.stdout, end="")
        if p.returncode != 0:
            raise Fail(f"scripts/collect exited with {p.returncode}")
        mdir = os.path.join(results, slug)
        raw = sorted(os.path.basename(f) for f in glob.glob(os.path.join(mdir, "raw", "*.json")))
        # collect leaves out a GPU binary's file when none of its runs measured anything
        want = sorted([os.path.basename(e)[len("bench_"):] + ".json" for e in a.benches
                       if os.path.basename(e)[len("bench_"):] + ".json" not in gpu_only]
                      + ["semantics.json"] + (["recheck.json"] if rechecked else []))
        if raw != want:
            raise Fail(f"{mdir}/raw holds {raw}, expected {want}")
        for f in gpu_only:
            if f"{f}: " not in p.stdout or NO_DEVICE not in p.stdout:
                raise Fail(f"scripts/collect did not report {f} as skipped ({NO_DEVICE})")
        with open(os.path.join(mdir, "machine.json")) as f:
            json.load(f)
        with open(os.path.join(mdir, "TABLES.md")) as f:
            tables = f.read()
        if not tables.startswith("#") or "## Claims" not in tables:
            raise Fail(f"{mdir}/TABLES.md has no title or no Claims table")
        print(f"bench_smoke: collect wrote {mdir} ({len(tables)} bytes of TABLES.md)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (Fail, OSError, ValueError, subprocess.SubprocessError) as e:
        print(f"bench_smoke: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
