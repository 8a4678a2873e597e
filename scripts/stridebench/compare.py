# stridebench.compare: puts two results (two machines, or two runs of one) side by side.
#
# For every run name present in both A and B: the median times (± half the range),
# B ÷ A, the two-sided Mann-Whitney U p-value over the repetition samples
# (scipy.stats.mannwhitneyu, method "auto": exact without ties when a side has at
# most 8 samples, else the normal approximation with tie and continuity correction),
# and each side's % of its own ceiling (docs/BENCHMARKS.md). A summary gives the
# geometric mean of B ÷ A per table family. A GPU row of one iteration (Note [GPU rows
# stop on their noise]) keeps its samples to itself: its p is n/a and its ± is its own
# spread_pct.
#
# Many machines (three or more folders, or --cross): per headline row (the rows each
# folder's Summary stands on: per family the costliest layout and style and their
# reference rows, and the DRAM and compute ceilings), each machine's time and % of its
# own ceiling side by side, CPU rows among the machines with CPU rows and GPU rows among
# those with GPU rows, and with --plot a PNG of the % ceiling per row and machine (one
# panel per device kind).
#
# Usage: scripts/compare A B [C ...] [--cross] [-o FILE] [--plot PNG]
#        A, B: results folders or single JSON files (a cross view needs folders).
#        Markdown to stdout, and to FILE (written atomically) with -o.
#        Exit 2 with one message on bad input, when A and B share no run, or without
#        scipy (two-machine form).
import argparse
import math
import os
import sys

from . import results as sb

try:
    from scipy.stats import mannwhitneyu
except ImportError:  # main() says so; the module still imports for the tables' tools
    mannwhitneyu = None


def mann_whitney_u(x, y):
    """(U of x, two-sided p), or (None, None) when a side has fewer than 2 samples."""
    if len(x) < 2 or len(y) < 2:
        return None, None
    r = mannwhitneyu(x, y, alternative="two-sided")
    return float(r.statistic), float(r.pvalue)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def label(rs, path):
    return f"`{rs.sb('sb_machine', '?')}` ({path}, {len(rs.runs)} runs)"


# What two runs were built and run with, beside the machines: each can move a row's time
# by itself (another compiler's binaries are not the same kernels: docs/notes/bench.md,
# "A second compiler"). The tuning differs between machines of two designs by design
# (Note [Tuning by microarchitecture]); it is named only where a run overrode it
# (SB_TUNING in its sb_tuning_basis).
BUILD_KEYS = (("sb_compiler", "compiler"), ("sb_flags", "flags"), ("sb_simd", "SIMD"),
              ("sb_cpu_allocator", "CPU allocator"), ("sb_cpu_hugepages", "huge pages"),
              ("sb_git_revision", "git revision"))


def build_differences(a, b):
    """'compiler `gcc 12.2.0` (A), `clang 14.0.6` (B)' per build key whose values differ."""
    out = [f"{what} `{a.sb(key, '?')}` (A), `{b.sb(key, '?')}` (B)"
           for key, what in BUILD_KEYS if a.sb(key) != b.sb(key)]
    if a.sb("sb_tuning") != b.sb("sb_tuning") and any(
            "SB_TUNING=" in rs.sb("sb_tuning_basis") for rs in (a, b)):
        out.append(f"tuning `{a.sb('sb_tuning', '?')}` (A), `{b.sb('sb_tuning', '?')}` (B), set by SB_TUNING")
    return out


def compare(a_path, b_path):
    a, b = sb.load_results(a_path), sb.load_results(b_path)
    common = sorted(set(a.runs) & set(b.runs), key=lambda n: a.runs[n].sort_key)
    if not common:
        raise sb.InputError(f"{a_path} and {b_path}", "no benchmark run in common "
                            f"(A has e.g. {min(a.runs)!r}, B has e.g. {min(b.runs)!r})")
    method = "scipy.stats.mannwhitneyu"
    out = ["# stridebench comparison", "",
           f"- A: {label(a, a_path)}", f"- B: {label(b, b_path)}",
           f"- {len(common)} runs in both; {len(a.runs) - len(common)} only in A, "
           f"{len(b.runs) - len(common)} only in B."]
    differ = build_differences(a, b)
    out += [f"- Built or run differently: {'; '.join(differ)}. The ratios include their effect, "
            "not the machines' alone." if differ else "- Built and run alike: compiler, flags, SIMD level, "
            "CPU allocator, huge pages, git revision.", "",
           "B ÷ A is the ratio of median times (below 1: B is faster). ± is half the "
           "range over the median. p is the two-sided Mann–Whitney U p-value over the "
           f"repetition samples ({method}). % ceiling: each side against its own "
           "baseline rows.", ""]
    fams = {}
    for name in common:
        fams.setdefault(a.runs[name].family, []).append(name)
    summary = []
    for fam, names in fams.items():
        ratios = [b.runs[n].median / a.runs[n].median for n in names]
        summary.append([fam, str(len(names)), sb.fmt_x(geomean(ratios)),
                        str(sum(r < 1 for r in ratios)), str(sum(r > 1 for r in ratios))])
    allr = [b.runs[n].median / a.runs[n].median for n in common]
    summary.append(["**all**", str(len(common)), sb.fmt_x(geomean(allr)),
                    str(sum(r < 1 for r in allr)), str(sum(r > 1 for r in allr))])
    out += ["## Summary", ""] + sb.md_table(
        ["family", "runs", "geomean B ÷ A", "B faster", "A faster"], summary) + [""]
    for fam, names in fams.items():
        rows = []
        for n in names:
            ra, rb = a.runs[n], b.runs[n]
            _, p = mann_whitney_u(ra.samples, rb.samples)
            rows.append([n.split("/", 1)[1], sb.fmt_tm(ra), sb.fmt_tm(rb),
                         sb.fmt_x(rb.median / ra.median),
                         "n/a" if p is None else f"{p:.3g}",
                         sb.pct_ceiling(a, ra), sb.pct_ceiling(b, rb)])
        out += [f"## {fam}", ""] + sb.md_table(
            ["run", "A", "B", "B ÷ A", "p", "A % ceiling", "B % ceiling"], rows) + [""]
    return "\n".join(out).rstrip() + "\n"


def device_kind(run):
    """"gpu" for a CUDA row, else "cpu": each kind is compared among its own machines."""
    return "gpu" if str(run.get("device") or "").startswith("cuda") else "cpu"


def cross(paths):
    """(Markdown, plot groups) of the headline rows across machines: one table per device
    kind (CPU rows, then GPU rows), each with the machines that measured that kind. A
    row measured on one machine of its kind is left out, unless that machine is the only
    one of its kind (one GPU so far): then its rows stand alone, against its own
    ceilings, so the view still shows it."""
    from . import summary  # the Summary's rows
    sets = [(p, sb.load_results(p)) for p in paths]
    labels = []
    for p, rs in sets:
        slug = rs.sb("sb_machine", "?")
        labels.append(slug if [r.sb("sb_machine") for _, r in sets].count(slug) == 1
                      else f"{slug} ({os.path.basename(os.path.normpath(p))})")
    out = ["# stridebench across machines", ""]
    out += [f"- {lab}: {p} ({len(rs.runs)} runs, {rs.sb('sb_cpu_model', '?')}, {rs.sb('sb_caches', '?')}"
            + (f", {rs.sb('sb_gpu_name')}" if rs.sb("sb_gpu_name") else "") + ")"
            for lab, (p, rs) in zip(labels, sets)]
    out += ["", "Per headline row (the rows each machine's Summary stands on: per family the "
            "costliest layout and style of ours with their reference rows, and the DRAM and "
            "compute ceilings), each machine's median time and its % of that machine's own "
            "ceiling (a ceiling row: its rate). CPU rows and GPU rows are set side by side "
            "among the machines that measured them. — : not measured there.", ""]
    headlines = [summary.headline_runs(rs) for _, rs in sets]
    groups = []
    for kind, title in (("cpu", "CPU rows"), ("gpu", "GPU rows")):
        members = [i for i, h in enumerate(headlines) if any(device_kind(r) == kind for r in h)]
        names = []
        for i in members:
            for r in headlines[i]:
                if device_kind(r) == kind and r.name not in names:
                    names.append(r.name)
        rows, data = [], []
        for n in names:
            runs = [sets[i][1].runs.get(n) for i in members]
            if sum(r is not None for r in runs) < min(2, len(members)):
                continue  # a row one machine alone has compares nothing
            cells, pcts = [], []
            for i, r in zip(members, runs):
                rs = sets[i][1]
                c = sb.ceiling(rs, r) if r else None
                if r is not None and r.family == "baseline":  # a ceiling: its own rate
                    peak = str(r.get("op") or "").endswith("peak")
                    rate = sb.fmt_rate(r.gflops(), "GFLOP/s") if peak else sb.fmt_rate(r.gbps(), "GB/s")
                else:
                    rate = f"{c[2]:.0f}%" if c else "—"
                cells += [sb.fmt_tm(r) if r else "—", rate]
                pcts.append(c[2] if c else None)
            rows.append([n.replace("/impl:ours", "")] + cells)
            data.append((n, pcts))
        if not rows:
            continue
        glabels = [labels[i] for i in members]
        out += [f"## {title}", ""]
        if len(members) == 1:
            out += [f"Only {glabels[0]} measured {kind.upper()} rows: each against its own ceiling.", ""]
        header = ["row"] + [h for lab in glabels for h in (f"{lab} time", f"{lab} % ceiling")]
        out += sb.md_table(header, rows) + [""]
        groups.append((title, glabels, data))
    if not groups:
        raise sb.InputError(", ".join(paths), "no headline row measured on two of these machines")
    return "\n".join(out).rstrip() + "\n", groups


def plot_cross(groups, path):
    """Horizontal grouped bars: % of own ceiling per headline row, one bar per machine,
    one panel per device kind."""
    from . import plot
    plt = plot.pyplot()
    if plt is None:
        return None
    groups = [(t, labels, [(n, p) for n, p in data if any(v is not None for v in p)])
              for t, labels, data in groups]
    groups = [g for g in groups if g[2]]
    if not groups:
        return None
    heights = [0.45 * len(data) * max(1, len(labels) / 2) + 1.2 for _, labels, data in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, sum(heights) + 0.5),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (title, labels, data) in zip(axes[:, 0], groups):
        h = 0.8 / len(labels)
        for i, lab in enumerate(labels):
            ys = [k + i * h for k in range(len(data))]
            ax.barh(ys, [p[i] or 0 for _, p in data], height=h, label=lab)
        ax.set_yticks([k + h * (len(labels) - 1) / 2 for k in range(len(data))])
        ax.set_yticklabels([plot.short_name(n) for n, _ in data], fontsize=8)
        ax.invert_yaxis()
        ax.axvline(100, color="black", linewidth=0.8)
        ax.set_xlabel("% of the machine's own ceiling")
        ax.set_title(f"Headline {title} across machines")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return plot.save(plt, fig, path)


def main(argv):
    ap = argparse.ArgumentParser(prog="compare", description="Compare stridebench results "
                                 "folders or Google Benchmark JSON files: two side by side with "
                                 "a significance test, or any number across machines.")
    ap.add_argument("paths", nargs="+", metavar="RESULTS")
    ap.add_argument("--cross", action="store_true", help="the across-machines view for two")
    ap.add_argument("-o", "--output", metavar="FILE", help="also write the Markdown here")
    ap.add_argument("--plot", metavar="PNG", help="across machines: also draw this PNG")
    args = ap.parse_args(argv)
    if len(args.paths) < 2:
        ap.error("give at least two results folders")
    if len(args.paths) > 2 or args.cross:
        try:
            text, groups = cross(args.paths)
        except sb.InputError as e:
            print(f"compare: error: {e}", file=sys.stderr)
            return 2
        sys.stdout.write(text)
        if args.output:
            sb.atomic_write(args.output, text)
        if args.plot and plot_cross(groups, args.plot) is None:
            print("compare: matplotlib is not installed; no plot drawn", file=sys.stderr)
        return 0
    args.a, args.b = args.paths
    if mannwhitneyu is None:
        print("compare: error: scipy is not installed for this Python "
              f"({sys.executable}); install python3-scipy (scripts/run does)", file=sys.stderr)
        return 2
    try:
        text = compare(args.a, args.b)
    except sb.InputError as e:
        print(f"compare: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    if args.output:
        sb.atomic_write(args.output, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
