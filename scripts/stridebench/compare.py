# stridebench.compare: puts two results (two machines, or two runs of one) side by side.
#
# For every run name present in both A and B: the median times (± half the range),
# B ÷ A, the two-sided Mann-Whitney U p-value over the repetition samples
# (scipy.stats.mannwhitneyu, method "auto": exact without ties when a side has at
# most 8 samples, else the normal approximation with tie and continuity correction),
# and each side's % of its own ceiling (docs/BENCHMARKS.md). A summary gives the
# geometric mean of B ÷ A per table family.
#
# Usage: scripts/compare A B [-o FILE]   A, B: results folders or single JSON files.
#        Markdown to stdout, and to FILE (written atomically) with -o.
#        Exit 2 with one message on bad input, when A and B share no run, or without
#        scipy.
import argparse
import math
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
           f"{len(b.runs) - len(common)} only in B.", "",
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


def main(argv):
    ap = argparse.ArgumentParser(prog="compare", description="Compare two stridebench "
                                 "results folders or Google Benchmark JSON files.")
    ap.add_argument("a", metavar="A")
    ap.add_argument("b", metavar="B")
    ap.add_argument("-o", "--output", metavar="FILE", help="also write the Markdown here")
    args = ap.parse_args(argv)
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
