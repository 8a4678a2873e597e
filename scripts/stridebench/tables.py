# tables: regenerates RESULTS_DIR/TABLES.md from RESULTS_DIR/raw/*.json (+ machine.json
# and the optional raw/semantics.json and raw/recheck.json). Standard library only.
#
# One function per table of docs/DESIGN.md, in its order. Each gets the RunSet and a
# device and returns (one-line reading computed from the data, Markdown lines), or None
# when that device has no rows for it; a table with no rows on any device says "not
# measured". CLAIMS lists, per claim of docs/CLAIMS.md, the rule (which rows decide
# it and the threshold) and the function that applies it. Nothing is invented: a cell
# or claim without rows says "not measured".
#
# Usage: scripts/tables RESULTS_DIR        (exit 2 with one message on bad input)
import math
import os
import statistics
import sys

from . import results as sb
from .results import fmt_bytes, fmt_time, fmt_tm, fmt_x, md_table

NM = "not measured"
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


# ---------------------------------------------------------------- tables

def t_layout(rs, dev):
    rows, worst = [], {}
    for r in rs.select(sb.LAYOUT_FAMILIES, impl="ours", device=dev,
                       layout=lambda v: v not in (None, "contiguous")):
        if not sb.preferred_style(rs, r):
            continue
        b = rs.like(r, layout="contiguous")  # a row without a twin is shown, with no ratio
        t = r.median / b.median if b else None
        c = rs.rechecked(b, r) if b else None
        te = rs.time_ratio(b, r) if b else None  # the interleaved ratio where re-checked
        rows.append([r["op"], r["layout"], r.get("dtype", "—"), shape_of(r),
                     r.get("threads", "—"), r.get("style", "—"), fmt_tm(b), fmt_tm(r),
                     fmt_x(t), fmt_recheck(c) if c else "—", fmt_x(1 / te if te else None),
                     sb.pct_ceiling(rs, r)])
        if te and (r["op"] not in worst or te > worst[r["op"]][1]):
            worst[r["op"]] = (r, te, t if c else None)
    if not rows:
        return None
    reading = "slowest layout per op: " + ", ".join(
        f"{sb.describe(r, ('layout', 'op'))} runs at {1 / te:.2f}x the contiguous rate "
        f"({te:.2f}x its time" + (f" interleaved; first pass {t:.2f}x" if t else "") + ")"
        for r, te, t in worst.values()) if worst else "no contiguous counterpart measured"
    return reading, md_table(
        ["op", "layout", "dtype", "shape", "threads", "style", "contiguous",
         "this layout", "time ratio", "interleaved time ratio", "rate vs contiguous",
         "% ceiling"], rows)


def t_styles(rs, dev):
    runs = rs.select(("elementwise", "matmul", "conv"), device=dev, style=STYLES,
                     layout=(None, "contiguous"))
    rows, ratios, oop_alloc, in_alloc = [], [], [], []
    for group in sb.group_by(runs, "style").values():
        if len(group) < 2:
            continue  # one style alone compares nothing
        by = {r["style"]: r for r in group}
        ref = next(by[s] for s in STYLES if s in by)
        g = group[0]
        for s in STYLES:
            r = by.get(s)
            rows.append([g["impl"], g["op"], g.get("dtype", "—"), g.get("shape", "—"),
                         g.get("threads", "—"), s, fmt_tm(r),
                         fmt_x(r.median / ref.median) + f" {ref['style']}" if r else "—",
                         count(r, "peak_alloc_bytes"), count(r, "allocs_per_iter"),
                         sb.pct_ceiling(rs, r) if r else "—"])
        if "inplace" in by and "outofplace" in by:
            ratios.append(by["outofplace"].median / by["inplace"].median)
            a, i = (by[s].counters.get("peak_alloc_bytes") for s in ("outofplace", "inplace"))
            if a is not None and i is not None:
                oop_alloc.append(a)
                in_alloc.append(i)
    if not rows:
        return None
    reading = "no in-place/out-of-place pair measured"
    if ratios:
        reading = f"out-of-place takes {span(ratios)} the in-place time"
        if oop_alloc:
            reading += (f"; it allocates up to {fmt_bytes(max(oop_alloc))} per call, "
                        f"in-place up to {fmt_bytes(max(in_alloc))}")
    return reading, md_table(
        ["impl", "op", "dtype", "shape", "threads", "style", "time", "× time of",
         "peak alloc", "allocs/iter", "% ceiling"], rows)


def t_precision(rs, dev):
    rows, per = [], {}
    for group in sb.group_by(rs.select("quant", device=dev), "dtype").values():
        by = {r["dtype"]: r for r in group}
        f32 = by.get("f32")
        g = group[0]
        for d in PRECISIONS + tuple(d for d in by if d not in PRECISIONS):
            r = by.get(d)
            sp = f32.median / r.median if r and f32 else None
            w, w32 = (x.counters.get("weight_bytes") if x else None for x in (r, f32))
            wf = w / w32 if w is not None and w32 else None
            err = r.counters.get("rel_error") if r else None
            rows.append([g["impl"], g["op"], g.get("shape", "—"), g.get("threads", "—"),
                         d, fmt_tm(r), fmt_x(sp), fmt_bytes(w),
                         "—" if wf is None else f"{100 * wf:.0f}%",
                         "—" if err is None else f"{err:.1e}",
                         sb.pct_ceiling(rs, r) if r else "—"])
            if sp and d != "f32":
                per.setdefault(d, []).append((sp, wf))
    if not rows:
        return None
    reading = "; ".join(
        f"{d} runs at {span([s for s, _ in v])} fp32 speed" + (
            f" with {span([w for _, w in v], lambda x: f'{100 * x:.0f}%')} of its "
            "weight bytes" if None not in [w for _, w in v] else "")
        for d, v in per.items()) or "no fp32 reference measured"
    return reading, md_table(
        ["impl", "op", "shape", "threads", "dtype", "time", "speed vs fp32",
         "weight bytes", "weights vs fp32", "rel. error", "% ceiling"], rows)


def t_channels_last(rs, dev):
    runs = rs.select("conv", device=dev, impl="ours", layout=("contiguous", "channels_last"),
                     op=lambda v: v != "matmul")  # the conv family's GEMM reference row
    runs += [r for r in rs.select("elementwise", device=dev, impl="ours",
                                  layout="channels_last")]
    rows, speed, even = [], [], []
    for group in sb.group_by([r for r in runs if sb.preferred_style(rs, r)],
                             "layout").values():
        g = group[0]
        nchw, nhwc = (rs.like(g, layout=l) for l in ("contiguous", "channels_last"))
        convs = rs.select("copy", op="nchw_to_nhwc", device=dev, dtype=g["dtype"],
                          shape=g["shape"])  # the same thread count when measured
        conv = next((c for c in convs if c["threads"] == g["threads"]),
                    next(iter(convs), None))
        sp = nchw.median / nhwc.median if nchw and nhwc else None
        be = "—"
        if sp and conv:
            gain = nchw.median - nhwc.median
            be = str(math.ceil(conv.median / gain)) if gain > 0 else "never"
            if gain > 0:
                even.append(math.ceil(conv.median / gain))
        if sp:
            speed.append(sp)
        rows.append([g["op"], g.get("dtype", "—"), g.get("shape", "—"),
                     g.get("threads", "—"), g.get("style", "—"), fmt_tm(nchw),
                     fmt_tm(nhwc), fmt_x(sp), fmt_tm(conv), be,
                     sb.pct_ceiling(rs, nhwc) if nhwc else "—"])
    if not rows:
        return None
    reading = f"NHWC runs at {span(speed)} the NCHW speed" if speed else \
        "no NCHW/NHWC pair measured"
    if even:
        n = span(even, str)
        reading += f"; the conversion pays for itself after {n} call{'s' * (n != '1')}"
    return reading, md_table(
        ["op", "dtype", "shape", "threads", "style", "NCHW", "NHWC", "NHWC speed-up",
         "NCHW→NHWC conversion", "calls to break even", "% ceiling (NHWC)"], rows)


def t_views(rs, dev):
    runs = rs.select("views", device=dev)
    if not runs:
        return None
    rows, meta, copies = [], [], []
    for r in runs:
        moved = r.counters.get("bytes") or r.counters.get("peak_alloc_bytes")
        (copies if moved else meta).append(r)
        rows.append([r["impl"], r["op"], r.get("layout", "—"), r.get("dtype", "—"),
                     r.get("shape", "—"), r.get("threads", "—"), r.get("style", "—"), fmt_tm(r),
                     count(r, "bytes"), count(r, "peak_alloc_bytes"),
                     sb.pct_ceiling(rs, r)])
    parts = []
    if meta:
        parts.append(f"metadata-only calls ({', '.join(sorted({r['op'] for r in meta}))}) "
                     f"take {span([r.median for r in meta], fmt_time)} and move no bytes")
    if copies:
        parts.append(f"copies ({', '.join(sorted({r['op'] for r in copies}))}) take "
                     f"{span([r.median for r in copies], fmt_time)}")
    return "; ".join(parts), md_table(
        ["impl", "op", "layout", "dtype", "shape", "threads", "style", "time per call",
         "bytes moved", "new memory", "% ceiling"], rows)


def t_allocator(rs, dev):
    lines, parts = [], []
    af = rs.select("alloc", op="alloc_free", device=dev)
    kinds = [k for k in sb.VOCAB["alloc"] if any(r["alloc"] == k for r in af)]
    plain = "cudamalloc" if dev.startswith("cuda") else "system"
    ratios = []
    rows = []
    for group in sb.group_by(af, "alloc").values():
        by = {r["alloc"]: r for r in group}
        x = by[plain].median / by["caching"].median \
            if plain in by and "caching" in by else None
        if x:
            ratios.append(x)
        rows.append([group[0]["impl"], fmt_bytes(group[0].size_bytes())]
                    + [fmt_tm(by.get(k)) for k in kinds] + [fmt_x(x)])
    if rows:
        lines += ["Allocation + free latency:", ""] + md_table(
            ["impl", "size"] + kinds + [f"{plain} ÷ caching time"], rows) + [""]
        if ratios:
            parts.append(f"plain ({plain}) alloc+free takes {span(ratios)} the caching "
                         "allocator's time")
    for (impl, alloc), steps in _reuse_by_alloc(rs, dev).items():
        extra = [c for c in ("host_allocated_bytes", "host_reserved_bytes")
                 if any(c in v for v in steps.values())]
        rows = [[str(n), REUSE_STEPS.get(n, ""), fmt_bytes(v.get("allocated_bytes")),
                 fmt_bytes(v.get("reserved_bytes"))] + [fmt_bytes(v.get(c)) for c in extra]
                for n, v in sorted(steps.items())]
        who = f"`impl:{impl}`" + (f", `alloc:{alloc}`" if alloc else "")
        lines += [f"Reuse experiment of CLAIMS.md ({who}), allocator state after "
                  "each step:", ""] + md_table(
            ["step", "what", "allocated", "reserved"] + [c.replace("_bytes", "").replace(
                "_", " ") for c in extra], rows) + [""]
        last = steps[max(steps)]
        if "reserved_bytes" in last and "allocated_bytes" in last:
            parts.append(f"after step {max(steps)} {impl}" + (f" ({alloc})" if alloc else "") + " keeps "
                         f"{fmt_bytes(last['reserved_bytes'])} reserved for "
                         f"{fmt_bytes(last['allocated_bytes'])} allocated")
    if not lines:
        return None
    return "; ".join(parts) or "no caching/plain pair measured", lines[:-1]


def _reuse_by_alloc(rs, dev):
    """{(impl, alloc): {step: counters}}: one experiment per allocator, never merged."""
    out = {}
    for r in rs.select("alloc", op="reuse_experiment", device=dev):
        if r["step"] is not None:
            out.setdefault((r["impl"], r["alloc"]), {})[int(r["step"])] = r.counters
    return out


def _reuse(rs, dev, alloc=None):
    """{impl: {step: counters}} of the reuse_experiment rows on dev (of those alloc
    kinds when given)."""
    out = {}
    want = {} if alloc is None else {"alloc": alloc}
    for r in rs.select("alloc", op="reuse_experiment", device=dev, **want):
        if r["step"] is not None:
            out.setdefault(r["impl"], {})[int(r["step"])] = r.counters
    return out


def t_transfer(rs, dev):
    rows, ratios, best = [], [], []
    for group in sb.group_by(rs.select("transfer", device=dev), "alloc").values():
        by = {r["alloc"]: r for r in group}
        pg, pn = by.get("pageable"), by.get("pinned")
        bw = [_bw(r) for r in (pg, pn)]
        x = bw[1] / bw[0] if all(bw) else None
        if x:
            ratios.append(x)
        best += [b for b in bw if b]
        g = group[0]
        rows.append([g["impl"], g["op"], fmt_bytes(g.size_bytes()), fmt_tm(pg),
                     sb.fmt_rate(bw[0], "GB/s"), fmt_tm(pn), sb.fmt_rate(bw[1], "GB/s"),
                     fmt_x(x)])
    if not rows:
        return None
    reading = (f"pinned memory reaches {span(ratios)} the pageable bandwidth"
               if ratios else "no pinned/pageable pair measured")
    if best:
        reading += f" (best {sb.fmt_rate(max(best), 'GB/s')})"
    return reading, md_table(["impl", "op", "size", "pageable", "pageable GB/s", "pinned",
                              "pinned GB/s", "pinned ÷ pageable rate"], rows)


def _bw(r):
    if r is None:
        return None
    return r.gbps() or (r.size_bytes() / r.median if r.size_bytes() else None)


def t_roofline(rs, dev):
    base = rs.select("baseline", device=dev)
    lines, pcts, missing = [], [], 0
    if base:
        lines += ["Ceilings (baseline rows):", ""] + md_table(
            ["op", "dtype", "shape", "threads", "regime", "time", "GB/s", "GFLOP/s"],
            [[b["op"], b.get("dtype", "—"), b.get("shape", "—"), b.get("threads", "—"),
              b.regime or "—", fmt_tm(b), sb.fmt_rate(b.gbps(), "GB/s"),
              sb.fmt_rate(b.gflops(), "GFLOP/s")] for b in base]) + [""]
    rows = []
    for r in rs.select(device=dev):
        kind = sb.ceiling_kind(r)
        if not kind or sb.rate(r, kind[1]) is None:
            continue
        c = sb.ceiling(rs, r)
        gb, gf = r.gbps(), r.gflops()
        ai = gf / gb if gb and gf else None
        if c:
            pcts.append((c[2], r))
        else:
            missing += 1
        rows.append([r.name.split("/", 1)[1].replace(f"device:{dev}/", ""),
                     r.regime or "—", fmt_tm(r), sb.fmt_rate(gb, "GB/s"),
                     sb.fmt_rate(gf, "GFLOP/s"), "—" if ai is None else f"{ai:.2f}",
                     f"{c[0]['op']} {c[0].regime or ''}".strip() if c else "none measured",
                     f"{c[2]:.0f}%" if c else "—"])
    if not rows and not base:
        return None
    if rows:
        lines += ["Kernel rows:", ""] + md_table(
            ["row", "regime", "time", "GB/s", "GFLOP/s", "FLOP/byte", "ceiling",
             "% ceiling"], rows)
    if pcts:
        keys = ("layout", "op", "style", "dtype", "shape", "threads")
        parts = []
        for who, group in (("our", [p for p in pcts if p[1]["impl"] == "ours"]),
                           ("peers'", [p for p in pcts if p[1]["impl"] != "ours"])):
            if not group:
                continue
            lo, hi = min(group, key=lambda p: p[0]), max(group, key=lambda p: p[0])
            name = (lambda r: sb.describe(r, keys)) if who == "our" else \
                (lambda r: f"{r['impl']} " + sb.describe(r, keys))
            parts.append(f"{who} {len(group)} kernel rows reach a median "
                         f"{statistics.median(p for p, _ in group):.0f}% of their ceiling "
                         f"(lowest {lo[0]:.0f}%: {name(lo[1])}; highest {hi[0]:.0f}%: {name(hi[1])})")
        reading = "; ".join(parts)
    else:
        reading = "no kernel row has a matching baseline row" if rows else \
            "only baseline rows measured"
    if missing:
        reading += f"; {missing} rows have no matching baseline row"
    return reading, lines


UNSETTLED = ("max rounds", "budget", "failed")  # scripts/recheck: the case's noise never settled


def fmt_recheck(c):
    x = c["ratio"]
    text = f"{fmt_x(x['median'])} [{span([x['min'], x['max']])}]"
    return text + " (noisy)" if c.get("settled") in UNSETTLED else text


def t_peers(rs, dev):
    rows, ratios, again = [], {}, {}
    for r in rs.select(device=dev, impl=lambda v: v not in (None, "ours"),
                       op=lambda v: v not in ("reuse_experiment", "overhead")):
        # reuse_experiment: its time means nothing; overhead: peers' own call cost
        o = rs.like(r, impl="ours")
        x = r.median / o.median if o else None
        if x:
            ratios.setdefault(r["impl"], []).append(x)
        c = rs.rechecked(o, r) if o else None
        if c:
            again.setdefault(r["impl"], []).append(c["ratio"]["median"])
        case = r.name.replace(f"/impl:{r['impl']}", "").replace(f"/device:{dev}", "")
        rows.append([r["impl"], case, fmt_tm(o), fmt_tm(r), fmt_x(x),
                     fmt_recheck(c) if c else "—",
                     sb.pct_ceiling(rs, o) if o else "—", sb.pct_ceiling(rs, r)])
    if not rows:
        return None
    parts = []
    if dev == "cpu" and rs.sb("sb_torch_bf16_cpu") == "reference" and any(
            r[0] == "torch" and "/dtype:bf16/" in r[1] and r[1].startswith(("matmul/", "quant/"))
            for r in rows):
        parts.append("torch's bf16 matmul and linear rows on this CPU run ATen's reference loops "
                     "(torch 1.13's oneDNN bf16 path needs AVX-512BW/VL/DQ): no fast bf16 path to compare")
    for p, v in ratios.items():
        t = f"{p} takes {span(v)} our time over {len(v)} cases (faster in {sum(x < 1 for x in v)})"
        if p in again:
            a = again[p]
            t += (f"; re-checked alternating with ours, the {len(a)} case{'s' if len(a) != 1 else ''} "
                  f"{_peer_pick_text(rs.recheck['context'])} read {span(a)} (faster in {sum(x < 1 for x in a)})")
        parts.append(t)
    return "; ".join(parts) or "no matching `impl:ours` row measured", md_table(
        ["peer", "case", "ours", "peer", "peer ÷ ours time", "interleaved peer ÷ ours",
         "% ceiling ours", "% ceiling peer"], rows)


def _peer_pick_text(ctx):
    if ctx.get("selection") == "band":  # files written before the peer-ahead pick
        return f"first within {ctx.get('band', '?')}x"
    return f"where the peer was ahead or ours ahead by less than {ctx.get('band', '?')}x"


def _rounds_text(ctx):
    lo, hi = ctx.get("min_rounds"), ctx.get("max_rounds")
    if lo is None or hi is None:
        return f"in {ctx.get('rounds', '?')} rounds"
    if lo == hi:
        return f"in {hi} rounds"
    return (f"in {lo} to {hi} rounds, each case until the standard error of its log ratio was "
            f"{100 * ctx.get('target_se', 0):.0f}% or less or, for a peer row, its 95% interval left "
            f"the {ctx.get('ahead', 1.05):g}x line (a budget of {ctx.get('budget_s') or 'no'} s: "
            f"stopped on {ctx.get('stopped', '?')}, {ctx.get('seconds', '?')} s)")


def recheck_section(rs):
    """Every case of raw/recheck.json: first pass against the interleaved rounds."""
    if rs.recheck is None:
        return []
    ctx, cases = rs.recheck["context"], rs.recheck["cases"]
    out = ["## Interleaved re-check", ""]
    if not cases:
        return out + [f"No case was re-checked (selection: {ctx.get('selection', '?')}, "
                      f"band {ctx.get('band', '?')}x).", ""]
    out += [f"`scripts/recheck` measured each case again {_rounds_text(ctx)}, "
            "the two sides' programs alternating which runs first; the ratio is the median of "
            "the per-round ratios b ÷ a, [min–max] over the rounds (docs/BENCHMARKS.md); "
            "(noisy): the case never settled. "
            f"Selection: {selection_text(ctx)}.", ""]
    rows = []
    for c in cases:
        se = c.get("se")
        rows.append([c.get("pick", "—"), c["a"], c["b"], fmt_x(c.get("first_pass")),
                     fmt_recheck(c) if c.get("ratio") else NM, str(len(c["rounds"])),
                     f"{100 * se:.1f}%" if se is not None else "—", c.get("settled", "—")])
    return out + md_table(["pick", "a", "b", "first pass b ÷ a", "interleaved b ÷ a", "rounds",
                           "SE of log ratio", "stopped on"], rows) + [""]


def selection_text(ctx):
    if ctx.get("selection") == "pairs":
        return "pairs given by hand"
    if ctx.get("selection") == "band":  # files written before the peer-ahead pick
        text = f"every peer row within {ctx.get('band')}x of ours in the first pass (pick: peer)"
    else:
        text = (f"every peer row where the peer was ahead of ours in the first pass, however far, and "
                f"those where ours was ahead by less than {ctx.get('band')}x, widened by the two rows' "
                "spreads (pick: peer; the Summary's peer line quotes only these)")
    n = ctx.get("layout_per_style")
    if n:
        text += (f", and per device, op and style the {n} non-contiguous row{'s' if n != 1 else ''} of ours "
                 "furthest from their contiguous twin in the first pass, either way (pick: layout; the Memory "
                 "layout table, claims L1–L5 and the Summary use their interleaved ratio)")
    if ctx.get("style"):
        text += (", and per device and family the costliest style of ours against the fastest style of its "
                 "case (pick: style; the Summary's costliest style)")
    return text


TABLES = [
    ("Memory layout", "no `matmul`, `conv`, `elementwise`, `copy` or `reduce` rows "
     "with a non-contiguous layout", t_layout),
    ("In-place vs out-of-place", "no rows with a `style` of inplace, out, outofplace "
     "or outofplace_system", t_styles),
    ("Precision and quantization", "no `quant` rows", t_precision),
    ("Channels-last", "no `conv` rows and no `layout:channels_last` rows",
     t_channels_last),
    ("Views vs copies", "no `views` rows", t_views),
    ("Allocator", "no `alloc` rows", t_allocator),
    ("Host to device", "no `transfer` rows", t_transfer),
    ("Roofline", "no kernel rows with a `bytes` or `flop` counter", t_roofline),
]


# ---------------------------------------------------------------- claims

def verdict(labels, oks, runs=None):
    """One sentence: 'holds', 'does not hold', or, when some cases pass, what separates
    them: the one key whose values split the passing cases from the others ('holds on
    1 thread, not on 2'), else how many pass (and which, when at most 3)."""
    good = [l for l, ok in zip(labels, oks) if ok]
    if len(good) == len(oks):
        return "holds"
    if not good:
        return "does not hold"
    if runs:
        sizes = [(int(r.get("size")), ok) for r, ok in zip(runs, oks)] if all(r.get("size") for r in runs) else []
        if sizes:  # an ordered key: a threshold reads better than a list
            yes = [v for v, ok in sizes if ok]
            no = [v for v, ok in sizes if not ok]
            if max(no) < min(yes):
                return f"holds from {fmt_bytes(min(yes))} up, not below"
            if max(yes) < min(no):
                return f"holds up to {fmt_bytes(max(yes))}, not above"
        for key in SPLIT_KEYS:
            yes = {r.get(key) for r, ok in zip(runs, oks) if ok}
            no = {r.get(key) for r, ok in zip(runs, oks) if not ok}
            if None in yes | no or yes & no:
                continue
            return f"holds {_values(key, yes)}, not {_values(key, no)}"
    return f"holds in {len(good)} of {len(oks)} cases" + (": " + ", ".join(good) if len(good) <= 3 else "")


SPLIT_KEYS = ("threads", "layout", "op", "dtype", "shape", "style", "dim")


def _values(key, vals):
    vals = sorted(vals, key=lambda v: sb._order(key, v))
    if key == "threads":
        return "on " + " and ".join(vals) + (" thread" if vals == ["1"] else " threads")
    joined = ", ".join(vals[:-1]) + (" or " if len(vals) > 1 else "") + vals[-1]
    return {"layout": f"for the {joined} layout", "op": f"for {joined}",
            "dtype": f"in {joined}", "shape": f"at {joined}", "style": f"in the {joined} style",
            "dim": f"along the {joined} dim"}[key] + ("s" if key == "layout" and len(vals) > 1 else "")


def decide(cases, fmt=fmt_x, prefix="", labels=None):
    """cases: [(run, value, ok)] -> (figure, verdict); labels name the cases by the
    keys that differ among them."""
    if not cases:
        return NM, NM
    labels = labels or sb.varying_labels([c[0] for c in cases], CASE_KEYS)
    if len(cases) <= 3:
        fig = ", ".join(f"{l} {fmt(v)}" for l, (_, v, _) in zip(labels, cases))
    else:
        vs = [v for _, v, _ in cases]
        i, j = vs.index(min(vs)), vs.index(max(vs))
        fig = (f"{fmt(vs[i])} ({labels[i]}) to {fmt(vs[j])} ({labels[j]}) "
               f"over {len(cases)} cases")
    return prefix + fig, verdict(labels, [ok for _, _, ok in cases], [c[0] for c in cases])


def at_least(claimed):
    """A 'k x slower/faster' claim holds when the measured ratio is at least 80% of
    the claimed effect: 1 + 0.8 (k - 1)."""
    return 1 + 0.8 * (claimed - 1)


def c_slower(family, op, claimed):
    def f(rs):
        return decide([(r, t, t >= at_least(claimed))
                       for r, b in sb.layout_cases(rs, family, op, NONCONTIG)
                       for t in [rs.time_ratio(b, r)]])
    return f


def c_l3(rs):
    return decide([(r, t, 1 / 1.1 <= t <= 1.1)
                   for r, b in sb.layout_cases(rs, "elementwise", ("add", "mul", "relu"), NONCONTIG)
                   for t in [rs.time_ratio(b, r)]])


def c_l4(rs):
    return decide([(r, t, t >= at_least(2.5))
                   for r, b in sb.layout_cases(rs, "copy", "contiguous", "transposed")
                   if b.counters.get("bytes", 1) > 0
                   for t in [rs.time_ratio(b, r)]])


def c_l5(rs):
    return decide([(r, t, t >= 1.05)
                   for r, b in sb.layout_cases(rs, "conv", "conv2d", "channels_last")
                   for t in [rs.time_ratio(r, b)]],
                  prefix="NHWC speed-up: ")


def c_l6(rs):
    cases = []
    for layout, fast, slow in (("contiguous", "inner", "outer"),
                               ("column_major", "outer", "inner")):
        for r in rs.select("reduce", impl="ours", layout=layout, dim=fast):
            s = rs.like(r, dim=slow)
            if s:
                cases.append((r, s.median / r.median, s.median / r.median >= 1.05))
    labels = sb.varying_labels([c[0] for c in cases], [k for k in CASE_KEYS if k != "dim"])
    return decide(cases, prefix="along-the-storage-order speed-up: ", labels=labels)


def c_l7(rs):
    cases, fig = [], {}
    for r in rs.select(("views", "copy"), impl="ours"):
        alloc = r.counters.get("peak_alloc_bytes")
        if alloc is None:
            continue
        if r["op"] in ("view", "reshape", "transpose", "flatten"):
            cases.append((r, alloc, alloc == 0))
        elif r["op"] == "clone" or (r["op"] == "contiguous" and r["layout"] in NONCONTIG):
            cases.append((r, alloc, alloc > 0))
        else:
            continue
        key = "clone()" if r["op"] == "clone" else f"contiguous() of {r['layout']}" \
            if r["op"] == "contiguous" else "views"
        fig.setdefault(key, []).append(alloc)
    figure, v = decide(cases)
    if cases:
        figure = "new memory: " + ", ".join(f"{k} {span(a, fmt_bytes)}"
                                            for k, a in fig.items())
        # PyTorch's rule: reshape is a view only where the strides allow one, so a
        # reshape of a transposed tensor copies; that case says so instead of failing.
        views = [(r, ok) for r, _, ok in cases if r["op"] in ("view", "reshape", "transpose", "flatten")]
        copies = [(r, ok) for r, _, ok in cases if (r, ok) not in views]
        reshape_copies = [r for r, ok in views if not ok and r["op"] == "reshape"
                          and r.get("layout") in NONCONTIG]
        other_fail = [r for r, ok in views if not ok and r not in reshape_copies] + \
            [r for r, ok in copies if not ok]
        if not other_fail:
            parts = ["views allocate nothing"]
            if reshape_copies:
                parts.append("reshape of a " + "/".join(sorted({r["layout"] for r in reshape_copies}))
                             + " tensor copies, as PyTorch's rule says")
            if copies:
                parts.append("contiguous() and clone() allocate")
            v = ("holds: " if not reshape_copies else "holds as PyTorch defines it: ") + "; ".join(parts)
    return figure, v


def peer_first(rs, pick):
    """Runs pick(rs, impl) for torch first, then ours: (cases, 'torch rows: ')."""
    for impl in ("torch", "ours"):
        cases = pick(rs, impl)
        if cases:
            return cases, f"{impl} rows: "
    return [], ""


def c_s1(rs):
    def pick(rs, impl):
        out = []
        for r in rs.select("elementwise", impl=impl, op=("add", "mul", "relu"),
                           style="outofplace", layout=(None, "contiguous")):
            i = rs.like(r, style="inplace")
            if i:
                out.append((r, r.median / i.median, 1 / 1.1 <= r.median / i.median <= 1.1))
        return out
    cases, prefix = peer_first(rs, pick)
    return decide(cases, prefix=prefix + "out-of-place ÷ in-place time: ")


def c_s2(rs):
    cases = []
    for r in rs.select(("elementwise", "matmul", "conv"), impl="ours",
                       op=("add", "relu", "matmul", "conv2d"), style="outofplace",
                       layout=(None, "contiguous")):
        i = rs.like(r, style="inplace") or rs.like(r, style="out")
        po, total = r.counters.get("peak_alloc_bytes"), r.counters.get("bytes")
        pi = i.counters.get("peak_alloc_bytes") if i else None
        if None in (po, pi) or not total:
            continue
        claimed = 0.5 if r["op"] in ("add", "relu") else 1 / 3
        saving = (po - pi) / total  # footprint out-of-place = inputs + output = bytes
        cases.append((r, saving, saving >= 0.8 * claimed))
    return decide(cases, lambda v: f"{100 * v:.0f}%", "memory saved: ")


def c_s3(rs):
    cases = []
    for r in rs.select("elementwise", impl="ours", style="outofplace"):
        o = rs.like(r, style="out")
        if not o:
            continue
        t = r.median / o.median
        ao, a = o.counters.get("peak_alloc_bytes"), r.counters.get("peak_alloc_bytes")
        cases.append((r, t, t >= 1.05 and (a is None or ao is None or a > ao)))
    return decide(cases, prefix="out-of-place ÷ out= time: ")


def precision_cases(rs, dtype, speed, memory):
    """[(row, speed-up vs its f32 twin, holds)] and the figures' text for the quant rows
    of one dtype."""
    cases, fig = [], []
    for r in rs.select("quant", dtype=dtype, op=("linear", "mlp")):
        ref = rs.like(r, dtype="f32")
        if not ref:
            continue
        sp = ref.median / r.median
        w, w32 = r.counters.get("weight_bytes"), ref.counters.get("weight_bytes")
        wf = w / w32 if w is not None and w32 else None
        ok = sp >= at_least(speed) and (wf is None or wf <= 1.25 * memory)
        cases.append((r, sp, ok))
        fig.append(f"{sp:.2f}x" + ("" if wf is None else f", {100 * wf:.0f}% weights"))
    return cases, fig


def c_precision(dtype, speed, memory, also=None):
    """The claim about `dtype`; `also` names a dtype whose rows are shown beside it, by
    the same measure, without entering the verdict (P3: bf16 beside fp16)."""
    def f(rs):
        cases, fig = precision_cases(rs, dtype, speed, memory)
        figure, verdict = decide(cases, prefix="speed-up vs fp32: ")
        if cases and len(cases) <= 3:
            labels = sb.varying_labels([c[0] for c in cases], CASE_KEYS)
            figure = "vs fp32: " + "; ".join(f"{l} {x}" for l, x in zip(labels, fig))
        if also:
            extra, _ = precision_cases(rs, also, speed, memory)
            if extra:
                figure += f"; {also} (not judged): {span([sp for _, sp, _ in extra])} fp32 speed"
        return figure, verdict
    return f


def reuse_pick(rs):
    """(impl, device, {step: counters}) for the M claims: torch first, GPU first; the
    claims are about a caching allocator, so rows of another allocator (torch's CPU
    rows are `alloc:system`: it has no CPU cache) never decide them."""
    for impl in ("torch", "ours"):
        for dev in reversed(sb.devices(rs.all())):
            steps = _reuse(rs, dev, alloc=(None, "caching")).get(impl)
            if steps:
                return impl, dev, steps
    return None, None, {}


def c_m(which):
    def f(rs):
        impl, dev, st = reuse_pick(rs)
        R = {n: v.get("reserved_bytes") for n, v in st.items()}
        A = {n: v.get("allocated_bytes") for n, v in st.items()}
        T = (A.get(1) or 0) - (A.get(0) or 0)
        if not T or T <= 0:
            return NM, NM
        tol = T / 2
        units = lambda d, ns: ", ".join(
            f"{d[n] / T:.1f}" if d.get(n) is not None else "?" for n in ns)
        prefix = f"{impl} rows on {dev}, tensor {fmt_bytes(T)}: "

        def need(*ns, d=R):
            return all(d.get(n) is not None for n in ns)
        if which == "M1" and need(2, 3, 4, 5, 6, 7):
            checks = [("step 3 (kept)", R[3] >= R[2] - tol),
                      ("step 4 (reused)", R[4] <= R[3] + tol),
                      ("step 6 (reused)", R[6] <= R[5] + tol),
                      ("step 7 (kept)", R[7] >= R[6] - tol)]
            fig = f"reserved ÷ tensor after steps 1–7: {units(R, range(1, 8))}"
        elif which == "M2" and need(3, 4, 5):
            checks = [("step 5 (grows by a tensor)", R[5] - R[4] >= T - tol),
                      ("step 4 (no growth after moving b)", R[4] - R[3] <= tol)]
            fig = (f"reserved grows by {(R[5] - R[4]) / T:.1f} tensors at step 5, "
                   f"{(R[4] - R[3]) / T:.1f} at step 4")
        elif which == "M3":
            H = {n: v.get("host_reserved_bytes", v.get("host_allocated_bytes"))
                 for n, v in st.items()}
            if not need(2, 3, 7, 8, d=H):
                return NM, NM
            checks = [("step 3 (host grows)", H[3] - H[2] >= T - tol),
                      ("step 8 (host returned)", H[8] <= H[7] + tol)]
            fig = f"host memory ÷ tensor after steps 2, 3, 7, 8: {units(H, (2, 3, 7, 8))}"
        elif which == "M4" and need(8, 9) and A.get(9) is not None:
            checks = [("step 9 (unused blocks returned)", R[9] <= A[9] + tol)]
            fig = (f"after step 9 (del e; empty_cache): reserved {R[9] / T:.1f}, "
                   f"allocated {A[9] / T:.1f} tensors (step 8: reserved {R[8] / T:.1f})")
        else:
            return NM, NM
        return prefix + fig, verdict(*zip(*checks))
    return f


def c_m5(rs):
    def pick(rs, impl):
        out = []
        for r in rs.select("alloc", op="alloc_free", impl=impl, device="cpu",
                           alloc="caching"):
            s = rs.like(r, alloc="system")
            if s and r.size_bytes():
                out.append((r.size_bytes(), s.median / r.median))
        return sorted(out)
    cases, prefix = peer_first(rs, pick)
    if not cases:
        return NM, NM
    fig = prefix + "system ÷ caching time: " + ", ".join(
        f"{fmt_bytes(s)} {fmt_x(x)}" for s, x in cases)
    small, large = cases[0][1], cases[-1][1]
    if len(cases) >= 2 and small < 1 < large:
        cross = next(s for s, x in cases if x > 1)
        return fig, f"holds (caching wins from {fmt_bytes(cross)})"
    if all(x > 1 for _, x in cases):
        return fig, "does not hold: the caching allocator is faster at every size"
    if all(x < 1 for _, x in cases):
        return fig, "does not hold: plain allocation is faster at every size"
    return fig, "does not hold: no small-to-large crossover"


def c_h1(rs):
    def pick(rs, impl):
        out = []
        for r in rs.select("transfer", op="h2d", impl=impl, alloc="pinned"):
            p = rs.like(r, alloc="pageable")
            bw, bp = _bw(r), _bw(p)
            if bw and bp:
                out.append((r, bw / bp, bw / bp >= 1.05))
        return out
    cases, prefix = peer_first(rs, pick)
    return decide(cases, prefix=prefix + "pinned ÷ pageable bandwidth: ",
                  labels=[fmt_bytes(r.size_bytes()) for r, _, _ in cases])


def c_v(vid):
    def f(rs):
        if rs.semantics is None or vid not in rs.semantics:
            return NM, NM
        ok = rs.semantics[vid]
        return f"semantic check {'passed' if ok else 'failed'}", \
            "holds" if ok else "does not hold"
    return f


CLAIMS = [
    ("L1", "matmul on a non-contiguous operand is ~50% slower (1.5x time)",
     "matmul transposed/sliced/column_major ÷ contiguous time; holds at ≥ 1.4x",
     c_slower("matmul", "matmul", 1.5)),
    ("L2", "conv2d on non-contiguous input is ~75% slower (1.75x time)",
     "conv2d transposed/sliced/column_major ÷ contiguous time; holds at ≥ 1.6x",
     c_slower("conv", "conv2d", 1.75)),
    ("L3", "elementwise ops run at the same speed contiguous or not",
     "add/mul/relu transposed/sliced/column_major ÷ contiguous time; holds within ±10%",
     c_l3),
    ("L4", "a materialised transpose costs 2.5x on a non-contiguous tensor",
     "copy `contiguous` transposed ÷ contiguous (a real copy) time; holds at ≥ 2.2x",
     c_l4),
    ("L5", "channels-last (NHWC) makes convolutions faster than NCHW",
     "conv2d NCHW ÷ NHWC time; holds at ≥ 1.05x", c_l5),
    ("L6", "row traversal of a C-order array beats column traversal; the reverse for "
     "F-order", "sum dim:outer ÷ dim:inner time (contiguous), inner ÷ outer "
     "(column_major); holds at ≥ 1.05x", c_l6),
    ("L7", "view/reshape/transpose/flatten cost no memory; contiguous() of a "
     "non-contiguous tensor and clone() allocate", "peak_alloc_bytes: 0 for views, "
     "> 0 for clone and contiguous of a non-contiguous layout", c_l7),
    ("S1", "in-place and out-of-place ops take the same time",
     "add/mul/relu outofplace ÷ inplace time, torch rows when present; holds within "
     "±10%", c_s1),
    ("S2", "in-place saves 50% of memory for add and relu, 33% for matmul and conv2d",
     "(peak_alloc outofplace − inplace, else out=) ÷ bytes of the out-of-place call; "
     "holds at ≥ 80% of the claimed saving", c_s2),
    ("S3", "temporaries in a loop cost time and memory; reusing an out= buffer avoids "
     "it", "elementwise outofplace ÷ out time ≥ 1.05x and more peak_alloc_bytes", c_s3),
    ("P1", "int8 dynamic quantization: 2.5x faster than fp32 with 40% of its memory",
     "quant int8_dynamic vs f32: speed-up ≥ 2.2x and weight bytes ≤ 50%",
     c_precision("int8_dynamic", 2.5, 0.40)),
    ("P2", "int8 static quantization: 3.3x faster with 35% of the memory",
     "quant int8_static vs f32: speed-up ≥ 2.84x and weight bytes ≤ 44%",
     c_precision("int8_static", 3.3, 0.35)),
    ("P3", "fp16 runs 2x faster with half the memory",
     "quant f16 vs f32: speed-up ≥ 1.8x and weight bytes ≤ 62.5% (bf16 shown beside it, "
     "not judged)",
     c_precision("f16", 2.0, 0.5, also="bf16")),
    ("M1", "freed device memory stays reserved and is reused by the next fitting "
     "allocation", "reuse_experiment reserved_bytes, torch rows when present: flat "
     "(± half a tensor) at steps 3, 4, 6, 7", c_m("M1")),
    ("M2", "re-assigning a large tensor needs twice its memory at the peak; moving it "
     "first avoids that", "reserved grows by one tensor at step 5, not at step 4",
     c_m("M2")),
    ("M3", "host memory is returned at once when a tensor dies",
     "host_reserved_bytes (else host_allocated_bytes) grows at step 3, not at step 8",
     c_m("M3")),
    ("M4", "empty_cache() returns the reserved memory that no tensor uses",
     "step 9 (del e; empty_cache): reserved ≤ allocated + half a tensor", c_m("M4")),
    ("M5", "plain host allocation is faster for small sizes; the framework's wins as "
     "sizes grow", "alloc_free cpu system ÷ caching time by size, torch rows when "
     "present: < 1 at the smallest, > 1 at the largest", c_m5),
    ("H1", "pinned host memory makes host-to-device copies faster than pageable",
     "transfer h2d pinned ÷ pageable bandwidth, torch rows when present; holds at "
     "≥ 1.05x", c_h1),
    ("V1", "a transpose shares storage with its source", "raw/semantics.json V1",
     c_v("V1")),
    ("V2", "a slice shares storage; an in-place op on it changes the source",
     "raw/semantics.json V2", c_v("V2")),
    ("V3", "clone() and contiguous() of a non-contiguous tensor own new storage",
     "raw/semantics.json V3", c_v("V3")),
    ("V4", "broadcasting sizes 3 and 2 is an error", "raw/semantics.json V4", c_v("V4")),
]


def verdict_kind(v):
    """holds, holds in part, does not hold, not measured."""
    if v in (NM, "does not hold"):
        return v
    if v == "holds" or v.startswith(("holds:", "holds as PyTorch defines it")):
        return "holds"
    return "holds in part"


# ---------------------------------------------------------------- summary

SUMMARY_FAMILIES = ("elementwise", "copy", "reduce", "matmul", "conv")


def _machine_line(rs):
    words = [rs.sb("sb_cpu_model", "unknown CPU")]
    fam, mod = rs.sb("sb_cpu_family"), rs.sb("sb_cpu_model_number")
    if fam and mod:
        arch = rs.sb("sb_cpu_arch")
        words[0] += f" (family {fam}, model {mod}{': ' + arch if arch and arch != 'other' else ''})"
    words.append(f"{rs.sb('sb_cores', '?')} cores")
    caches = dict(part.split(":") for part in rs.sb("sb_caches").split(",") if ":" in part)
    if caches:
        words.append(", ".join(f"{k} {fmt_bytes(int(v))}" for k, v in caches.items()))
    if rs.sb("sb_simd"):
        words.append(rs.sb("sb_simd"))
    if rs.sb("sb_gpu_name"):
        words.append(f"GPU {rs.sb('sb_gpu_name')}")
    run = [f"{rs.sb('sb_matrix', '?')} matrix"]
    if rs.sb("sb_git_revision"):
        run.append(f"git {rs.sb('sb_git_revision')[:12]}")
    if rs.sb("sb_date"):
        run.append(rs.sb("sb_date")[:10])
    return "; ".join(words) + ". Measured: " + ", ".join(run) + "."


def _ceiling_rows(rs, dev):
    """Per thread count: the memory ceilings per regime (the fastest copy-kind and the
    read baseline) and the compute peaks."""
    base = rs.select("baseline", device=dev)
    rows = []
    for th in sorted({b.get("threads") for b in base if b.get("threads")}, key=int):
        mine = [b for b in base if b.get("threads") == th]
        cells = []
        for ops in (("copy", "copy_nt", "d2d_copy"), ("read",)):
            vals = []
            for regime in ("L1", "L2", "LLC", "DRAM"):
                c = [b for b in mine if b["op"] in ops and b.regime == regime and b.gbps()]
                vals.append(f"{max(b.gbps() for b in c):.0f}" if c else "—")
            cells.append(" / ".join(vals))
        for dtype in ("f32", "i8"):
            c = [b for b in mine if b["op"] in ("fma_peak", "gemm_peak") and b.get("dtype", "f32") == dtype
                 and b.gflops()]
            cells.append(sb.fmt_rate(max(b.gflops() for b in c), "GFLOP/s") if c else "—")
        rows.append([dev, th] + cells)
    return rows


def costliest_layout(rs, fam, dev):
    """(the layout row of ours furthest below its contiguous twin, the twin, time ratio) or None."""
    best = None
    for r, b in sb.layout_cases(rs, fam, device=dev):
        if not sb.preferred_style(rs, r):
            continue
        te = rs.time_ratio(b, r)
        if te and (best is None or te > best[2]):
            best = (r, b, te)
    return best


NOISY = 0.10  # a first-pass spread above ±10% is marked where the Summary quotes it


def noise_mark(rs, a, b):
    """'' when the ratio b ÷ a the Summary quotes can be read as it is: re-checked and
    settled, or both rows within ±10%; else what makes it noisy."""
    c = rs.rechecked(a, b) or rs.rechecked(b, a)
    if c:
        return " (noisy: re-check unsettled)" if c.get("settled") in UNSETTLED else ""
    s = max(x.spread or 0 for x in (a, b))
    return f" (noisy: ±{100 * s:.0f}%, not re-checked)" if s > NOISY else ""


def _costliest_layout(rs, fam, dev):
    best = costliest_layout(rs, fam, dev)
    if best is None:
        return "—", "—", "—"
    r, b, te = best
    return (sb.describe(r, ("op", "layout", "shape")) + _thr(r), f"{1 / te:.2f}x" + noise_mark(rs, b, r),
            sb.pct_ceiling(rs, r))


def costliest_style(rs, fam, dev):
    """(the style row of ours furthest above the fastest style of its case, that fastest
    row, time ratio) or None."""
    best = None
    runs = rs.select(fam, impl="ours", device=dev, style=STYLES, layout=(None, "contiguous"))
    for group in sb.group_by(runs, "style").values():
        if len(group) < 2:
            continue
        fastest = min(group, key=lambda r: r.median)
        for r in group:
            x = rs.time_ratio(fastest, r) if r is not fastest else 1.0
            if best is None or x > best[2]:
                best = (r, fastest, x)
    return best


def _costliest_style(rs, fam, dev):
    best = costliest_style(rs, fam, dev)
    if best is None:
        return "—", "—"
    r, f, x = best
    return (sb.describe(r, ("op", "style", "shape")) + _thr(r),
            f"{x:.2f}x the {f['style']} time" + noise_mark(rs, f, r))


def _thr(r):
    return f", {r['threads']} thr" if r.get("threads") else ""


def _peer_line(rs):
    """Per device and peer: on how many cases the peer is 5% or more ahead of ours, and
    where most. Only re-checked ratios are quoted (Note [Re-check stops on noise] in
    recheck.py picks every row where a peer was ahead); without a re-check file the
    first pass is quoted and says so."""
    lines = []
    for dev in sb.devices(rs.all()):
        for impl in ("torch", "numpy", "openblas"):
            pairs = []  # (peer run, ratio, its re-check case or None)
            for r in rs.select(device=dev, impl=impl, op=lambda v: v not in ("reuse_experiment", "overhead")):
                o = rs.like(r, impl="ours")
                if o:
                    c = rs.rechecked(o, r)
                    pairs.append((r, c["ratio"]["median"] if c else r.median / o.median, c))
            if not pairs:
                continue
            ahead = [p for p in pairs if p[1] < 1 / 1.05]
            checked = [p for p in ahead if p[2]]
            unchecked = [p for p in ahead if not p[2]]
            if rs.recheck is None:
                if not ahead:
                    lines.append(f"{impl} on `{dev}`: no faster than ours on any of {len(pairs)} cases "
                                 "(by 5% or more; first pass, no re-check run).")
                    continue
                r, x, _ = min(ahead, key=lambda p: p[1])
                lines.append(f"{impl} on `{dev}`: faster than ours on {len(ahead)} of {len(pairs)} cases "
                             f"(by 5% or more; first pass, no re-check run); most on "
                             f"{sb.describe(r, ('op', 'layout', 'style', 'shape', 'threads'))}: {x:.2f}x our time"
                             f"{noise_mark(rs, rs.like(r, impl='ours'), r)}.")
                continue
            if not checked:
                text = (f"{impl} on `{dev}`: no faster than ours on any of {len(pairs)} cases "
                        "(by 5% or more, re-checked alternating)")
            else:
                r, x, c = min(checked, key=lambda p: p[1])
                noisy = [p for p in checked if p[2].get("settled") in UNSETTLED]
                text = (f"{impl} on `{dev}`: faster than ours on {len(checked)} of {len(pairs)} cases "
                        f"(by 5% or more, re-checked alternating{f'; {len(noisy)} of them noisy' if noisy else ''}); "
                        f"most on {sb.describe(r, ('op', 'layout', 'style', 'shape', 'threads'))}: "
                        f"{fmt_recheck(c).replace('x [', 'x our time [', 1)}")
            if unchecked:
                text += (f"; {len(unchecked)} more looked ahead in the first pass but were not re-checked "
                         "(not counted)")
            lines.append(text + ".")
    return lines


def headline_runs(rs):
    """The rows the Summary stands on, in its order: per device and family the costliest
    layout and its contiguous twin, the costliest style and the fastest one; then the
    baseline ceilings (copy and read in DRAM, the f32 peak) per thread count."""
    out = []
    for dev in sb.devices(rs.all()):
        for fam in SUMMARY_FAMILIES:
            for pick in (costliest_layout(rs, fam, dev), costliest_style(rs, fam, dev)):
                if pick:
                    out += [pick[1], pick[0]]
        base = rs.select("baseline", device=dev)
        for op in ("copy", "read", "fma_peak", "gemm_peak", "d2d_copy"):
            rows = [b for b in base if b["op"] == op and (op.endswith("peak") or b.regime == "DRAM")
                    and b.get("dtype", "f32") == "f32"]
            for th in sorted({b.get("threads") for b in rows}, key=lambda t: int(t or 0)):
                mine = [b for b in rows if b.get("threads") == th]
                out.append(max(mine, key=lambda b: sb.shape_numel(b.get("shape") or "1")))
    seen, uniq = set(), []
    for r in out:
        if r.name not in seen:
            seen.add(r.name)
            uniq.append(r)
    return uniq


def summary(rs):
    """The answer on one screen: the machine and its ceilings, per family the costliest
    layout and style, the claims' verdicts, what a peer does better."""
    out = ["## Summary", "", _machine_line(rs), ""]
    devs = sb.devices(rs.all())
    crow = [row for dev in devs for row in _ceiling_rows(rs, dev)]
    if crow:
        out += ["Ceilings measured in this run, which every % ceiling divides by (copy and read "
                "per regime L1 / L2 / LLC / DRAM, GB/s):", ""] + md_table(
            ["device", "threads", "copy GB/s", "read GB/s", "f32 peak", "int8 peak"], crow) + [""]
    frows = []
    for dev in devs:
        for fam in SUMMARY_FAMILIES:
            lay, rate_, pct = _costliest_layout(rs, fam, dev)
            sty, sx = _costliest_style(rs, fam, dev)
            if lay == "—" and sty == "—":
                continue
            frows.append([fam if len(devs) == 1 else f"{fam} ({dev})", lay, rate_, pct, sty, sx])
    if frows:
        out += ["What a layout or a style costs here, per family (the costliest case of ours; "
                "details in Memory layout and In-place vs out-of-place):", ""] + md_table(
            ["family", "costliest layout", "rate vs contiguous", "% ceiling", "costliest style",
             "time"], frows) + [""]
    out += ["Claims (rules and figures in [Claims](#claims)):", ""]
    for cid, text, _, fn in CLAIMS:
        _, v = fn(rs)
        out.append(f"- **{cid}** {text}: {v}.")
    peers = _peer_line(rs)
    if peers:
        out += ["", "Peers ([Peers](#peers)): " + " ".join(peers)]
    return out + [""]


def claims_section(rs):
    rows, tally = [], {}
    for cid, text, rule, fn in CLAIMS:
        fig, v = fn(rs)
        rows.append([cid, text, rule, fig, v])
        key = verdict_kind(v)
        tally[key] = tally.get(key, 0) + 1
    reading = ", ".join(f"{k}: {n}" for k, n in sorted(tally.items(), key=lambda t: -t[1]))
    return ["## Claims", "", f"Reading: {reading}.", "",
            "A claimed k-fold effect holds when the measured ratio reaches 1 + 0.8 (k − 1); "
            "figures are ratios of medians, and for the layout claims (L1–L5) a pair that "
            "`scripts/recheck` measured again with the two rows alternating counts with its "
            "interleaved median (section Interleaved re-check).", ""] + md_table(
        ["ID", "claim", "rule (rows that decide it)", "this machine", "verdict"], rows)


# ---------------------------------------------------------------- document

MACHINE_KEYS = ("sb_cpu_model", "sb_cpu_family", "sb_cpu_model_number", "sb_cores", "sb_threads", "sb_simd", "sb_cpu_hugepages", "sb_cpu_allocator",
                "sb_caches", "sb_cpu_arch", "sb_tuning", "sb_tuning_basis", "sb_fma512",
                "sb_compiler", "sb_flags", "sb_openmp", "sb_gpu_name", "sb_gpu_memory",
                "sb_gpu_sms", "sb_cuda_driver", "sb_cuda_runtime", "sb_torch_version",
                "sb_numpy_version", "sb_openblas_core", "sb_git_revision", "sb_date",
                "sb_matrix")


def render(rs):
    slug = rs.sb("sb_machine", "unknown machine")
    out = [f"# stridebench results: `{slug}`", "",
           "Generated by `scripts/tables` from `raw/*.json`; do not edit by hand.", ""]
    out += summary(rs)
    out += ["## Machine and method", ""]
    out += md_table(["machine", ""], [[k[3:], rs.sb(k)] for k in MACHINE_KEYS if rs.sb(k)])
    out += ["",
            "Times are medians over the repetitions of each run (real time of Google "
            "Benchmark's `iteration` entries). **±x%** is the spread: half the range, "
            "(max − min) / 2, as a percentage of the median (±n/a: one sample; ±?: "
            "only the median aggregate was written). "
            "**% ceiling** is the row's GB/s or GFLOP/s as a percentage of this machine's "
            "baseline row with the same device, threads and regime (docs/BENCHMARKS.md, "
            "Ceilings). Ratios are ratios of medians.", ""]
    checks = sb.run_checks(rs)
    out += ["Run checks (baseline rows that contradict each other, compute rows that did not "
            "speed up with threads, or memory-bound rows faster than the memory, mean the machine "
            "was busy, or its other tenants' load changed, while they ran): " +
            ("none failed." if not checks else ""), ""]
    out += [f"- {c}" for c in checks] + ([""] if checks else [])
    if rs.skipped:
        out += ["Runs that reported an error and are left out: " +
                "; ".join(f"`{s}`" for s in rs.skipped), ""]
    for title, missing, fn in TABLES:
        out += [f"## {title}", ""]
        found = [(d, res) for d in sb.devices(rs.all()) for res in [fn(rs, d)] if res]
        if not found:
            out += [f"{NM.capitalize()}: {missing}.", ""]
        for dev, (reading, lines) in found:
            out += [f"### {title} on `{dev}`", "", f"Reading: {reading}.", ""] + lines + [""]
    out += claims_section(rs) + ["", "## Peers", ""]
    found = [(d, res) for d in sb.devices(rs.all()) for res in [t_peers(rs, d)] if res]
    if not found:
        out += [f"{NM.capitalize()}: no rows with an `impl` other than ours.", ""]
    for dev, (reading, lines) in found:
        out += [f"### Peers on `{dev}`", "", f"Reading: {reading}.", ""] + lines + [""]
    out += recheck_section(rs)
    return "\n".join(out).rstrip() + "\n"


def main(argv):
    if argv in (["-h"], ["--help"]):
        print("usage: scripts/tables RESULTS_DIR\n\nWrites RESULTS_DIR/TABLES.md from RESULTS_DIR/raw/*.json "
              "(docs/BENCHMARKS.md says what each table reads).")
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: scripts/tables RESULTS_DIR", file=sys.stderr)
        return 2
    try:
        if os.path.isfile(argv[0]):
            raise sb.InputError(argv[0], "expected a results folder (with raw/*.json)")
        rs = sb.load_results(argv[0])
        text = render(rs)
        out = os.path.join(argv[0], "TABLES.md")
        sb.atomic_write(out, text)
    except sb.InputError as e:
        print(f"tables: error: {e}", file=sys.stderr)
        return 2
    print(f"tables: wrote {out} ({len(rs.runs)} runs from {len(rs.contexts)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
