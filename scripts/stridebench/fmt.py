# fmt: how the tools write numbers, times, sizes, rates, tables and run labels
# (Markdown). Standard library only.
from .names import canonical
from .names import order_key as _order

def fmt_num(v):
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def fmt_time(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{fmt_num(ns / scale)} {unit}"
    return f"{fmt_num(ns)} ns"


def fmt_spread(run):
    if run.from_aggregate:
        return "±?"
    s = "±n/a" if run.spread is None else f"±{100 * run.spread:.0f}%"
    # a GPU row that ran out of time before its noise was measured, or whose every
    # sample was throttled (Note [GPU rows stop on their noise])
    return s + " (unsteady)" if run.counters.get("steady") == 0 else s


def fmt_tm(run):
    """Median time with its spread, or 'not measured'."""
    return f"{fmt_time(run.median)} {fmt_spread(run)}" if run else "not measured"


def fmt_bytes(b):
    if b is None:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= scale:
            return f"{fmt_num(b / scale)} {unit}"
    return f"{b:.0f} B"


def fmt_x(r):
    return "—" if r is None else f"{fmt_num(r)}x"


def fmt_rate(v, unit):
    return "—" if v is None else f"{fmt_num(v)} {unit}"


def md_table(header, rows):
    esc = lambda c: str(c).replace("|", "\\|")
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return out


def group_by(runs, *drop):
    """{canonical name without the `drop` keys: [runs]} in the runs' order."""
    groups = {}
    for r in runs:
        keys = {k: v for k, v in r.keys.items() if k not in drop}
        groups.setdefault(canonical(r.family, keys), []).append(r)
    return groups


def devices(runs):
    return sorted({r["device"] for r in runs}, key=lambda d: _order("device", d))


def describe(run, keys=("layout", "op", "dtype", "shape")):
    """'transposed add f32 4096x4096' from the given keys."""
    word = {"threads": lambda v: f"{v} thread" + ("" if v == "1" else "s"), "size": lambda v: fmt_bytes(int(v)),
            "op": lambda v: "contiguous()" if v == "contiguous" else v}
    return " ".join(word.get(k, lambda v: f"{k}:{v}" if k in ("dim", "step", "alloc")
                             else v)(run.keys[k]) for k in keys if k in run.keys)


def varying_labels(runs, keys, fallback=("layout", "op", "dtype", "shape")):
    """Labels for runs built from only those keys whose values differ among them."""
    vary = [k for k in keys if len({r.keys.get(k) for r in runs}) > 1] or fallback
    return [describe(r, vary) for r in runs]
