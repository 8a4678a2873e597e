# recheck: re-measures close peer comparisons with ours and the peer alternating, so
# that the machine's drift (other tenants, clock, the shared L3) hits both sides alike.
#
# Why: `ninja -C build benchmark` runs all of our families first and the peers minutes
# later. On a shared machine the load changes in between, and a Peers-table ratio near
# 1 says more about those minutes than about the two implementations. This step
# (after peers, before collect) picks every peer row whose first-pass time is within
# --band of ours (both directions, so the pick does not favour either side), then runs
# R rounds; each round runs our binary on those rows and the peer runner on theirs,
# in alternating order (ours first in odd rounds, the peer first in even ones). The
# ratio of a case is the median over rounds of peer ÷ ours in the same round; its
# spread is the range of the per-round ratios.
#
# The same holds for a layout's cost: the Memory layout table's reading quotes, per op,
# the layout furthest from contiguous, and on a noisy machine that is often a row whose
# minutes were bad (an L2-sized transposed add on 2 threads read 3.3x its contiguous
# twin at a first pass and 1.6x alternating). So the step also
# takes, per device, op and style, the --layout-per-style non-contiguous rows of ours
# furthest from their contiguous twin (either way) and re-checks each against its twin
# (per style, so that the rows the table shows, one style per op, are among them); the
# Memory layout table and claims L1-L5 then use the interleaved ratio for those pairs.
#
# Output: JSON_DIR/recheck.json (docs/BENCHMARKS.md, "Interleaved re-check"), which
# collect keeps as raw/recheck.json and tables shows in the Peers table. The file is
# rewritten on every run (with no cases when nothing is close), so it never outlives
# the rows it re-checked.
#
#   scripts/recheck --json-dir BUILD/bench-json --bench-dir BUILD/benchmarks
#                   [--rounds N] [--band X] [--max-cases N] [--layout-per-style N] [--peers-script PATH]
#                   [--pair OURS_RUN PEER_RUN]... [--out FILE]
#   --pair (repeatable) re-checks the given runs instead of the band's pick; either
#   name may be any run of our binaries or of the peer runner, e.g. two of ours to
#   compare thread counts or a kernel row with its baseline ceiling.
#   exit 2 with one message on bad input (nothing written), 1 when a round failed.
import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from . import results as sb

SKIP_OPS = ("overhead", "reuse_experiment")  # no kernel time to compare
SKIP_FAMILIES = ("alloc", "transfer", "baseline", "views")
DEFAULT_ROUNDS = {"smoke": 1, "quick": 5, "full": 7}
PEER_LIBS = ("torch", "numpy")  # measured by scripts/peers.py
OTHER_IMPLS = PEER_LIBS + ("openblas",)  # openblas: inside bench_matmul, after ours


def _mmss(seconds):
    t = round(seconds)
    return f"{t // 60}:{t % 60:02d}"


def say(msg):
    print(f"recheck: {msg}", file=sys.stderr, flush=True)


def load_dir(json_dir):
    rs = sb.RunSet()
    if not os.path.isdir(json_dir):
        raise sb.InputError(json_dir, "no such directory (did the benchmarks run?)")
    for f in sorted(os.listdir(json_dir)):
        if f.endswith(".json") and f not in ("semantics.json", "recheck.json"):
            rs.add_file(os.path.join(json_dir, f))
    if not rs.runs:
        raise sb.InputError(json_dir, "no Google Benchmark *.json files")
    return rs


def pick_cases(rs, band, max_cases):
    """(ours run, peer run, first-pass peer ÷ ours) for every peer row within band."""
    out = []
    for r in rs.select(impl=lambda v: v in OTHER_IMPLS, op=lambda v: v not in SKIP_OPS):
        if r.family in SKIP_FAMILIES:
            continue
        o = rs.like(r, impl="ours")
        if not o or not o.median or not r.median:
            continue
        x = r.median / o.median
        if 1 / band <= x <= band:
            out.append((o, r, x))
    out.sort(key=lambda c: (abs(math.log(c[2])), c[1].name))
    return out[:max_cases]


def pick_layout_cases(rs, per_style):
    """(contiguous twin, layout run, first-pass time ratio) for the per_style
    non-contiguous runs of ours furthest from their twin (|log ratio|, either way) per
    device, op and style: the rows the Memory layout table's reading and claims L1-L5
    quote."""
    by = {}
    for r, b in sb.layout_cases(rs):
        if r.median and b.median:
            by.setdefault((r.get("device"), r["op"], r.get("style")), []).append((b, r, r.median / b.median))
    out = []
    for key in sorted(by, key=str):
        group = sorted(by[key], key=lambda c: (-abs(math.log(c[2])), c[1].name))
        out += group[:per_style]
    return out


def who(run, rs):
    """Which program measures a run: ('peer', library), or ('ours', binary name): the
    binary that wrote the run's file (Google Benchmark's `executable` context), so
    GPU rows go back to bench_<family>_cuda; bench_<family> when the file does not say."""
    impl = run["impl"]
    if impl in PEER_LIBS:
        return ("peer", impl)
    exe = (rs.contexts.get(run.path) or {}).get("executable") or f"bench_{run.family}"
    return ("ours", os.path.basename(str(exe)))


def name_regex(names, tail):
    return "^(" + "|".join(re.escape(n) for n in sorted(names)) + ")" + tail


def run_ours(bench_dir, binary, names, matrix, tmp):
    exe = os.path.join(bench_dir, binary)
    if not os.access(exe, os.X_OK):
        raise RuntimeError(f"{exe} is not an executable (build the benchmarks first)")
    out = os.path.join(tmp, f"ours_{binary}.json")
    # Google Benchmark matches the full name: ours, then /min_time:.../repeats:.../real_time.
    # Its random interleaving shuffles the repetitions of the rows of one invocation, so
    # the machine's drift within the invocation is spread over all of them too.
    cmd = [exe, "--benchmark_filter=" + name_regex(names, "/"), f"--sb_matrix={matrix}",
           "--benchmark_enable_random_interleaving=true",
           f"--benchmark_out={out}", "--benchmark_out_format=json"]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{binary} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return out


def run_peer(args, lib, names, threads, matrix, machine, tmp):
    d = os.path.join(tmp, f"peer_{lib}")
    # one repetition per round: the rounds are the repetitions of a re-check
    cmd = [sys.executable, args.peers_script, "--out-dir", d, "--bench-dir", args.bench_dir,
           "--context-from", args.json_dir, "--libs", lib, "--matrix", matrix, "--repetitions", "1",
           "--filter", name_regex(names, "$"), "--threads-list", ",".join(sorted(threads, key=int))]
    if machine:
        cmd += ["--machine", machine]
    if not any(n.split("/device:")[1].startswith("cuda") for n in names if "/device:" in n):
        cmd += ["--no-cuda"]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    out = os.path.join(d, f"peers_{lib}.json")
    if p.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"peers.py --libs {lib} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return out


def one_round(groups, order, args, matrix, machine):
    """Runs every program once, in `order` -> {run name: median ns}."""
    got = {}
    with tempfile.TemporaryDirectory(prefix="sb-recheck-") as tmp:
        for kind, what, part in order:
            runs = groups[(kind, what, part)]
            names = [r.name for r in runs]
            if kind == "ours":
                path = run_ours(args.bench_dir, what, names, matrix, tmp)
            else:
                threads = {r["threads"] for r in runs if r["threads"]} or {"1"}
                path = run_peer(args, what, names, threads, matrix, machine, tmp)
            _, runs_out, _ = sb.load_gbench(path)
            for r in runs_out:
                got[r.name] = r.median
    return got


def program_groups(cases, rs):
    """{(kind, program, part): [runs]}: the invocations of one round. When both sides of
    a case come from one program (a layout row and its contiguous twin, or a --pair of
    two of ours), its b side goes to a separate invocation (part 'b'), so the two sides
    alternate which runs first as a peer and ours do; otherwise one process would always
    run them in registration order."""
    b_part = {p.name for o, p, _, _ in cases if who(o, rs) == who(p, rs)}
    groups = {}
    for o, p, _, _ in cases:
        for r in (o, p):
            g = groups.setdefault(who(r, rs) + ("b" if r.name in b_part else "",), [])
            if r not in g:
                g.append(r)
    return groups


def first_of(order, a, b, groups):
    """Which side of a case ran first in a round: 'a', 'b' or 'same' (one invocation)."""
    ia, ib = (next(i for i, k in enumerate(order) if r in groups[k]) for r in (a, b))
    return "same" if ia == ib else "a" if ia < ib else "b"


def summary(ratios):
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/recheck", description="Re-measures close peer comparisons (or given pairs of runs) with the two sides alternating; see the comment at the top of this file.")
    ap.add_argument("--json-dir", required=True)
    ap.add_argument("--bench-dir", required=True, help="where bench_<family> binaries are")
    ap.add_argument("--rounds", type=int, help="default: smoke 1, quick 5, full 7")
    ap.add_argument("--band", type=float, default=2.0,
                    help="re-check peer rows with 1/band <= peer / ours <= band (default 2)")
    ap.add_argument("--max-cases", type=int, default=150, help="the closest N peer rows (default 150)")
    ap.add_argument("--layout-per-style", type=int, default=2,
                    help="also re-check, per device, op and style, the N layout rows furthest from "
                         "their contiguous twin (default 2; 0: none)")
    ap.add_argument("--peers-script", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "peers.py"))
    ap.add_argument("--pair", nargs=2, action="append", metavar=("A", "B"),
                    help="re-check run B against run A (repeatable); replaces the band's pick")
    ap.add_argument("--out", help="default: JSON_DIR/recheck.json")
    args = ap.parse_args(argv)
    out_path = args.out or os.path.join(args.json_dir, "recheck.json")
    try:
        if args.band < 1 or (args.rounds is not None and args.rounds < 1) or args.max_cases < 0 \
                or args.layout_per_style < 0:
            raise sb.InputError(out_path, "--band must be >= 1, --rounds >= 1, --max-cases and --layout-per-style >= 0")
        rs = load_dir(args.json_dir)
        matrix = rs.sb("sb_matrix", "quick")
        if matrix not in DEFAULT_ROUNDS:
            matrix = "quick"
        machine = rs.sb("sb_machine", "")
        rounds = args.rounds or DEFAULT_ROUNDS[matrix]
        # The OpenBLAS kernels of the first pass (bench_matmul and the peers record what
        # they ran; `ninja benchmark` forces the strongest set, meson.build), so that a
        # by-hand re-check compares the same kernels.
        core = rs.sb("sb_openblas_core", "")
        if core and "OPENBLAS_CORETYPE" not in os.environ and re.fullmatch(r"[A-Za-z0-9]+", core):
            os.environ["OPENBLAS_CORETYPE"] = core
        if args.pair:
            cases = []
            for a, b in args.pair:
                ra = rs.runs.get(sb.canonical(*sb.parse_name(a))) if _parses(a) else None
                rb = rs.runs.get(sb.canonical(*sb.parse_name(b))) if _parses(b) else None
                for n, r in ((a, ra), (b, rb)):
                    if r is None:
                        raise sb.InputError(args.json_dir, f"--pair: no run named {n!r} in these files")
                cases.append((ra, rb, rb.median / ra.median, "pair"))
        else:
            cases = [c + ("peer",) for c in pick_cases(rs, args.band, args.max_cases)]
            if args.layout_per_style:
                cases += [c + ("layout",) for c in pick_layout_cases(rs, args.layout_per_style)]
    except sb.InputError as e:
        print(f"recheck: error: {e}", file=sys.stderr)
        return 2

    doc = {"context": {"sb_machine": machine, "sb_matrix": matrix, "rounds": rounds,
                       "band": args.band, "selection": "pairs" if args.pair else "band",
                       "layout_per_style": 0 if args.pair else args.layout_per_style,
                       "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")},
           "cases": []}
    status = 0
    if os.path.exists(out_path):  # a run that dies half-way must not leave the last run's file
        os.unlink(out_path)
    if cases:
        groups = program_groups(cases, rs)
        say(f"{len(cases)} case(s), {rounds} round(s), programs: "
            + ", ".join(f"{k} {w}{' [b side]' if part else ''} ({len(v)} runs)"
                        for (k, w, part), v in sorted(groups.items())))
        per_round = []
        base = sorted(groups)
        t_start = time.perf_counter()
        for i in range(rounds):
            order = base if i % 2 == 0 else base[::-1]  # alternate which program runs first
            try:
                per_round.append((order, one_round(groups, order, args, matrix, machine)))
            except (RuntimeError, sb.InputError) as e:
                say(f"round {i + 1} failed: {e}")
                status = 1
                break
            spent = time.perf_counter() - t_start
            say(f"[{i + 1}/{rounds}] {_mmss(spent / (i + 1) * (rounds - i - 1))} left  round {i + 1} done")
        for o, p, x, pick in cases:
            rounds_out = []
            for order, got in per_round:
                if got.get(o.name) and got.get(p.name):
                    rounds_out.append({"a_ns": got[o.name], "b_ns": got[p.name],
                                       "first": first_of(order, o, p, groups)})
            ratios = [r["b_ns"] / r["a_ns"] for r in rounds_out]
            case = {"a": o.name, "b": p.name, "pick": pick, "first_pass": x, "rounds": rounds_out}
            if ratios:
                case["ratio"] = summary(ratios)
            doc["cases"].append(case)
            if ratios:
                say(f"{p.name}: first pass {x:.2f}x, interleaved {case['ratio']['median']:.2f}x "
                    f"[{case['ratio']['min']:.2f}–{case['ratio']['max']:.2f}]")
            else:
                say(f"{p.name}: first pass {x:.2f}x, no round measured it")
    else:
        say(f"no peer row within {args.band:g}x of ours and no layout row: nothing to re-check")
    sb.atomic_write(out_path, json.dumps(doc, indent=1) + "\n")
    say(f"wrote {out_path}")
    return status


def _parses(name):
    try:
        sb.parse_name(name)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
