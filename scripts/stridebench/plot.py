# stridebench.plot: draws PNGs of a results folder into RESULTS_DIR/plots/ (matplotlib, Agg).
#
# Per device:
# - layout_<device>_<family>.png: per family, each layout row of ours as its rate against
#   its contiguous twin (1 = the same speed), one group of bars per op, shape and thread
#   count: what a layout costs, family by family.
# - style_<device>_<family>.png: per family, each style's time against the fastest style
#   of the same case (1 = the fastest): what a style costs.
# - roofline_<device>.png: arithmetic intensity (FLOP/byte) against achieved GFLOP/s for
#   every row with both counters, coloured by family, marked by thread count, under the
#   ceilings measured in the run at the highest thread count (DRAM and L2 copy rates,
#   the f32 and int8 peaks). Only the rows furthest below their ceiling are numbered,
#   with a key beside the plot; the rest stay unlabelled, so every label is legible.
# Each PNG is written atomically. Without matplotlib: a message and exit 0.
#
# Usage: scripts/plot RESULTS_DIR
import io
import math
import os
import sys

from . import results as sb

STYLES = ("inplace", "out", "outofplace", "outofplace_system")
FAMILIES = ("elementwise", "copy", "reduce", "matmul", "conv", "quant")
COLOURS = {"elementwise": "tab:blue", "copy": "tab:orange", "reduce": "tab:green",
           "matmul": "tab:red", "conv": "tab:purple", "quant": "tab:brown"}
MARKERS = ("o", "^", "s", "D")  # by thread count, in increasing order
ROOFLINE_KEY = 10  # rows numbered on the roofline: the furthest below their ceiling


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(plt, fig, path):
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    sb.atomic_write(path, buf.getvalue())
    return path


def short_name(name):
    """A run name without the keys every plotted row shares."""
    family, keys = sb.parse_name(name)
    keys.pop("impl", None)
    if keys.get("dtype") == "f32":
        keys.pop("dtype")
    keys.pop("device", None)
    words = [] if keys.get("op") == family else [family]
    for k, v in keys.items():
        words.append(f"{v} thr" if k == "threads" else f"{k}:{v}" if k in ("dim", "alloc", "step") else v)
    return " ".join(words)


def _ratio_bars(plt, rs, dev, groups, order, ylabel, title, path):
    """groups: {group label: {series: value}}; one bar per series at a fixed offset."""
    groups = {k: g for k, g in groups.items() if len(g) > 1}
    series = [s for s in order if any(s in g for g in groups.values())]
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(min(16, 3 + 0.9 * len(groups)), 4.8))
    width = 0.8 / len(series)
    for i, s in enumerate(series):
        xs = [j + i * width for j, g in enumerate(groups.values()) if s in g]
        ax.bar(xs, [g[s] for g in groups.values() if s in g], width, label=s)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(groups))])
    ax.set_xticklabels(list(groups), rotation=25, ha="right", fontsize=8)
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title} on {dev} ({rs.sb('sb_machine')})")
    ax.legend(fontsize=8)
    return save(plt, fig, path)


def _group(r):
    return sb.describe(r, ("op", "shape", "dim")) + (f", {r['threads']} thr" if r.get("threads") else "")


def _layout_plot(plt, rs, dev, family, path):
    groups = {}
    for r, b in sb.layout_cases(rs, family, device=dev):
        if not sb.preferred_style(rs, r):
            continue
        te = rs.time_ratio(b, r)
        if te:
            g = groups.setdefault(_group(r), {"contiguous": 1.0})
            g[r["layout"]] = 1 / te
    return _ratio_bars(plt, rs, dev, groups, sb.VOCAB["layout"],
                       "rate vs the contiguous twin (1 = same speed)",
                       f"What a layout costs: {family}", path)


def _style_plot(plt, rs, dev, family, path):
    groups = {}
    runs = rs.select(family, impl="ours", device=dev, style=STYLES, layout=(None, "contiguous"))
    for group in sb.group_by(runs, "style").values():
        if len(group) < 2:
            continue
        fastest = min(r.median for r in group)
        groups[_group(group[0])] = {r["style"]: r.median / fastest for r in group}
    return _ratio_bars(plt, rs, dev, groups, STYLES, "time vs the fastest style (1 = fastest)",
                       f"What a style costs: {family}", path)


def _ceilings(rs, dev):
    """(threads, [(label, GB/s)], [(label, GFLOP/s)]) at the highest thread count."""
    base = rs.select("baseline", device=dev)
    threads = sorted({b.get("threads") for b in base if b.get("threads")}, key=int)
    th = threads[-1] if threads else None  # GPU baselines have no thread count
    mine = [b for b in base if b.get("threads") == th]
    bws = []
    for regime in ("DRAM", "L2") if any(b.regime for b in mine) else (None,):
        c = [b for b in mine if b["op"] in ("copy", "copy_nt", "d2d_copy") and b.regime == regime
             and b.gbps()]
        if c:
            bws.append((f"{regime or 'device'} copy", sb.pick_ceiling(c, regime or "DRAM", "bytes").gbps()))
    peaks = []
    for dtype, label in (("f32", "f32 peak"), ("i8", "int8 peak")):
        c = [b for b in mine if b["op"] in ("fma_peak", "gemm_peak") and b.get("dtype", "f32") == dtype
             and b.gflops()]
        if c:
            peaks.append((label, max(b.gflops() for b in c)))
    return th, bws, peaks


def _roofline(plt, rs, dev, path):
    pts = [r for r in rs.select(device=dev) if r.family in FAMILIES and r.gbps() and r.gflops()]
    if not pts:
        return None
    th, bws, peaks = _ceilings(rs, dev)
    fig, (ax, key) = plt.subplots(1, 2, figsize=(12, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    ais = [r.gflops() / r.gbps() for r in pts]
    lo, hi = min(ais) / 3, max(ais) * 3
    top = max(p for _, p in peaks) if peaks else max(r.gflops() for r in pts) * 2
    for (label, bw), style in zip(bws, ("--", ":")):
        knee = min(max(top / bw, lo), hi)
        ax.plot([lo, knee], [bw * lo, bw * knee], "k" + style, linewidth=1,
                label=f"{label} {bw:.0f} GB/s" + (f" ({th} thr)" if th else ""))
    for (label, peak), style in zip(peaks, ("-", "-.")):
        ax.axhline(peak, color="gray", linestyle=style, linewidth=1, label=f"{label} {peak:.0f} GFLOP/s")
    threads = sorted({r.get("threads") or "1" for r in pts}, key=int)
    for fam in FAMILIES:
        for i, t in enumerate(threads):
            mine = [(ai, r) for ai, r in zip(ais, pts) if r.family == fam and (r.get("threads") or "1") == t]
            if mine:
                ax.scatter([a for a, _ in mine], [r.gflops() for _, r in mine], s=22,
                           color=COLOURS[fam], marker=MARKERS[i % len(MARKERS)], alpha=0.75,
                           label=f"{fam}, {t} thr" if len(threads) > 1 else fam)
    # number the rows furthest below their ceiling (attained ÷ the roof at their intensity)
    def roof(ai):
        cands = [bw * ai for _, bw in bws[:1]] + [p for _, p in peaks[:1]]
        return min(cands) if cands else math.inf
    worst = sorted(zip(ais, pts), key=lambda p: p[1].gflops() / roof(p[0]))[:ROOFLINE_KEY]
    lines = []
    offsets = ((5, -9), (5, 3), (-13, 3), (-13, -9))  # neighbours' numbers on different sides
    for k, (ai, r) in enumerate(worst, 1):
        ax.annotate(str(k), (ai, r.gflops()), fontsize=8, fontweight="bold", xytext=offsets[k % 4],
                    textcoords="offset points")
        lines.append(f"{k}. {short_name(r.name)}: {100 * r.gflops() / roof(ai):.0f}% of the roof")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"Roofline on {dev} ({rs.sb('sb_machine')})")
    ax.legend(fontsize=7, loc="lower right")
    key.axis("off")
    key.text(0, 1, "Furthest below the roof (the first copy rate or the f32\npeak"
             + (f", at {th} threads" if th else "") + "):\n\n" + "\n".join(lines), va="top", fontsize=8, family="monospace",
             wrap=True)
    return save(plt, fig, path)


def draw(rs, outdir, plt):
    """Writes every plot with data into outdir; returns the paths written."""
    os.makedirs(outdir, exist_ok=True)
    written = []
    for dev in sb.devices(rs.all()):
        tag = dev.replace(":", "")
        for fam in FAMILIES:
            written.append(_layout_plot(plt, rs, dev, fam, os.path.join(outdir, f"layout_{tag}_{fam}.png")))
            written.append(_style_plot(plt, rs, dev, fam, os.path.join(outdir, f"style_{tag}_{fam}.png")))
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
        outdir = os.path.join(argv[0], "plots")
        files = draw(rs, outdir, plt)
    except sb.InputError as e:
        print(f"plot: error: {e}", file=sys.stderr)
        return 2
    for f in sorted(os.listdir(outdir)):  # plots of an earlier layout of the folder go
        if f.endswith(".png") and os.path.join(outdir, f) not in files:
            os.unlink(os.path.join(outdir, f))
    for f in files:
        print(f"plot: wrote {f}")
    if not files:
        print("plot: no rows with GB/s or GFLOP/s to draw")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
