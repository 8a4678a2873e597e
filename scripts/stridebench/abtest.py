# abtest: two builds of our benchmarks, old and new, run alternately on the same rows,
# so that a change's effect on speed is read as a ratio inside one stretch of time.
#
# Why: on a shared machine two runs minutes apart differ by more than most changes do
# (an L2-sized 2-thread row moved 0.5-1.8x between rounds of the same pair). Each round
# runs, per family, the old and the new bench_<family> on the same --filter, the old
# first in odd rounds and the new first in even ones, each with Google Benchmark's random
# interleaving and --repetitions repetitions; a row's ratio in a round is new ÷ old of the
# two medians of real time. Its result is the median of the per-round ratios and their
# range. The summary gives the median and geometric mean over rows and the rows whose
# whole range lies beyond --band (slower or faster): those are the rows that moved; a row
# whose range crosses 1 did not move beyond the noise of this run.
#
#   scripts/abtest OLD_DIR NEW_DIR --families conv,reduce [--filter REGEX] [--rounds N]
#                  [--repetitions N] [--band X] [--json FILE]
#   scripts/abtest --from-json DIR [--band X] [--json FILE]
#   --from-json reads runs made elsewhere, as scripts/gpu_run.sh's ab step writes them on
#   a device machine: DIR/<binary>.<old|new>.<round>.json, one pair per binary and round.
#   OLD_DIR, NEW_DIR: folders with bench_<family> binaries (a build's benchmarks/, or a
#   copy of one kept before the change). Markdown to stdout; --json also writes every
#   row's per-round ratios. A row whose benchmark sets its own repetitions keeps them. Exit 2 with one message on bad input, 1 when a run failed.
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from . import results as sb


def say(msg):
    print(msg, file=sys.stderr, flush=True)


# Google Benchmark's suffixes, which say how a row ran, not what it measures
SUFFIX = re.compile(r"/(min_time|repeats|iterations|threads_gb):[^/]*|/(real|process|manual)_time$")


def medians(path):
    """Median real time per run name of one Google Benchmark JSON (iterations only).
    An empty file is a binary whose filter matched no run (Google Benchmark then writes
    nothing): no rows."""
    try:
        if os.path.getsize(path) == 0:
            return {}
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise sb.InputError(path, f"not Google Benchmark JSON ({e})")
    times = {}
    for b in d["benchmarks"]:
        if b.get("run_type", "iteration") == "iteration" and not b.get("error_occurred"):
            times.setdefault(SUFFIX.sub("", b["run_name"]), []).append(float(b["real_time"]))
    return {k: statistics.median(v) for k, v in times.items()}


def run_binary(path, flt, reps, out):
    cmd = [path, f"--benchmark_filter={flt}", f"--benchmark_repetitions={reps}",
           "--benchmark_enable_random_interleaving=true",
           f"--benchmark_out={out}", "--benchmark_out_format=json"]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(path)} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return medians(out)


def add_pair(got, ratios, only):
    """One round's {"old": medians, "new": medians}: new ÷ old per run into ratios, the
    runs only one side has into only[side]."""
    for name, t_new in got["new"].items():
        t_old = got["old"].get(name)
        if t_old is None:
            only["new"].add(name)
        elif t_old > 0:
            ratios.setdefault(name, []).append(t_new / t_old)
    only["old"] |= set(got["old"]) - set(got["new"])


def measure(old_dir, new_dir, families, flt, rounds, reps, progress=say):
    """{run name: [new ÷ old per round]} and the rows each side lacked."""
    ratios, only = {}, {"old": set(), "new": set()}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for fam in families:
                sides = [("old", old_dir), ("new", new_dir)]
                if r % 2:
                    sides.reverse()
                got = {}
                for side, d in sides:
                    got[side] = run_binary(os.path.join(d, f"bench_{fam}"), flt, reps,
                                           os.path.join(tmp, f"{side}_{fam}.json"))
                add_pair(got, ratios, only)
            el = time.monotonic() - t0
            progress(f"[round {r + 1}/{rounds}] {len(ratios)} rows, "
                     f"{el / (r + 1) * (rounds - r - 1):.0f} s left")
    return ratios, only


AB_JSON = re.compile(r"^(?P<bin>.+)\.(?P<side>old|new)\.(?P<round>\d+)\.json$")


def ratios_from_json(folder):
    """measure()'s result from DIR/<binary>.<side>.<round>.json files."""
    if not os.path.isdir(folder):
        raise sb.InputError(folder, "no such directory")
    runs = {}
    for f in sorted(os.listdir(folder)):
        m = AB_JSON.match(f)
        if m:
            runs.setdefault((m["bin"], int(m["round"])), {})[m["side"]] = medians(os.path.join(folder, f))
    if not runs:
        raise sb.InputError(folder, "no <binary>.<old|new>.<round>.json files")
    ratios, only = {}, {"old": set(), "new": set()}
    for key in sorted(runs):
        got = runs[key]
        if set(got) != {"old", "new"}:
            raise sb.InputError(folder, f"{key[0]} round {key[1]} lacks its {({'old', 'new'} - set(got)).pop()} run")
        add_pair(got, ratios, only)
    return ratios, only, sorted({b for b, _ in runs}), max(r for _, r in runs)


def summarize(ratios, band):
    """The table rows (name, median, lo, hi, verdict) and the summary dict."""
    rows = []
    for name, v in sorted(ratios.items()):
        med, lo, hi = statistics.median(v), min(v), max(v)
        verdict = "slower" if lo > 1 + band else "faster" if hi < 1 / (1 + band) else ""
        rows.append((name, med, lo, hi, verdict))
    meds = [r[1] for r in rows]
    summary = {
        "rows": len(rows),
        "median": statistics.median(meds) if meds else None,
        "geomean": statistics.geometric_mean(meds) if meds else None,
        "slower": [r[0] for r in rows if r[4] == "slower"],
        "faster": [r[0] for r in rows if r[4] == "faster"],
    }
    return rows, summary


def markdown(rows, summary, args):
    head = (f"runs of `{args.from_json}` ({', '.join(args.families)}), {args.rounds} rounds alternating"
            if args.from_json else
            f"old `{args.old}`, new `{args.new}`; families {','.join(args.families)}, filter `{args.filter}`, "
            f"{args.rounds} rounds alternating, {args.repetitions} repetitions each")
    out = [f"{head}; ratio = new ÷ old time",
           "",
           f"**{summary['rows']} rows: median {summary['median']:.3f}, geomean {summary['geomean']:.3f}; "
           f"{len(summary['slower'])} slower and {len(summary['faster'])} faster beyond ±{args.band:.0%} "
           f"over every round.**",
           "",
           "| run | new ÷ old | range | moved |",
           "| --- | --- | --- | --- |"]
    for name, med, lo, hi, verdict in rows:
        out.append(f"| `{name}` | {med:.3f} | {lo:.3f}-{hi:.3f} | {verdict} |")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/abtest", description="Old and new benchmark binaries, alternating.")
    ap.add_argument("old", nargs="?", help="folder with the old bench_<family> binaries")
    ap.add_argument("new", nargs="?", help="folder with the new bench_<family> binaries")
    ap.add_argument("--families", help="comma-separated: elementwise,copy,reduce,...")
    ap.add_argument("--from-json", help="compare runs made elsewhere: DIR/<binary>.<old|new>.<round>.json")
    ap.add_argument("--filter", default=".", help="Google Benchmark --benchmark_filter regex (default: every row)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--band", type=float, default=0.05, help="a row moved when its whole range is beyond 1 ± band")
    ap.add_argument("--json", help="also write the per-round ratios here")
    args = ap.parse_args(argv)
    if args.from_json:
        if args.old or args.new or args.families:
            say("abtest: --from-json takes no OLD_DIR, NEW_DIR or --families")
            return 2
        try:
            ratios, only, args.families, args.rounds = ratios_from_json(args.from_json)
        except sb.InputError as e:
            say(f"abtest: {e}")
            return 2
        return report(ratios, only, args)
    if not (args.old and args.new and args.families):
        say("abtest: OLD_DIR, NEW_DIR and --families are needed (or --from-json DIR)")
        return 2
    args.families = [f for f in args.families.split(",") if f]
    if args.rounds < 1 or args.repetitions < 1 or args.band < 0:
        say("abtest: --rounds and --repetitions must be >= 1 and --band >= 0")
        return 2
    for d in (args.old, args.new):
        for fam in args.families:
            b = os.path.join(d, f"bench_{fam}")
            if not os.access(b, os.X_OK):
                say(f"abtest: no executable {b}")
                return 2
    try:
        ratios, only = measure(args.old, args.new, args.families, args.filter, args.rounds, args.repetitions)
    except (RuntimeError, sb.InputError) as e:
        say(f"abtest: {e}")
        return 1
    return report(ratios, only, args)


def report(ratios, only, args):
    if not ratios:
        say(f"abtest: no row ran in both builds (filter {args.filter!r})")
        return 2
    rows, summary = summarize(ratios, args.band)
    sys.stdout.write(markdown(rows, summary, args))
    for side in ("old", "new"):
        if only[side]:
            say(f"abtest: {len(only[side])} rows only in the {side} build, e.g. {sorted(only[side])[0]}")
    if args.json:
        sb.atomic_write(args.json, json.dumps({"summary": summary, "ratios": ratios}, indent=1) + "\n")
    return 0
