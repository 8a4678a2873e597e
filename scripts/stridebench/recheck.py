# recheck: re-measures the comparisons the tables and the Summary quote, with the two
# sides alternating, so that the machine's drift (other tenants, clock, the shared L3)
# hits both sides alike.
#
# Why: `ninja -C build benchmark` runs all of our families first and the peers minutes
# later. On a shared machine the load changes in between, and a ratio read across those
# minutes says more about them than about the two implementations. This step (after
# peers, before collect) picks
#   peer:   every peer row where the peer was ahead of ours in the first pass, however
#           far (the rows the Summary's peer line quotes), and the rows where ours was
#           ahead by less than --band (widened by the two rows' first-pass spreads; the
#           closest --max-cases of those);
#   layout: per device, op and style, the --layout-per-style non-contiguous rows of ours
#           furthest from their contiguous twin (either way), against that twin: the rows
#           the Memory layout table's reading and claims L1-L5 quote; and per device and
#           Summary family the costliest layout the Summary quotes;
#   style:  per device and Summary family, the costliest style of ours against the
#           fastest style of the same case (the Summary's "costliest style");
#   precision: per device, every 16-bit row of ours whose % of ceiling trails its
#           float32 twin's by more than the yardstick (5 points) in the first pass,
#           and every pair where either row's first pass spread over ±10% (whichever
#           way it lies), against that twin: the pairs the Precision of memory-bound
#           rows table counts against the yardstick (common.precision_points; a noisy
#           pair it does not count unless re-checked). Pairs a run check distrusts are
#           left out, as the table leaves them out of its counts;
#   peak:   per device, every out= matmul and conv2d row of ours against the compute
#           peak it is held to (its ceiling: common.peak_pairs), so that the Roofline
#           table and the Summary read GEMM and conv as a % of the same round's peak;
# then runs rounds; each round runs our binary on the open cases' rows (one repetition
# of --min-time seconds) and asks the peer runner, which stays up between rounds
# (PeerServers), for theirs (the same), in alternating order
# (ours first in odd rounds, the peer first in even ones). The ratio of a case is the
# median over its rounds of b ÷ a in the same round; its spread the range of those.
#
# Note [Re-check stops on noise]: a case stops once it has --min-rounds rounds and
# either the standard error of the mean of its log ratios is at most --target (2%:
# the ratio is known to about ±4%), or the 95% t-interval of that mean lies wholly
# between the lines its verdict turns on ("decided"), so more rounds could not change
# what the tables say: for a peer case the Summary's line (the peer 5% or more ahead),
# for a precision case the ratios at which the 16-bit row sits 5 points behind or
# ahead of its float32 twin (the Precision table's three counts); for a peak case the
# ratio at which the row reads PEAK_GOAL (85%) of its peak. The others run on, up to
# --max-rounds, and the whole step starts no round that would end past --budget seconds
# (the last round's time scaled to the cases left; quick: 135, so that with its
# follow-ups the quick matrix stays within 8 minutes on 2 cores). A case
# that never settled says so ("settled": "max rounds" or "budget"); the tables mark it
# noisy. The stopping idea is nvbench's (a noise criterion with a cap), applied per pair.
#
# Note [Re-check follow-ups]: the Summary quotes the costliest layout and style of each
# family by the re-checked ratios, so when a re-check refutes the first pass's costliest
# pair, the Summary moves to the next one, which the picks above never measured. After
# the rounds, the layout and style picks are made again on the re-checked ratios, and
# any pair they add gets rounds of its own (at least --min-rounds, past the budget if
# need be: a pair is one call of our binary a round), up to FOLLOW_UPS times; such a
# case records "follow_up": its step (1, 2, ...).
#
# Output: JSON_DIR/recheck.json (docs/BENCHMARKS.md, "Interleaved re-check"), which
# collect keeps as raw/recheck.json and tables shows in the Peers table. The file is
# rewritten on every run (with no cases when nothing was picked), so it never outlives
# the rows it re-checked.
#
#   scripts/recheck --json-dir BUILD/bench-json --bench-dir BUILD/benchmarks
#                   [--rounds N | --min-rounds N --max-rounds N] [--target SE] [--budget S]
#                   [--min-time S] [--band X] [--max-cases N] [--layout-per-style N]
#                   [--no-style] [--no-precision] [--no-peak] [--peers-script PATH] [--pair OURS_RUN PEER_RUN]... [--out FILE]
#   --rounds N runs every case exactly N rounds (no early stop). --pair (repeatable)
#   re-checks the given runs instead of the picks; either name may be any run of our
#   binaries or of the peer runner, e.g. two of ours to compare thread counts or a
#   kernel row with its baseline ceiling.
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
from .common import AHEAD, PEAK_GOAL, YARDSTICK, first_pass_noise, peak_pairs, precision_pairs  # AHEAD: the Summary's 5% line
from .results import ceiling

SKIP_OPS = ("overhead", "reuse_experiment")  # no kernel time to compare
SKIP_FAMILIES = ("baseline", "views")  # no peer twins: the ceilings, the views' bytes
DEFAULT_ROUNDS = {"smoke": (1, 1), "quick": (3, 7), "full": (3, 9)}  # min, max
DEFAULT_BUDGET = {"smoke": 0, "quick": 135, "full": 0}  # seconds; 0: none
DEFAULT_MIN_TIME = {"smoke": 0.002, "quick": 0.05, "full": 0.1}  # seconds per side and round
FOLLOW_UPS = 3  # Note [Re-check follow-ups]
STYLE_FAMILIES = ("elementwise", "copy", "reduce", "matmul", "conv")  # summary.SUMMARY_FAMILIES
PEER_LIBS = ("torch", "numpy")  # measured by scripts/peers.py
OURS_LIST = "ours_list.cases"  # in the JSON dir: peers.py --ours-list (not *.json: collect reads those)
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
    """(ours run, peer run, first-pass peer ÷ ours): every peer row where the peer was
    ahead (x < 1), however far, then the rows where ours was ahead by less than band
    times (1 + both rows' spreads), the closest max_cases of those."""
    ahead, near = [], []
    for r in rs.select(impl=lambda v: v in OTHER_IMPLS, op=lambda v: v not in SKIP_OPS):
        if r.family in SKIP_FAMILIES:
            continue
        o = rs.like(r, impl="ours")
        if not o or not o.median or not r.median:
            continue
        x = r.median / o.median
        noise = (o.spread or 0) + (r.spread or 0)
        if x < 1:
            ahead.append((o, r, x))
        elif x <= band * (1 + noise):
            near.append((o, r, x))
    key = lambda c: (abs(math.log(c[2])), c[1].name)
    return sorted(ahead, key=key) + sorted(near, key=key)[:max_cases]


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


def pick_style_cases(rs):
    """(fastest style, costliest style, first-pass time ratio) per device and Summary
    family: the pair the Summary's "costliest style" column quotes (summary.py
    costliest_style, whose rule this is)."""
    from . import summary
    out = []
    for dev in sb.devices(rs.all()):
        for fam in STYLE_FAMILIES:
            best = summary.costliest_style(rs, fam, dev)
            if best and best[0] is not best[1]:
                out.append((best[1], best[0], best[2]))
    return out


def pick_summary_layout_cases(rs):
    """(contiguous twin, layout row, first-pass time ratio) per device and Summary
    family: the pair the Summary's "costliest layout" column quotes (summary.py
    costliest_layout), which the per-style pick can miss (it ranks by |log ratio| within
    one op and style, the Summary over the family's preferred styles)."""
    from . import summary
    out = []
    for dev in sb.devices(rs.all()):
        for fam in STYLE_FAMILIES:
            best = summary.costliest_layout(rs, fam, dev)
            if best:
                out.append((best[1], best[0], best[2]))
    return out


def pick_precision_cases(rs):
    """(float32 twin, 16-bit row, first-pass time ratio) per device for each 16-bit row
    of ours more than YARDSTICK points of % ceiling behind its twin in the first pass,
    and each pair where either row's first pass spread over NOISY, whichever way its
    points lie (tables.t_precision_memory counts these against the yardstick, and
    leaves a noisy pair out unless it was re-checked)."""
    out = []
    for dev in sb.devices(rs.all()):
        for f32, r, p32, p, bad in precision_pairs(rs, dev):
            if not bad and (p - p32 < -YARDSTICK or first_pass_noise(rs, f32, r)):
                out.append((f32, r, r.median / f32.median))
    return out


def pick_peak_cases(rs):
    """(peak run, row, first-pass time ratio) per device for each out= matmul and conv2d
    row of ours that has a compute ceiling (common.peak_pairs)."""
    return [(peak, r, r.median / peak.median) for dev in sb.devices(rs.all()) for peak, r, _ in peak_pairs(rs, dev)]


def peak_lines(rs, a, b):
    """The interleaved ratio b ÷ a (as a log) at which row b reads PEAK_GOAL % of its
    peak a: b's first-pass % times the first-pass ratio over PEAK_GOAL
    (common.peak_percent)."""
    c = ceiling(rs, b)
    if not c or c[0] is not a or not a.median or not b.median:
        return []
    return [math.log(c[2] * (b.median / a.median) / PEAK_GOAL)]


def precision_lines(rs, a, b):
    """The interleaved ratios b ÷ a (as logs) at which the 16-bit row b sits exactly
    YARDSTICK points behind or ahead of its float32 twin a (common.precision_points:
    b's first-pass % scaled by the first-pass ratio over the interleaved one): the
    lines between the table's three counts, behind, within and ahead."""
    ca, cb = ceiling(rs, a), ceiling(rs, b)
    if not ca or not cb or not a.median or not b.median:
        return []
    scaled = cb[2] * b.median / a.median  # points = scaled / ratio - a's %
    return [math.log(scaled / (ca[2] + y)) for y in (-YARDSTICK, YARDSTICK) if ca[2] + y > 0]


def decision_lines(case, rs):
    """The log ratios a case's verdict turns on (Note [Re-check stops on noise]): the
    Summary's 5% line for a peer case, the yardstick's two lines for a precision case,
    the PEAK_GOAL line for a peak case, none for the others (they stop on noise alone)."""
    a, b, _, pick = case[:4]
    if pick == "peer":
        return [-math.log(AHEAD)]
    if pick == "precision":
        return precision_lines(rs, a, b)
    if pick == "peak":
        return peak_lines(rs, a, b)
    return []


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


def run_ours(bench_dir, binary, names, matrix, min_time, tmp):
    exe = os.path.join(bench_dir, binary)
    if not os.access(exe, os.X_OK):
        raise RuntimeError(f"{exe} is not an executable (build the benchmarks first)")
    out = os.path.join(tmp, f"ours_{binary}.json")
    # Google Benchmark matches the full name: ours, then /min_time:.../repeats:.../real_time.
    # Its random interleaving shuffles the repetitions of the rows of one invocation, so
    # the machine's drift within the invocation is spread over all of them too.
    cmd = [exe, "--benchmark_filter=" + name_regex(names, "/"), f"--sb_matrix={matrix}",
           "--benchmark_enable_random_interleaving=true", "--sb_repetitions=1", f"--sb_min_time={min_time!r}",
           f"--benchmark_out={out}", "--benchmark_out_format=json"]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{binary} exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return out


class PeerServers:
    """The peer runner's side of every round: one `peers.py --serve` per library, started
    at its first round and kept up until close() (Note [Peer runner serving the
    re-check], in peers/runner.py): the libraries' imports, case lists and fixed
    per-call costs are made once, not once per round."""

    def __init__(self, args, matrix, machine, min_time, cuda):
        self.args, self.matrix, self.machine, self.min_time, self.cuda = args, matrix, machine, min_time, cuda
        self.procs, self.logs = {}, {}

    def _start(self, lib):
        a = self.args
        # one repetition per round: the rounds are the repetitions of a re-check
        cmd = [sys.executable, a.peers_script, "--serve", "--bench-dir", a.bench_dir, "--context-from",
               a.json_dir, "--libs", lib, "--matrix", self.matrix, "--repetitions", "1",
               "--min-time", repr(self.min_time), "--ours-list", a.ours_list]
        if self.machine:
            cmd += ["--machine", self.machine]
        if not self.cuda:
            cmd += ["--no-cuda"]
        self.logs[lib] = tempfile.TemporaryFile(mode="w+")  # its progress, for the error message
        self.procs[lib] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=self.logs[lib], text=True)

    def run(self, lib, names, threads, tmp):
        """Measures the peer runs `names` of lib -> the path of their JSON."""
        if lib not in self.procs:
            self._start(lib)
        proc, d = self.procs[lib], os.path.join(tmp, f"peer_{lib}")
        os.makedirs(d, exist_ok=True)
        req = {"filter": name_regex(names, "$"), "threads": sorted(int(t) for t in threads), "out_dir": d}
        if any("/alloc:cudamalloc/" in n or n.endswith("/alloc:cudamalloc") for n in names):
            req["nocache"] = True  # torch's cudaMalloc rows: its child without the cache
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
            reply = proc.stdout.readline().strip()
        except (BrokenPipeError, OSError):
            reply = ""
        out = os.path.join(d, f"peers_{lib}.json")
        if reply != "done" or not os.path.exists(out):
            rc = proc.poll()
            self.logs[lib].seek(0)
            tail = self.logs[lib].read().strip()[-300:]
            raise RuntimeError(f"peers.py --libs {lib} --serve: {reply or f'exited {rc}'}: {tail}")
        return out

    def close(self):
        for proc in self.procs.values():
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self.logs.values():
            log.close()


def one_round(groups, order, args, matrix, peers):
    """Runs every program once, in `order` -> {run name: median ns}."""
    got = {}
    with tempfile.TemporaryDirectory(prefix="sb-recheck-") as tmp:
        for kind, what, part in order:
            runs = groups[(kind, what, part)]
            names = [r.name for r in runs]
            if kind == "ours":
                path = run_ours(args.bench_dir, what, names, matrix, peers.min_time, tmp)
            else:
                threads = {r["threads"] for r in runs if r["threads"]} or {"1"}
                path = peers.run(what, names, threads, tmp)
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


def log_se(ratios):
    """The standard error of the mean of log(ratios): the ratio's relative uncertainty."""
    if len(ratios) < 2:
        return None
    return statistics.stdev(math.log(x) for x in ratios) / math.sqrt(len(ratios))


def settled(ratios, lines, min_rounds, target):
    """Why a case needs no more rounds (Note [Re-check stops on noise]), or None.
    lines: the log ratios its verdict turns on (decision_lines)."""
    if len(ratios) < min_rounds:
        return None
    se = log_se(ratios)
    if se is None:
        return None
    if se <= target:
        return "noise"
    if lines:
        from scipy import stats  # the t quantile; scripts/run provides a Python with scipy
        m = statistics.fmean(math.log(x) for x in ratios)
        half = stats.t.ppf(0.975, len(ratios) - 1) * se
        if all(m + half < line or m - half > line for line in lines):
            return "decided"
    return None


def main(argv):
    ap = argparse.ArgumentParser(prog="scripts/recheck", description="Re-measures the comparisons the tables quote (or given pairs of runs) with the two sides alternating; see the comment at the top of this file.")
    ap.add_argument("--json-dir", required=True)
    ap.add_argument("--bench-dir", required=True, help="where bench_<family> binaries are")
    ap.add_argument("--rounds", type=int, help="exactly N rounds for every case (no early stop)")
    ap.add_argument("--min-rounds", type=int, help="rounds before a case may stop (default: smoke 1, quick and full 3)")
    ap.add_argument("--max-rounds", type=int, help="rounds at most (default: smoke 1, quick 7, full 9)")
    ap.add_argument("--target", type=float, default=0.02,
                    help="a case stops when the standard error of its mean log ratio is at most this (default 0.02)")
    ap.add_argument("--budget", type=float,
                    help="seconds after which no new round starts, once every case has its minimum "
                         "(default: quick 135, smoke and full none; 0: none)")
    ap.add_argument("--min-time", type=float, help="seconds each side measures per round (default: "
                                                   "smoke 0.002, quick 0.05, full 0.1)")
    ap.add_argument("--band", type=float, default=1.25,
                    help="also re-check peer rows where ours is ahead by less than this factor (default 1.25)")
    ap.add_argument("--max-cases", type=int, default=150, help="at most N of those rows, the closest (default 150)")
    ap.add_argument("--layout-per-style", type=int, default=1,
                    help="re-check, per device, op and style, the N layout rows furthest from "
                         "their contiguous twin (default 1; 0: none)")
    ap.add_argument("--no-style", action="store_true", help="skip the costliest-style pairs")
    ap.add_argument("--no-precision", action="store_true",
                    help="skip the 16-bit rows behind their float32 twins by more than 5 points")
    ap.add_argument("--no-peak", action="store_true",
                    help="skip the out= matmul and conv2d rows against their compute peak")
    ap.add_argument("--peers-script", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "peers.py"))
    ap.add_argument("--pair", nargs=2, action="append", metavar=("A", "B"),
                    help="re-check run B against run A (repeatable); replaces the picks")
    ap.add_argument("--out", help="default: JSON_DIR/recheck.json")
    args = ap.parse_args(argv)
    out_path = args.out or os.path.join(args.json_dir, "recheck.json")
    try:
        if args.band < 1 or any(v is not None and v < 1 for v in (args.rounds, args.min_rounds, args.max_rounds)) \
                or args.max_cases < 0 or args.layout_per_style < 0 or not args.target > 0 \
                or (args.budget is not None and args.budget < 0) \
                or (args.min_time is not None and not 0 < args.min_time <= 100):
            raise sb.InputError(out_path, "--band must be >= 1; --rounds, --min-rounds and --max-rounds >= 1; "
                                          "--max-cases, --layout-per-style and --budget >= 0; --target > 0; "
                                          "--min-time in (0, 100]")
        if args.rounds is not None and (args.min_rounds is not None or args.max_rounds is not None):
            raise sb.InputError(out_path, "--rounds fixes the rounds: give it or --min-rounds/--max-rounds, not both")
        rs = load_dir(args.json_dir)
        matrix = rs.sb("sb_matrix", "quick")
        if matrix not in DEFAULT_ROUNDS:
            matrix = "quick"
        machine = rs.sb("sb_machine", "")
        if args.rounds is not None:
            min_rounds = max_rounds = args.rounds
        else:
            min_rounds = args.min_rounds or DEFAULT_ROUNDS[matrix][0]
            max_rounds = args.max_rounds or max(DEFAULT_ROUNDS[matrix][1], min_rounds)
        if min_rounds > max_rounds:
            raise sb.InputError(out_path, f"--min-rounds {min_rounds} > --max-rounds {max_rounds}")
        budget = DEFAULT_BUDGET[matrix] if args.budget is None else args.budget
        min_time = args.min_time or DEFAULT_MIN_TIME[matrix]
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
                have = {(c[0].name, c[1].name) for c in cases}
                cases += [c + ("layout",) for c in pick_summary_layout_cases(rs) if (c[0].name, c[1].name) not in have]
            if not args.no_style:
                have = {(c[0].name, c[1].name) for c in cases}
                cases += [c + ("style",) for c in pick_style_cases(rs) if (c[0].name, c[1].name) not in have]
            if not args.no_precision:
                have = {(c[0].name, c[1].name) for c in cases}
                cases += [c + ("precision",) for c in pick_precision_cases(rs)
                          if (c[0].name, c[1].name) not in have]
            if not args.no_peak:
                have = {(c[0].name, c[1].name) for c in cases}
                cases += [c + ("peak",) for c in pick_peak_cases(rs) if (c[0].name, c[1].name) not in have]
    except sb.InputError as e:
        print(f"recheck: error: {e}", file=sys.stderr)
        return 2

    doc = {"context": {"sb_machine": machine, "sb_matrix": matrix, "rounds": max_rounds,
                       "min_rounds": min_rounds, "max_rounds": max_rounds, "target_se": args.target,
                       "budget_s": budget, "min_time_s": min_time, "ahead": AHEAD,
                       "band": args.band, "selection": "pairs" if args.pair else "picks",
                       "layout_per_style": 0 if args.pair else args.layout_per_style,
                       "style": not args.pair and not args.no_style,
                       "precision": not args.pair and not args.no_precision,
                       "peak": not args.pair and not args.no_peak, "peak_goal": PEAK_GOAL,
                       "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")},
           "cases": []}
    if os.path.exists(out_path):  # a run that dies half-way must not leave the last run's file
        os.unlink(out_path)
    status = 0
    if cases:
        status, outcome, seconds = run_rounds(cases, rs, args, matrix, machine, min_time,
                                              min_rounds, max_rounds, budget)
        doc["context"]["stopped"] = outcome["stopped"]
        doc["cases"] = [case_doc(c, outcome["rounds"][k], outcome["why"][k]) for k, c in enumerate(cases)]
        if not args.pair and status == 0:
            status, seconds = follow_ups(doc, cases, rs, args, matrix, machine, min_time, min_rounds,
                                         max_rounds, budget, seconds)
        doc["context"]["seconds"] = round(seconds, 1)
        for c in doc["cases"]:
            if c.get("ratio"):
                say(f"{c['b']}: first pass {c['first_pass']:.2f}x, interleaved {c['ratio']['median']:.2f}x "
                    f"[{c['ratio']['min']:.2f}–{c['ratio']['max']:.2f}] in {len(c['rounds'])} round(s), "
                    f"{c['settled']}")
            else:
                say(f"{c['b']}: first pass {c['first_pass']:.2f}x, no round measured it")
    else:
        say(f"no peer row ahead of ours or within {args.band:g}x, and no layout, style, precision or peak pair: "
            "nothing to re-check")
    sb.atomic_write(out_path, json.dumps(doc, indent=1) + "\n")
    say(f"wrote {out_path}")
    return status


def case_doc(c, rounds_out, why):
    """One case of recheck.json from (a, b, first-pass ratio, pick), its rounds and why it stopped."""
    o, p, x, pick = c[:4]
    ratios = [r["b_ns"] / r["a_ns"] for r in rounds_out]
    case = {"a": o.name, "b": p.name, "pick": pick, "first_pass": x, "rounds": rounds_out, "settled": why}
    if ratios:
        case["ratio"] = summary(ratios)
        case["se"] = log_se(ratios)
    return case


def follow_ups(doc, cases, rs, args, matrix, machine, min_time, min_rounds, max_rounds, budget, seconds):
    """Note [Re-check follow-ups]: the layout and style picks again on the re-checked
    ratios of doc["cases"]; rounds for the pairs they add. Extends cases and doc["cases"]
    -> (status, seconds in all)."""
    status = 0
    for step in range(1, FOLLOW_UPS + 1):
        rs.set_recheck({"cases": doc["cases"]})  # time_ratio reads them now
        have = {(c[0].name, c[1].name) for c in cases}
        new = []
        if args.layout_per_style:
            new += [c + ("layout",) for c in pick_summary_layout_cases(rs)]
        if not args.no_style:
            new += [c + ("style",) for c in pick_style_cases(rs)]
        new = [c for c in new if (c[0].name, c[1].name) not in have and (c[1].name, c[0].name) not in have]
        if not new:
            break
        say(f"follow-up {step}: the Summary now quotes {len(new)} pair(s) not re-checked yet")
        # the budget counts from now: the follow-ups get their minimum rounds whatever is left
        status, outcome, spent = run_rounds(new, rs, args, matrix, machine, min_time, min_rounds, max_rounds,
                                            max(budget - seconds, 1e-9) if budget else budget)
        seconds += spent
        for k, c in enumerate(new):
            case = case_doc(c, outcome["rounds"][k], outcome["why"][k])
            case["follow_up"] = step
            doc["cases"].append(case)
        cases += new
        if status:
            doc["context"]["stopped"] = outcome["stopped"]
            break
    rs.set_recheck(None)
    return status, seconds


def run_rounds(cases, rs, args, matrix, machine, min_time, min_rounds, max_rounds, budget):
    """The rounds of Note [Re-check stops on noise] -> (status, {"rounds": per case
    [{a_ns, b_ns, first}], "why": per case the reason it stopped, "stopped": why the
    step stopped}, seconds)."""
    groups = program_groups(cases, rs)
    say(f"{len(cases)} case(s), {min_rounds}" + (f" to {max_rounds}" if max_rounds > min_rounds else "")
        + " round(s), programs: " + ", ".join(f"{k} {w}{' [b side]' if part else ''} ({len(v)} runs)"
                                              for (k, w, part), v in sorted(groups.items())))
    rounds = [[] for _ in cases]
    why = [None] * len(cases)
    open_ = list(range(len(cases)))
    t_start = time.perf_counter()
    # the peer runner lists our cases (it takes seconds) into this file, or reads the list
    # the peers' first pass kept there from the same binaries (`ninja benchmark`); a JSON
    # dir without one (a committed results folder) gets none: the list goes beside the
    # binaries, so the results folder stays as it was
    kept = os.path.join(args.json_dir, OURS_LIST)
    args.ours_list = kept if os.path.exists(kept) else os.path.join(args.bench_dir, OURS_LIST)
    cuda = any("/device:cuda" in r.name for o, p, _, _ in cases for r in (o, p) if who(r, rs)[0] == "peer")
    peers = PeerServers(args, matrix, machine, min_time, cuda)
    try:
        status, stopped = _rounds(cases, rs, args, matrix, peers, rounds, why, open_, min_rounds, max_rounds,
                                  budget, t_start)
    finally:
        peers.close()
    return status, {"rounds": rounds, "why": why, "stopped": stopped}, time.perf_counter() - t_start


def _rounds(cases, rs, args, matrix, peers, rounds, why, open_, min_rounds, max_rounds, budget, t_start):
    """run_rounds' loop: fills rounds and why -> (status, why the step stopped)."""
    status, stopped = 0, "settled"
    lines = [decision_lines(c, rs) for c in cases]  # fixed by the first pass
    for i in range(max_rounds):
        active = [cases[k] for k in open_]
        groups = program_groups(active, rs)
        base = sorted(groups)
        order = base if i % 2 == 0 else base[::-1]  # alternate which program runs first
        t_round = time.perf_counter()
        try:
            got = one_round(groups, order, args, matrix, peers)
        except (RuntimeError, sb.InputError) as e:
            say(f"round {i + 1} failed: {e}")
            status, stopped = 1, "failed"
            break
        spent_round = time.perf_counter() - t_round
        still = []
        for k in open_:
            o, p, _, _ = cases[k]
            if got.get(o.name) and got.get(p.name):
                rounds[k].append({"a_ns": got[o.name], "b_ns": got[p.name], "first": first_of(order, o, p, groups)})
            why[k] = settled([r["b_ns"] / r["a_ns"] for r in rounds[k]], lines[k], min_rounds, args.target)
            if why[k] is None:
                still.append(k)
        spent = time.perf_counter() - t_start
        say(f"round {i + 1}: {len(active)} case(s) in {spent_round:.0f} s; {len(still)} still open; "
            f"{_mmss(spent)} spent")
        open_ = still
        if not open_:
            break
        next_round = spent_round * len(open_) / len(active)
        if budget and i + 1 >= min_rounds and i + 1 < max_rounds and spent + next_round > budget:
            stopped = "budget"
            break
    else:
        if open_:
            stopped = "max rounds"
    for k in open_:
        why[k] = stopped
    return status, stopped


def _parses(name):
    try:
        sb.parse_name(name)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
