# common: what the tables, the claims and the Summary share: the "not measured" mark,
# the layout, style and precision names they group by, spans of ratios, the re-check's
# ratio with its range. Standard library only.
from .results import fmt_bytes, fmt_x

NM = "not measured"
AHEAD = 1.05  # a peer "faster than ours by 5% or more": the Summary's line, which recheck settles against
NONCONTIG = ("transposed", "sliced", "column_major")
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


def fmt_recheck(c):
    x = c["ratio"]
    text = f"{fmt_x(x['median'])} [{span([x['min'], x['max']])}]"
    return text + " (noisy)" if c.get("settled") in UNSETTLED else text


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
