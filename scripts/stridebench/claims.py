# claims: the verdict on each claim of docs/CLAIMS.md from a run's rows. CLAIMS lists,
# per claim, its text, the rule (which rows decide it and the threshold) and the function
# that applies it; evaluate() computes every claim's figure and verdict (data), and
# claims_section() renders them (Markdown). Standard library only.
import re

from . import results as sb
from .common import CASE_KEYS, NM, NONCONTIG, bandwidth, noise_mark, reuse, span
from .results import fmt_bytes, fmt_x, md_table

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
    """cases: [(run, value, ok)] or [(run, value, ok, noisy)] -> (figure, verdict); labels
    name the cases by the keys that differ among them. A noisy case (a pair's ratio that
    cannot be read as it is: common.noise_mark) is marked where the figure quotes it, and
    the verdict says how many of its cases are noisy."""
    if not cases:
        return NM, NM
    labels = labels or sb.varying_labels([c[0] for c in cases], CASE_KEYS)
    noisy = [len(c) > 3 and bool(c[3]) for c in cases]
    mark = lambda k: " (noisy)" if noisy[k] else ""
    if len(cases) <= 3:
        fig = ", ".join(f"{l} {fmt(c[1])}{mark(k)}" for k, (l, c) in enumerate(zip(labels, cases)))
    else:
        vs = [c[1] for c in cases]
        i, j = vs.index(min(vs)), vs.index(max(vs))
        fig = (f"{fmt(vs[i])} ({labels[i]}){mark(i)} to {fmt(vs[j])} ({labels[j]}){mark(j)} "
               f"over {len(cases)} cases")
    v = verdict(labels, [c[2] for c in cases], [c[0] for c in cases])
    if any(noisy):
        v += f" ({sum(noisy)} of {len(cases)} cases noisy)"
    return prefix + fig, v


NOISY_NOTE = re.compile(r" \(\d+ of \d+ cases noisy\)")  # decide()'s count, not part of the verdict's kind


def pair_noisy(rs, a, b):
    """Whether the ratio b ÷ a a claim counts is noisy (common.noise_mark)."""
    return bool(noise_mark(rs, a, b))


def decide_per(cases, keys, fmt=fmt_x, prefix=""):
    """decide() for each group of cases that share `keys` (a GPU's precisions, the CPU
    beside the GPU), when there is more than one group: each figure and verdict named by
    the keys' values that differ among the groups. One verdict for all when every
    group's is the same."""
    groups = {}
    for c in cases:
        groups.setdefault(tuple(c[0].get(k) for k in keys), []).append(c)
    if len(groups) <= 1:
        return decide(cases, fmt, prefix)
    varying = [i for i in range(len(keys)) if len({g[i] for g in groups}) > 1]
    order = sorted(groups, key=lambda g: tuple(sb._order(keys[i], g[i]) for i in varying))
    # each case named by what differs inside a group (the threads of the CPU's rows and
    # the GPU's differ, but name no case)
    vary = [k for k in CASE_KEYS if k not in keys and
            any(len({c[0].keys.get(k) for c in grp}) > 1 for grp in groups.values())]
    figs, verds = [], []
    for g in order:
        name = " ".join(str(g[i]) for i in varying)
        group = groups[g]
        if vary:
            f, v = decide(group, fmt, labels=[sb.describe(c[0], vary) for c in group])
        elif len(group) == 1:
            noisy = len(group[0]) > 3 and group[0][3]
            f, v = fmt(group[0][1]) + (" (noisy)" if noisy else ""), verdict([name], [group[0][2]])
        else:
            f, v = decide(group, fmt)
        figs.append(f"{name} {f}")
        verds.append((name, v))
    if len({v for _, v in verds}) == 1:
        return prefix + "; ".join(figs), verds[0][1]
    return prefix + "; ".join(figs), "; ".join(f"{n}: {v}" for n, v in verds)


def at_least(claimed):
    """A 'k x slower/faster' claim holds when the measured ratio is at least 80% of
    the claimed effect: 1 + 0.8 (k - 1)."""
    return 1 + 0.8 * (claimed - 1)


def c_slower(family, op, claimed):
    def f(rs):
        return decide([(r, t, t >= at_least(claimed), pair_noisy(rs, b, r))
                       for r, b in sb.layout_cases(rs, family, op, NONCONTIG)
                       for t in [rs.time_ratio(b, r)]])
    return f


def c_l3(rs):
    return decide([(r, t, 1 / 1.1 <= t <= 1.1, pair_noisy(rs, b, r))
                   for r, b in sb.layout_cases(rs, "elementwise", ("add", "mul", "relu"), NONCONTIG)
                   for t in [rs.time_ratio(b, r)]])


def c_l4(rs):
    return decide([(r, t, t >= at_least(2.5), pair_noisy(rs, b, r))
                   for r, b in sb.layout_cases(rs, "copy", "contiguous", "transposed")
                   if b.counters.get("bytes", 1) > 0
                   for t in [rs.time_ratio(b, r)]])


def c_l5(rs):
    """Per device and precision where there are several (on a GPU the answer depends on
    the precision: tensor cores read NHWC)."""
    return decide_per([(r, t, t >= 1.05, pair_noisy(rs, b, r))
                       for r, b in sb.layout_cases(rs, "conv", "conv2d", "channels_last")
                       for t in [rs.time_ratio(r, b)]],
                      ("device", "dtype"), prefix="NHWC speed-up: ")


def c_l6(rs):
    cases = []
    for layout, fast, slow in (("contiguous", "inner", "outer"),
                               ("column_major", "outer", "inner")):
        for r in rs.select("reduce", impl="ours", layout=layout, dim=fast):
            s = rs.like(r, dim=slow)
            if s:
                cases.append((r, s.median / r.median, s.median / r.median >= 1.05, pair_noisy(rs, r, s)))
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
                out.append((r, r.median / i.median, 1 / 1.1 <= r.median / i.median <= 1.1, pair_noisy(rs, i, r)))
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
        cases.append((r, t, t >= 1.05 and (a is None or ao is None or a > ao), pair_noisy(rs, o, r)))
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
            steps = reuse(rs, dev, alloc=(None, "caching")).get(impl)
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
            b_pin, b_page = bandwidth(r), bandwidth(p)
            if b_pin and b_page:
                out.append((r, b_pin / b_page, b_pin / b_page >= 1.05))
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
     "add/mul/relu transposed/sliced/column_major/mixed_formats ÷ contiguous time; holds within ±10%",
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


def _single_kind(v):
    """The kind of one verdict sentence: 'holds' with or without its reasons ('holds: ...',
    'holds as PyTorch defines it: ...', M5's 'holds (caching wins from ...)'), 'does not
    hold' with or without them (M5's 'does not hold: ...'), or None for a sentence that
    splits its cases (a threshold, a key, a count) or is not one verdict."""
    if v == NM:
        return NM
    if v == "holds" or v.startswith(("holds:", "holds as PyTorch defines it", "holds (")):
        return "holds"
    if v == "does not hold" or v.startswith("does not hold:"):
        return "does not hold"
    return None


def verdict_kind(v):
    """holds, holds in part, does not hold, not measured: of one verdict, or of decide_per's
    per-group verdicts ('cpu: holds; cuda:0: does not hold'), which are of one kind only
    when every group's is."""
    v = NOISY_NOTE.sub("", v)
    kind = _single_kind(v)
    if kind is not None:
        return kind
    parts = [_single_kind(p.split(": ", 1)[-1]) for p in v.split("; ")]
    if len(parts) > 1 and None not in parts and len(set(parts)) == 1:
        return parts[0]
    return "holds in part"


def evaluate(rs):
    """[(id, text, rule, figure, verdict)] for every claim, in CLAIMS' order."""
    out = []
    for cid, text, rule, fn in CLAIMS:
        fig, v = fn(rs)
        out.append((cid, text, rule, fig, v))
    return out


def claims_section(rs, verdicts=None):
    """The Claims section's Markdown lines from evaluate()'s rows (computed here when not
    given)."""
    verdicts = evaluate(rs) if verdicts is None else verdicts
    tally = {}
    for *_, v in verdicts:
        key = verdict_kind(v)
        tally[key] = tally.get(key, 0) + 1
    reading = ", ".join(f"{k}: {n}" for k, n in sorted(tally.items(), key=lambda t: -t[1]))
    return ["## Claims", "", f"Reading: {reading}.", "",
            "A claimed k-fold effect holds when the measured ratio reaches 1 + 0.8 (k − 1); "
            "figures are ratios of medians, and for the layout claims (L1–L5) a pair that "
            "`scripts/recheck` measured again with the two rows alternating counts with its "
            "interleaved median (section Interleaved re-check). (noisy): a case whose pair the "
            "re-check never settled, or never measured with a row's first pass spread over ±10%; "
            "the verdict counts such cases.", ""] + md_table(
        ["ID", "claim", "rule (rows that decide it)", "this machine", "verdict"], [list(v) for v in verdicts])
