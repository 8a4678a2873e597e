# tables: regenerates RESULTS_DIR/TABLES.md from RESULTS_DIR/raw/*.json (+ machine.json
# and the optional raw/semantics.json and raw/recheck.json). Standard library only.
#
# One function per table of docs/DESIGN.md, in its order. Each gets the RunSet and a
# device and returns (one-line reading computed from the data, Markdown lines), or None
# when that device has no rows for it; a table with no rows on any device says "not
# measured". The claims (claims.py) and the Summary (summary.py) each compute their data
# first and render it second; render() puts the document together. Nothing is invented:
# a cell or claim without rows says "not measured".
#
# Usage: scripts/tables RESULTS_DIR        (exit 2 with one message on bad input)
import math
import os
import statistics
import sys

from . import claims as cl
from . import results as sb
from . import summary as sm
from .common import (NM, NOISY, PEAK_GOAL, PRECISIONS, REUSE_STEPS, STYLES, YARDSTICK, bandwidth, count,
                     first_pass_noise, fmt_peak, fmt_recheck, noise_mark, peak_counts, peak_rows, precision_pairs,
                     precision_points, shape_of, span)
from .results import fmt_bytes, fmt_time, fmt_tm, fmt_x, md_table

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
            worst[r["op"]] = (r, te, t if c else None, noise_mark(rs, b, r))
    if not rows:
        return None
    reading = "slowest layout per op: " + ", ".join(
        f"{sb.describe(r, ('layout', 'op'))} runs at {1 / te:.2f}x the contiguous rate "
        f"({te:.2f}x its time" + (f" interleaved; first pass {t:.2f}x" if t else "") + ")" + mark
        for r, te, t, mark in worst.values()) if worst else "no contiguous counterpart measured"
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
    """The quant family's layers and the conv family's conv2d rows (every layer, layout
    and style measured in more than one dtype), each dtype against the group's f32."""
    rows, per = [], {}
    runs = rs.select("quant", device=dev) + rs.select("conv", device=dev, op="conv2d")
    for group in sb.group_by(runs, "dtype").values():
        if len(group) < 2:
            continue  # one dtype alone compares nothing
        by = {r["dtype"]: r for r in group}
        f32 = by.get("f32")
        g = group[0]
        # the quant layers show every precision (not measured ones too); a conv layer
        # the dtypes it was measured in
        dts = PRECISIONS + tuple(d for d in by if d not in PRECISIONS) if g.family == "quant" else \
            tuple(sorted(by, key=lambda d: sb._order("dtype", d)))
        for d in dts:
            r = by.get(d)
            sp = f32.median / r.median if r and f32 else None
            w, w32 = (x.counters.get("weight_bytes") if x else None for x in (r, f32))
            wf = w / w32 if w is not None and w32 else None
            err = r.counters.get("rel_error") if r else None
            rows.append([g["impl"], g["op"], g.get("layout", "—"), g.get("shape", "—"),
                         g.get("threads", "—"), d, fmt_tm(r), fmt_x(sp), fmt_bytes(w),
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
        ["impl", "op", "layout", "shape", "threads", "dtype", "time", "speed vs fp32",
         "weight bytes", "weights vs fp32", "rel. error", "% ceiling"], rows)


def t_precision_memory(rs, dev):
    """Our memory-bound rows (elementwise, copy, reduce) measured in float32 and in a
    16-bit dtype, each at its % of its own ceiling. A 16-bit row moves half the bytes of
    its float32 twin, so the same % is the same use of the machine; the points between
    the two are what the narrower dtype costs beyond its bytes (issue #51's yardstick:
    within 5 points). Where the re-check measured a pair alternating, its points use the
    interleaved time ratio (common.precision_points)."""
    rows, per, left_out, noisy = [], {}, {}, {}
    # a pair with a row the run checks distrust (faster than the memory, or slowed by a
    # busy core) is shown, marked, and left out of the counts: its points compare two
    # states of the machine; so is a pair the re-check did not measure whose first pass
    # spread over ±10% (common.first_pass_noise): its points are the noise's
    for f32, r, p32, p, bad in precision_pairs(rs, dev):
        d = r["dtype"]
        pts, c = precision_points(rs, f32, r, p32, p)
        noise = None if bad else first_pass_noise(rs, f32, r)
        mark = " (run check)" if bad else f" (noisy: ±{100 * noise:.0f}%, not re-checked)" if noise else ""
        rows.append([r["op"], r.get("layout", "—"), r.get("style", "—"), shape_of(r),
                     r.get("threads", "—"), r.regime or "—", fmt_tm(f32), f"{p32:.0f}%", d,
                     fmt_tm(r), f"{p:.0f}%", f"{pts:+.0f}" + mark,
                     fmt_x(r.median / f32.median), fmt_recheck(c) if c else "—"])
        if bad:
            left_out[d] = left_out.get(d, 0) + 1
        elif noise:
            noisy[d] = noisy.get(d, 0) + 1
        else:
            per.setdefault(d, []).append((pts, r, p32, c))
    if not rows:
        return None
    keys = ("layout", "op", "style", "shape", "dim", "threads")
    parts = []
    for d in dict.fromkeys(list(per) + list(left_out) + list(noisy)):
        v = per.get(d, [])
        near = sum(abs(x[0]) <= YARDSTICK for x in v)
        ahead = sum(x[0] > YARDSTICK for x in v)
        part = (f"{d}: {near} of {len(v)} rows within {YARDSTICK} points of float32's % of ceiling "
                f"and {ahead} ahead by more")
        checked = sum(x[3] is not None for x in v)
        if checked:
            part += f" ({checked} of them by their interleaved time ratio)"
        if v:
            pts, r, p32, c = min(v, key=lambda x: x[0])
            part += (f"; furthest behind: {sb.describe(r, keys)}, {p32 + pts:.0f}% against {p32:.0f}%"
                     + (f" ({fmt_recheck(c)} float32's time interleaved)" if c else ""))
        if left_out.get(d):
            part += (f"; {left_out[d]} more marked (run check) and not counted: the run checks "
                     "distrust one of the pair")
        if noisy.get(d):
            part += (f"; {noisy[d]} more marked noisy and not counted: a row's first pass spread over "
                     f"±{100 * NOISY:.0f}% and the re-check did not measure the pair")
        parts.append(part)
    return "; ".join(parts), md_table(
        ["op", "layout", "style", "shape", "threads", "regime", "f32 time", "f32 % ceiling", "dtype",
         "time", "% ceiling", "points vs f32", "time vs f32", "interleaved time vs f32"], rows)


def t_channels_last(rs, dev):
    runs = rs.select("conv", device=dev, impl="ours", layout=("contiguous", "channels_last"),
                     op=lambda v: v != "matmul")  # the conv family's GEMM reference row
    runs += [r for r in rs.select("elementwise", device=dev, impl="ours",
                                  layout="channels_last")]
    rows, speed, even, speed_by = [], [], [], {}
    for group in sb.group_by([r for r in runs if sb.preferred_style(rs, r)],
                             "layout").values():
        g = group[0]
        nchw, nhwc = (rs.like(g, layout=l) for l in ("contiguous", "channels_last"))
        convs = rs.select("copy", op="nchw_to_nhwc", device=dev, dtype=g["dtype"],
                          shape="x".join(g["shape"].split("x")[:4]))  # the input's; the same threads when measured
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
            if g["op"] == "conv2d":
                speed_by.setdefault(g.get("dtype", "—"), []).append(sp)
        rows.append([g["op"], g.get("dtype", "—"), g.get("shape", "—"),
                     g.get("threads", "—"), g.get("style", "—"), fmt_tm(nchw),
                     fmt_tm(nhwc), fmt_x(sp), fmt_tm(conv), be,
                     sb.pct_ceiling(rs, nhwc) if nhwc else "—",
                     " / ".join((r.engine or "—") if r else "—" for r in (nchw, nhwc))])
    if not rows:
        return None
    head = ["op", "dtype", "shape", "threads", "style", "NCHW", "NHWC", "NHWC speed-up",
            "NCHW→NHWC conversion", "calls to break even", "% ceiling (NHWC)",
            "engine (NCHW / NHWC)"]
    if all(r[-1] == "— / —" for r in rows):  # no library engine named: the column says nothing
        head, rows = head[:-1], [r[:-1] for r in rows]
    reading = "no NCHW/NHWC pair measured"
    if len(speed_by) > 1:  # a GPU's precisions: the answer depends on them
        reading = "NHWC runs at " + ", ".join(f"{span(v)} the NCHW speed in {d}"
                                              for d, v in sorted(speed_by.items(),
                                                                 key=lambda t: sb._order("dtype", t[0])))
    elif speed:
        reading = f"NHWC runs at {span(speed)} the NCHW speed"
    if even:
        n = span(even, str)
        reading += f"; the conversion pays for itself after {n} call{'s' * (n != '1')}"
    return reading, md_table(head, rows)


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


def t_transfer(rs, dev):
    rows, ratios, best = [], [], []
    for group in sb.group_by(rs.select("transfer", device=dev), "alloc").values():
        by = {r["alloc"]: r for r in group}
        pg, pn = by.get("pageable"), by.get("pinned")
        bw = [bandwidth(r) for r in (pg, pn)]
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
    again = {t[2].name: t for t in peak_rows(rs, dev) if t[1]}  # in peak_rows' order
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
                     f"{c[2]:.0f}%" if c else "—"] + ([fmt_peak(*again[r.name][:2])
                                                       if r.name in again else "—"] if again else []))
    if not rows and not base:
        return None
    if rows:
        lines += ["Kernel rows:", ""] + md_table(
            ["row", "regime", "time", "GB/s", "GFLOP/s", "FLOP/byte", "ceiling",
             "% ceiling"] + (["interleaved % ceiling"] if again else []), rows)
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
    if again:
        reading += "; " + peak_reading(list(again.values()))
    if missing:
        reading += f"; {missing} rows have no matching baseline row"
    return reading, lines


def peak_reading(again):
    """What the out= matmul and conv2d rows re-checked against their peak read (again:
    peak_rows' re-checked rows, lowest first)."""
    med, lo, below = peak_counts(again)
    return (f"alternating with their peak, our {len(again)} out= matmul and conv2d rows read a median "
            f"{med:.0f}% of the same round's peak, lowest {fmt_peak(*lo[:2])} "
            f"({sb.describe(lo[2], ('layout', 'op', 'dtype', 'shape', 'threads'))}); {below} below {PEAK_GOAL}%")


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
            f"the {ctx.get('ahead', 1.05):g}x line"
            + (", for a precision pair, the ratios 5 points behind and ahead of its float32 twin"
               if ctx.get("precision") else "")
            + (f", for a peak pair, the ratio at which the row reads {ctx.get('peak_goal', PEAK_GOAL)}% of its peak"
               if ctx.get("peak") else "")
            + f" (a budget of {ctx.get('budget_s') or 'no'} s: "
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
    if ctx.get("peak"):
        text += (", and per device each out= matmul and conv2d row of ours against its compute peak (pick: "
                 "peak; the Roofline table's interleaved % ceiling and the Summary's compute line)")
    if ctx.get("precision"):
        text += (", and per device each 16-bit row of ours more than 5 points of % ceiling behind its float32 "
                 "twin in the first pass, against that twin (pick: precision; the Precision of memory-bound "
                 "rows table counts their points by the interleaved ratio)")
    return text


TABLES = [
    ("Memory layout", "no `matmul`, `conv`, `elementwise`, `copy` or `reduce` rows "
     "with a non-contiguous layout", t_layout),
    ("In-place vs out-of-place", "no rows with a `style` of inplace, out, outofplace "
     "or outofplace_system", t_styles),
    ("Precision and quantization", "no `quant` rows", t_precision),
    ("Precision of memory-bound rows", "no `elementwise`, `copy` or `reduce` rows of ours in "
     "float32 and a 16-bit dtype", t_precision_memory),
    ("Channels-last", "no `conv` rows and no `layout:channels_last` rows",
     t_channels_last),
    ("Views vs copies", "no `views` rows", t_views),
    ("Allocator", "no `alloc` rows", t_allocator),
    ("Host to device", "no `transfer` rows", t_transfer),
    ("Roofline", "no kernel rows with a `bytes` or `flop` counter", t_roofline),
]


# ---------------------------------------------------------------- document

MACHINE_KEYS = ("sb_cpu_model", "sb_cpu_family", "sb_cpu_model_number", "sb_cores", "sb_threads", "sb_simd", "sb_cpu_hugepages", "sb_cpu_allocator",
                "sb_caches", "sb_cpu_arch", "sb_tuning", "sb_tuning_basis", "sb_fma512",
                "sb_compiler", "sb_flags", "sb_openmp", "sb_gpu_name", "sb_gpu_memory",
                "sb_gpu_sms", "sb_gpu_sm_clock_max_mhz", "sb_gpu_sm_clock_mhz", "sb_gpu_temp_c",
                "sb_gpu_power_w", "sb_cuda_driver", "sb_cuda_runtime", "sb_torch_version",
                "sb_numpy_version", "sb_openblas_core", "sb_openblas_env", "sb_git_revision", "sb_date",
                "sb_matrix")


def render(rs):
    slug = rs.sb("sb_machine", "unknown machine")
    out = [f"# stridebench results: `{slug}`", "",
           "Generated by `scripts/tables` from `raw/*.json`; do not edit by hand.", ""]
    verdicts = cl.evaluate(rs)  # once: the Summary and the Claims section both show them
    out += sm.summary(rs, verdicts)
    out += ["## Machine and method", ""]
    out += md_table(["machine", ""], [[k[3:], rs.sb(k)] for k in MACHINE_KEYS if rs.sb(k)])
    out += ["",
            "Times are medians over the repetitions of each run (real time of Google "
            "Benchmark's `iteration` entries). **±x%** is the spread: half the range, "
            "(max − min) / 2, as a percentage of the median (±n/a: one sample; ±?: "
            "only the median aggregate was written). A GPU row samples inside one "
            "iteration until the standard error of its mean is 0.5% and gives the median "
            "and spread of its own samples; (unsteady): it ran out of time first, or every "
            "sample was throttled. "
            "**% ceiling** is the row's GB/s or GFLOP/s as a percentage of this machine's "
            "baseline row with the same device, threads and regime (docs/BENCHMARKS.md, "
            "Ceilings). Ratios are ratios of medians.", ""]
    sampled = [r for r in rs.all() if "samples" in r.counters and "steady" in r.counters]
    if sampled:  # Note [GPU rows stop on their noise]
        clocks = [r.counters["sm_clock_mhz"] for r in sampled if "sm_clock_mhz" in r.counters]
        temps = [r.counters["temp_c"] for r in sampled if "temp_c" in r.counters]
        out += [f"GPU rows sampled to their noise: {len(sampled)}, of which "
                f"{sum(r.counters['steady'] == 0 for r in sampled)} unsteady; "
                f"{sum(int(r.counters.get('throttled', 0)) for r in sampled)} samples left out as "
                "throttled (SM clock below 90% of its maximum)"
                + (f"; SM clock after the rows {min(clocks):.0f}-{max(clocks):.0f} MHz" if clocks else "")
                + (f", temperature {min(temps):.0f}-{max(temps):.0f} °C" if temps else "") + ".", ""]
    checks = sb.run_checks(rs)
    out += ["Run checks (baseline rows that contradict each other, compute rows that did not "
            "speed up with threads, memory-bound rows slowed down by them, or memory-bound rows "
            "faster than the memory, mean the machine "
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
    out += cl.claims_section(rs, verdicts) + ["", "## Peers", ""]
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
