# common: what the tables, the claims and the Summary share: the "not measured" mark,
# the layout, style and precision names they group by, spans of ratios, the re-check's
# ratio with its range, the 16-bit rows' pairs with their float32 twins. Standard
# library only.
import statistics

from . import checks
from .results import ceiling, fmt_bytes, fmt_x, group_by

NM = "not measured"
AHEAD = 1.05  # a peer "faster than ours by 5% or more": the Summary's line, which recheck settles against
NONCONTIG = ("transposed", "sliced", "column_major", "mixed_formats")
STYLES = ("inplace", "out", "outofplace", "outofplace_system")
PRECISIONS = ("f32", "f16", "bf16", "int8_dynamic", "int8_static")
CASE_KEYS = ("impl", "layout", "op", "device", "style", "dtype", "shape", "dim",
             "threads")
REUSE_STEPS = {1: "a = zeros", 2: "b = zeros", 3: "b = b.to(host)", 4: "c = zeros",
               5: "c = zeros again", 6: "d = zeros", 7: "del d",
               8: "e = zeros on host; e = e.to(device)", 9: "del e; empty_cache()"}


def span(values, fmt=fmt_x):
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def shape_of(r):
    return r.get("shape", "—") + (f" ({r['dim']})" if r["dim"] else "")


def count(r, name):
    v = r.counters.get(name) if r else None
    return "—" if v is None else f"{v:.0f}" if name == "allocs_per_iter" else fmt_bytes(v)


UNSETTLED = ("max rounds", "budget", "failed")  # scripts/recheck: the case's noise never settled


NOISY = 0.10  # a first-pass spread above ±10%: re-checked, or marked where it is quoted


def first_pass_noise(rs, a, b):
    """The larger first-pass spread of runs a and b where it is over NOISY and
    raw/recheck.json did not measure the pair alternating (either way round), else None:
    a ratio of the two first-pass medians that cannot be read as it is."""
    if rs.rechecked(a, b) or rs.rechecked(b, a):
        return None
    s = max(x.spread or 0 for x in (a, b))
    return s if s > NOISY else None


def noise_mark(rs, a, b):
    """'' when the ratio b ÷ a a table quotes can be read as it is: re-checked and
    settled, or both rows within ±10%; else what makes it noisy."""
    c = rs.rechecked(a, b) or rs.rechecked(b, a)
    if c:
        return " (noisy: re-check unsettled)" if c.get("settled") in UNSETTLED else ""
    s = first_pass_noise(rs, a, b)
    return f" (noisy: ±{100 * s:.0f}%, not re-checked)" if s else ""


def fmt_recheck(c):
    x = c["ratio"]
    text = f"{fmt_x(x['median'])} [{span([x['min'], x['max']])}]"
    return text + " (noisy)" if c.get("settled") in UNSETTLED else text


PRECISION_FAMILIES = ("elementwise", "copy", "reduce")  # the memory-bound rows
HALF_DTYPES = ("bf16", "f16")
YARDSTICK = 5  # points of % ceiling a 16-bit row may trail its float32 twin (issue #51)


def precision_pairs(rs, dev):
    """(float32 run, 16-bit run, f32 % ceiling, 16-bit % ceiling, distrusted) for each
    memory-bound row of ours on dev measured in float32 and in a 16-bit dtype, both with
    a ceiling. distrusted: a run check distrusts one of the two (checks.distrusted), so
    their points compare two states of the machine."""
    flagged = checks.distrusted(rs, dev)
    out = []
    for group in group_by(rs.select(PRECISION_FAMILIES, device=dev, impl="ours"), "dtype").values():
        by = {r["dtype"]: r for r in group}
        f32 = by.get("f32")
        c32 = ceiling(rs, f32) if f32 else None
        if not c32:
            continue
        for d in HALF_DTYPES:
            r = by.get(d)
            c = ceiling(rs, r) if r else None
            if c:
                out.append((f32, r, c32[2], c[2], f32.name in flagged or r.name in flagged))
    return out


def precision_points(rs, f32, r, p32, p):
    """(points of r's % ceiling against its float32 twin's, the re-check case or None).
    Where raw/recheck.json measured the pair alternating, r's % is its first pass's
    scaled by the first pass's time ratio over the interleaved one: float32's first-pass
    % stays the anchor, and the minutes between the two rows' first passes (a shared
    VM's memory bandwidth moves with them) drop out."""
    c = rs.rechecked(f32, r)
    if c:
        p = p * (r.median / f32.median) / c["ratio"]["median"]
    return p - p32, c


PEAK_FAMILIES = ("matmul", "conv")
PEAK_OPS = ("matmul", "conv2d")
PEAK_GOAL = 85  # % of the compute peak a GEMM or conv out= row of ours is held to


def peak_pairs(rs, dev):
    """(peak run, row, the row's first-pass % of it) for each out= matmul and conv2d row
    of ours on dev with a compute ceiling (results.ceiling: the fma_peak or gemm_peak of
    its dtype and threads): the rows the GEMM and conv goals are read on."""
    out = []
    for r in rs.select(PEAK_FAMILIES, device=dev, impl="ours", style="out", op=lambda v: v in PEAK_OPS):
        c = ceiling(rs, r)
        if c and c[0].median and r.median:
            out.append((c[0], r, c[2]))
    return out


def peak_percent(rs, peak, r, p):
    """(r's % of its peak, the re-check case or None): the first-pass % p, or, where
    raw/recheck.json measured the pair alternating, p scaled by the first pass's time
    ratio over each round's: {"median", "min", "max"} % of the same round's peak."""
    c = rs.rechecked(peak, r)
    if not c:
        return {"median": p, "min": p, "max": p}, None
    k = p * (r.median / peak.median)
    x = c["ratio"]
    return {"median": k / x["median"], "min": k / x["max"], "max": k / x["min"]}, c


def peak_rows(rs, dev):
    """(% of the peak, re-check case or None, row) for each of peak_pairs' rows on dev
    (peak_percent), lowest median first."""
    out = [peak_percent(rs, peak, r, p) + (r,) for peak, r, p in peak_pairs(rs, dev)]
    return sorted(out, key=lambda t: (t[0]["median"], t[2].name))


def peak_counts(rows):
    """(median %, lowest row, rows below PEAK_GOAL) of peak_rows' rows (non-empty)."""
    return (statistics.median(t[0]["median"] for t in rows), rows[0],
            sum(t[0]["median"] < PEAK_GOAL for t in rows))


def fmt_peak(pc, c):
    """A row's interleaved % of its peak: median [min–max] over the rounds (noisy)."""
    text = f"{pc['median']:.0f}% [{span([pc['min'], pc['max']], lambda v: f'{v:.0f}%')}]"
    return text + (" (noisy)" if c.get("settled") in UNSETTLED else "")


def reuse(rs, dev, alloc=None):
    """{impl: {step: counters}} of the reuse_experiment rows on dev (of those alloc
    kinds when given)."""
    out = {}
    want = {} if alloc is None else {"alloc": alloc}
    for r in rs.select("alloc", op="reuse_experiment", device=dev, **want):
        if r["step"] is not None:
            out.setdefault(r["impl"], {})[int(r["step"])] = r.counters
    return out


def bandwidth(r):
    if r is None:
        return None
    return r.gbps() or (r.size_bytes() / r.median if r.size_bytes() else None)
