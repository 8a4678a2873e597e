# checks: the run checks at the top of TABLES.md: baseline rows that contradict each
# other, kernel rows faster than the memory or the compute allows, rows measured under
# contention. Standard library only.
from .results import COMPUTE_OPS, ceiling, ceiling_kind, pick_ceiling

def last_level_cache_bytes(rs):
    """The largest cache level of sb_caches ('L1d:32768,L2:1048576,L3:33554432'), or None."""
    sizes = []
    for part in str(rs.sb("sb_caches", "")).split(","):
        name, _, v = part.partition(":")
        if name.strip().startswith("L") and v.strip().isdigit():
            sizes.append(int(v))
    return max(sizes) if sizes else None


def _first_four(items):
    """A run check's list of offending rows: the first four, '; ...' when there are more."""
    return "; ".join(items[:4]) + ("; ..." if len(items) > 4 else "")


def _flag(out, dev, found, worst_first, fmt, head, tail):
    """One run check naming the rows of `found` ((value, run) pairs), worst first:
    "`dev`: N <head> (rows): <tail>"; nothing when none were found."""
    if not found:
        return
    found.sort(key=lambda x: -x[0] if worst_first == "high" else x[0])
    names = _first_four([f"`{r.name}` {fmt(x)}" for x, r in found])
    out.append(f"`{dev}`: {len(found)} {head} ({names}): {tail}")


def faster_than_memory(rs, dev):
    """(% ceiling, run) of our memory-bound rows on `dev` that move at least 8x the
    last-level cache (no cache can carry them) above 130% of their DRAM ceiling: the row
    and the baseline saw different memory bandwidth (other tenants)."""
    llc = last_level_cache_bytes(rs) if dev == "cpu" else None
    fast = []
    for r in rs.select(device=dev, impl="ours") if llc else []:
        kind = ceiling_kind(r)
        if not kind or kind[1] != "bytes" or r.regime != "DRAM" or (r.counters.get("bytes") or 0) < 8 * llc:
            continue
        c = ceiling(rs, r)
        if c and c[2] > 130:
            fast.append((c[2], r))
    return fast


def slower_on_more_threads(rs, dev):
    """(ratio, run) of our memory-bound rows on `dev` that took over 1.5x their 1-thread
    twin's time on N threads: with the work split by a grain that keeps each thread's
    share worth its start, N threads take at most about the 1-thread time, so a core was
    busy while the row ran (a shared VM's second vCPU, whose other tenant comes and goes)."""
    stalled = []
    for r in rs.select(device=dev, impl="ours"):
        t = int(r["threads"]) if r["threads"] else 1
        kind = ceiling_kind(r)
        if t == 1 or not kind or kind[1] != "bytes":
            continue
        one = rs.like(r, threads="1")
        if one and one.median and r.median and r.median > 1.5 * one.median:
            stalled.append((r.median / one.median, r))
    return stalled


def distrusted(rs, dev):
    """Names of our memory-bound rows on `dev` that a run check distrusts (faster than
    the memory, or slowed down by a busy core): a table that counts % ceilings leaves
    them out."""
    return {r.name for _, r in faster_than_memory(rs, dev) + slower_on_more_threads(rs, dev)}


def run_checks(rs):
    """Warnings about baseline rows that contradict each other, i.e. the machine was
    busy with other work while they ran: an N-thread FLOP peak below 0.75·N times the
    1-thread one (another tenant shared the cores), or a last-level-cache ceiling 10% below
    the DRAM one for the same op and threads (the shared cache was contended); then
    kernel rows that contradict the baseline: our compute rows that did not speed up
    with threads or read above 105% of the FLOP peak, our memory-bound rows that took
    over 1.5x their 1-thread time on N threads, and our memory-bound rows far beyond the
    caches above 130% of their DRAM ceiling. The % ceiling of rows that use such a baseline reads high."""
    out = []
    for dev in sorted({b["device"] for b in rs.select("baseline")}):
        peaks = {}
        for b in rs.select("baseline", op="fma_peak", device=dev):
            if b["dtype"] in (None, "f32") and b["threads"] and b.gflops():
                peaks[int(b["threads"])] = b.gflops()
        for t in sorted(peaks):
            if t > 1 and 1 in peaks and peaks[t] < 0.75 * t * peaks[1]:
                out.append(f"`{dev}`: the {t}-thread FLOP peak is only {peaks[t] / peaks[1]:.2f}x the "
                           f"1-thread one ({peaks[t]:.0f} vs {peaks[1]:.0f} GFLOP/s): other work shared "
                           f"the cores during the baseline; {t}-thread compute % ceilings read high")
        rows = {}  # per regime, pick_ceiling without a row: the fastest LLC row, the largest DRAM one
        for b in rs.select("baseline", device=dev):
            if b.regime in ("LLC", "DRAM") and b.gbps():
                rows.setdefault((b["op"], b["threads"], b.regime), []).append(b)
        by = {}
        for (op, t, regime), cands in rows.items():
            by.setdefault((op, t), {})[regime] = pick_ceiling(cands, regime, "bytes").gbps()
        for (op, t), reg in sorted(by.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            if "LLC" in reg and "DRAM" in reg and reg["LLC"] < 0.9 * reg["DRAM"]:
                out.append(f"`{dev}`: the LLC `{op}` ceiling with {t} thread(s) ({reg['LLC']:.1f} GB/s) is "
                           f"more than 10% below the DRAM one ({reg['DRAM']:.1f} GB/s): the shared last-level cache was "
                           f"contended; LLC-regime % ceilings with that op read high")
        # our compute rows (matmul, conv2d, linear, mlp) against their 1-thread twins: a
        # 2-thread GEMM runs 1.8-1.95x a 1-thread one on an idle machine; under 0.65 N x
        # the second core was busy while the row ran (its time, and any ratio to a peer
        # measured at another moment, says more about the neighbour than about the kernel)
        slow = []
        for r in rs.select(device=dev, impl="ours", op=lambda v: v in COMPUTE_OPS):
            t = int(r["threads"]) if r["threads"] else 1
            one = rs.like(r, threads="1") if t > 1 else None
            if one and one.median and r.median and one.median / r.median < 0.65 * t:
                slow.append((one.median / r.median, r))
        _flag(out, dev, slow, "low", lambda x: f"{x:.2f}x",
              "of our compute rows ran less than 0.65 N times as fast on N threads as on one",
              "the other core was busy while they ran; read their times and peer ratios with care, "
              "or re-check them (`scripts/recheck --pair`)")
        # our memory-bound rows against their 1-thread twins
        _flag(out, dev, slower_on_more_threads(rs, dev), "high", lambda x: f"{x:.2f}x",
              "of our memory-bound rows took over 1.5x their 1-thread time on N threads",
              "a core was busy while they ran; read their times, % ceiling and peer ratios with care, "
              "or re-check them (`scripts/recheck --pair`)")
        # our compute rows against their FLOP peak: no kernel outruns the hardware, so a row
        # above 105% of it means the peak was measured low (the baseline ran while the core
        # was slower or shared: a VM's peak moves by several % between runs)
        above = []
        for r in rs.select(device=dev, impl="ours", op=lambda v: v in COMPUTE_OPS):
            c = ceiling(rs, r)
            if c and c[2] > 105:
                above.append((c[2], r))
        _flag(out, dev, above, "high", lambda p: f"{p:.0f}%",
              "of our compute rows read above 105% of the FLOP peak measured in this run",
              "the peak read low; every compute % ceiling of the run reads high")
        # memory-bound rows of ours far beyond the last-level cache (8x its size: no
        # cache can carry them) against their DRAM ceiling: above 130% the row and the
        # ceiling saw different memory bandwidth (on a shared machine other tenants' load
        # comes and goes: a 768 MiB out-of-place add on 2 threads once read 184%)
        _flag(out, dev, faster_than_memory(rs, dev), "high", lambda p: f"{p:.0f}%",
              "of our memory-bound rows moving at least 8x the last-level cache read above 130% of their "
              "DRAM ceiling",
              "the memory bandwidth changed between the baseline and those rows (other tenants); their % "
              "ceiling and ratios to rows measured at other moments are not to be trusted")
    return out
