# summary: the answer on one screen: the machine and its ceilings, per family the
# costliest layout and style, the claims' verdicts, what a peer does better.
# summary_data() computes it (the rows it stands on, the ratios, the noise marks) and
# render_summary() writes it; headline_runs() names the rows, for compare. Standard
# library only.
from . import claims as cl
from . import results as sb
from .common import AHEAD, PEAK_GOAL, STYLES, UNSETTLED, fmt_peak, fmt_recheck, noise_mark, peak_counts, peak_rows
from .results import fmt_bytes, md_table

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
    read baseline) and the compute peaks (float32, bfloat16, int8)."""
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
        for dtype in ("f32", "bf16", "i8"):
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
            ahead = [p for p in pairs if p[1] < 1 / AHEAD]
            # with a re-check file only its ratios are quoted; without one, the first pass
            quoted = ahead if rs.recheck is None else [p for p in ahead if p[2]]
            how = "first pass, no re-check run" if rs.recheck is None else "re-checked alternating"
            noisy = [p for p in quoted if p[2] and p[2].get("settled") in UNSETTLED]
            if noisy:
                how += f"; {len(noisy)} of them noisy"
            head = f"{impl} on `{dev}`: "
            if not quoted:
                text = head + f"no faster than ours on any of {len(pairs)} cases (by 5% or more, {how})"
            else:
                r, x, c = min(quoted, key=lambda p: p[1])
                ratio = (fmt_recheck(c).replace("x [", "x our time [", 1) if c
                         else f"{x:.2f}x our time{noise_mark(rs, rs.like(r, impl='ours'), r)}")
                text = head + (f"faster than ours on {len(quoted)} of {len(pairs)} cases (by 5% or more, {how}); "
                               f"most on {sb.describe(r, ('op', 'layout', 'style', 'shape', 'threads'))}: {ratio}")
            unchecked = len(ahead) - len(quoted)
            if unchecked:
                text += f"; {unchecked} more looked ahead in the first pass but were not re-checked (not counted)"
            lines.append(text + ".")
    return lines


def _compute_line(rs):
    """Per device: what the out= matmul and conv2d rows of ours read as a % of their
    compute peak, by the re-checked rounds where raw/recheck.json alternated them with
    it (pick: peak), else by the first pass, which it says."""
    lines = []
    for dev in sb.devices(rs.all()):
        got = peak_rows(rs, dev)
        if not got:
            continue
        checked = [t for t in got if t[1]]  # the median and the counts over the re-checked rows only
        med, lo, below = peak_counts(checked or got)
        if checked:
            head = (f"`{dev}`: {len(got)} out= matmul and conv2d rows of ours, {len(checked)} of them alternated "
                    f"with their compute peak, read a median {med:.0f}% of the same round's peak")
            low = fmt_peak(*lo[:2])
        else:
            head = (f"`{dev}`: {len(got)} out= matmul and conv2d rows of ours read a median {med:.0f}% of their "
                    "compute peak in the first pass (not re-checked)")
            low = f"{lo[0]['median']:.0f}%"
        lines.append(f"{head}; lowest: {sb.describe(lo[2], ('op', 'layout', 'dtype', 'shape', 'threads'))}, {low}; "
                     f"{below} below {PEAK_GOAL}%.")
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


def summary_data(rs, verdicts=None):
    """What the Summary says, as data: {"machine": line, "ceilings": rows, "families":
    rows, "claims": [(id, text, verdict)], "peers": lines}. verdicts: the claims'
    (id, text, rule, figure, verdict) rows when the caller has evaluated them already."""
    devs = sb.devices(rs.all())
    families = []
    for dev in devs:
        for fam in SUMMARY_FAMILIES:
            lay, rate_, pct = _costliest_layout(rs, fam, dev)
            sty, sx = _costliest_style(rs, fam, dev)
            if lay == "—" and sty == "—":
                continue
            families.append([fam if len(devs) == 1 else f"{fam} ({dev})", lay, rate_, pct, sty, sx])
    verdicts = cl.evaluate(rs) if verdicts is None else verdicts
    return {"machine": _machine_line(rs),
            "ceilings": [row for dev in devs for row in _ceiling_rows(rs, dev)],
            "families": families,
            "claims": [(cid, text, v) for cid, text, _, _, v in verdicts],
            "peers": _peer_line(rs),
            "compute": _compute_line(rs)}


def render_summary(d):
    """summary_data's dict -> the Summary's Markdown lines."""
    out = ["## Summary", "", d["machine"], ""]
    if d["ceilings"]:
        out += ["Ceilings measured in this run, which every % ceiling divides by (copy and read "
                "per regime L1 / L2 / LLC / DRAM, GB/s):", ""] + md_table(
            ["device", "threads", "copy GB/s", "read GB/s", "f32 peak", "bf16 peak", "int8 peak"], d["ceilings"]) + [""]
    if d["families"]:
        out += ["What a layout or a style costs here, per family (the costliest case of ours; "
                "details in Memory layout and In-place vs out-of-place):", ""] + md_table(
            ["family", "costliest layout", "rate vs contiguous", "% ceiling", "costliest style",
             "time"], d["families"]) + [""]
    if d.get("compute"):
        out += ["GEMM and conv against the compute peak ([Roofline](#roofline)): " + " ".join(d["compute"]), ""]
    out += ["Claims (rules and figures in [Claims](#claims)):", ""]
    out += [f"- **{cid}** {text}: {v}." for cid, text, v in d["claims"]]
    if d["peers"]:
        out += ["", "Peers ([Peers](#peers)): " + " ".join(d["peers"])]
    return out + [""]


def summary(rs, verdicts=None):
    """The answer on one screen: the machine and its ceilings, per family the costliest
    layout and style, the claims' verdicts, what a peer does better."""
    return render_summary(summary_data(rs, verdicts))
