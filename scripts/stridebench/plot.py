# plot: draws PNGs of a results folder into RESULTS_DIR/plots/ (matplotlib, Agg).
#
# Per device:
# - layout_<device>.png: GB/s of the memory-bound `impl:ours` rows by layout, one
#   group of bars per op and shape, with the machine's best measured GB/s as a line.
# - style_<device>.png: GB/s of the contiguous rows by style (in-place, out=, ...).
# - roofline_<device>.png: arithmetic intensity (FLOP/byte) against achieved GFLOP/s
#   for every row with both counters, under the measured bandwidth and peak lines.
# Each PNG is written atomically. Without matplotlib: a message and exit 0.
#
# Usage: scripts/plot RESULTS_DIR
import io
import os
import sys

from . import results as sb

STYLES = ("inplace", "out", "outofplace", "outofplace_system")


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(plt, fig, path):
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    sb.atomic_write(path, buf.getvalue())
    return path


def _bandwidths(rs, dev):
    """{regime (or 'all'): best baseline GB/s} on dev."""
    out = {}
    for b in rs.select("baseline", device=dev):
        if b.gbps():
            k = b.regime or "all"
            out[k] = max(out.get(k, 0), b.gbps())
    return out


def _bars(plt, rs, dev, runs, series_key, order, title, path):
    """Grouped bars: one group per (op, shape), one bar per value of series_key."""
    groups = {}
    for r in runs:
        if r.gbps():
            groups.setdefault(sb.describe(r, ("op", "dtype", "shape", "dim")), {})[
                r[series_key]] = r.gbps()
    groups = {k: g for k, g in groups.items() if len(g) > 1}  # something to compare
    series = [s for s in order if any(s in g for g in groups.values())]
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(min(16, 3 + 1.2 * len(groups)), 4.5))
    width = 0.8 / len(series)
    for i, s in enumerate(series):
        xs = [j + i * width for j, g in enumerate(groups.values()) if s in g]
        ax.bar(xs, [g[s] for g in groups.values() if s in g], width, label=s)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))])
    ax.set_xticklabels(list(groups), rotation=20, ha="right", fontsize=8)
    for (regime, bw), style in zip(sorted(_bandwidths(rs, dev).items()), ("--", ":", "-.")):
        ax.axhline(bw, color="black", linestyle=style, linewidth=1,
                   label=f"baseline {regime} {bw:.0f} GB/s")
    ax.set_ylabel("GB/s (bytes moved / median time)")
    ax.set_title(f"{title} on {dev} ({rs.sb('sb_machine')})")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _roofline(plt, rs, dev, path):
    pts = [r for r in rs.select(device=dev) if r.family != "baseline"
           and r.gbps() and r.gflops()]
    peaks = [b.gflops() for b in rs.select("baseline", device=dev) if b.gflops()]
    bws = _bandwidths(rs, dev)
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(7, 5))
    ais = [r.gflops() / r.gbps() for r in pts]
    lo, hi = min(ais + [0.1]) / 2, max(ais + [100]) * 2
    for (regime, bw), style in zip(sorted(bws.items()), ("--", ":", "-.")):
        knee = max(peaks) / bw if peaks else hi  # where the bandwidth line meets the peak
        xs = [lo, min(max(knee, lo), hi)]
        ax.plot(xs, [bw * x for x in xs], "k" + style, linewidth=1,
                label=f"bandwidth {regime} {bw:.0f} GB/s")
    if peaks:
        ax.axhline(max(peaks), color="gray", linestyle=":", linewidth=1,
                   label=f"peak {max(peaks):.0f} GFLOP/s")
    for r, ai in zip(pts, ais):
        ax.scatter(ai, r.gflops(), s=18)
        ax.annotate(sb.describe(r, ("layout", "op", "dtype")), (ai, r.gflops()),
                    fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"Roofline on {dev} ({rs.sb('sb_machine')})")
    ax.legend(fontsize=8)
    return _save(plt, fig, path)


def draw(rs, outdir, plt):
    """Writes every plot with data into outdir; returns the paths written."""
    os.makedirs(outdir, exist_ok=True)
    written = []
    for dev in sb.devices(rs.all()):
        tag = dev.replace(":", "")
        mem = [r for r in rs.select(impl="ours", device=dev)
               if (sb.ceiling_kind(r) or (0, ""))[1] == "bytes"]
        written.append(_bars(plt, rs, dev, [r for r in mem if r["layout"]
                                            and sb.preferred_style(rs, r)], "layout",
                             sb.VOCAB["layout"], "Bandwidth by layout",
                             os.path.join(outdir, f"layout_{tag}.png")))
        written.append(_bars(plt, rs, dev, [r for r in mem if r["style"] in STYLES
                                            and r["layout"] in (None, "contiguous")],
                             "style", STYLES, "Bandwidth by style",
                             os.path.join(outdir, f"style_{tag}.png")))
        written.append(_roofline(plt, rs, dev, os.path.join(outdir, f"roofline_{tag}.png")))
    return [w for w in written if w]


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: scripts/plot RESULTS_DIR", file=sys.stderr)
        return 2
    plt = pyplot()
    if plt is None:
        print("plot: matplotlib is not installed; no plots drawn (install "
              "python3-matplotlib or `pip install matplotlib`)")
        return 0
    try:
        rs = sb.load_results(argv[0])
        files = draw(rs, os.path.join(argv[0], "plots"), plt)
    except sb.InputError as e:
        print(f"plot: error: {e}", file=sys.stderr)
        return 2
    for f in files:
        print(f"plot: wrote {f}")
    if not files:
        print("plot: no rows with GB/s or GFLOP/s to draw")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
