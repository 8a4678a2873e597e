# stridebench.results: what every tool of the package shares (tables, compare, plot,
# collect, recheck, peers). Standard library only.
#
# What it holds:
# - The run-name vocabulary of docs/BENCHMARKS.md and parse_name(), which turns
#   "family/key:value/..." into (family, {key: value}) and rejects names outside it.
# - load_gbench(): reads one Google Benchmark JSON file and validates it. Every fault
#   (missing, empty, truncated, malformed, not Google Benchmark's, a run named outside
#   the vocabulary) raises InputError, whose message names the file and the fault.
# - Run: one benchmark case. Its samples are the real times of its "iteration" entries
#   (one per repetition) in ns, or the median aggregate when only aggregates exist.
#   median, spread (half the range over the median; a GPU row of one iteration, which
#   samples inside it, carries its own as the spread_pct counter), counters (per-field
#   medians).
# - RunSet: every run of a results folder (or of some files), indexed by canonical
#   name, with select()/like() lookups, plus machine.json, raw/semantics.json and
#   raw/recheck.json (scripts/recheck).
# - The Ceilings rule: ceiling() gives a kernel row's rate as a % of the machine's own
#   baseline row (same device, threads, regime).
# - Formatting and Markdown helpers, atomic_write() (temp file in the same directory,
#   then os.replace).
import json
import math
import os
import re
import statistics
import tempfile


class InputError(Exception):
    """Bad input. The message names the file and what is wrong with it."""

    def __init__(self, path, what):
        super().__init__(f"{path}: {what}")


# ---------------------------------------------------------------- vocabulary

# the run-name vocabulary lives in names.py; re-exported here for the tools that read it
# through results
from .names import FAMILIES, KEYS, VOCAB, canonical, parse_name, shape_numel  # noqa: F401
from .names import order_key as _order

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
DTYPE_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "i8": 1, "tf32": 4}  # tf32: float32 storage
STD_FIELDS = {"name", "family_index", "per_family_instance_index", "run_name",
              "run_type", "repetitions", "repetition_index", "threads", "iterations",
              "real_time", "cpu_time", "time_unit", "aggregate_name",
              "aggregate_unit", "label", "error_occurred", "error_message"}


# ---------------------------------------------------------------- runs

class Run:
    """One benchmark case: samples (ns, one per repetition) and counter medians."""

    def __init__(self, family, keys, path):
        self.family, self.keys, self.path = family, keys, path
        self.name = canonical(family, keys)
        self.samples, self.raw_counters, self.label = [], {}, ""
        self.from_aggregate = False

    def add(self, entry, scale):
        self.samples.append(entry["real_time"] * scale)
        for k, v in entry.items():
            if k not in STD_FIELDS and isinstance(v, (int, float)) \
                    and not isinstance(v, bool):
                self.raw_counters.setdefault(k, []).append(float(v))
        self.label = entry.get("label", "") or self.label

    @property
    def engine(self):
        """The kernel library's engine the row ran (its label's engine:<tag>; cuDNN's conv
        rows), or None."""
        m = re.search(r"engine:(\S+)", self.label)
        return m.group(1) if m else None

    def finish(self):
        self.median = statistics.median(self.samples)
        lo, hi = min(self.samples), max(self.samples)
        self.spread = (hi - lo) / 2 / self.median \
            if len(self.samples) > 1 and self.median > 0 else None
        self.counters = {k: statistics.median(v) for k, v in self.raw_counters.items()}
        if len(self.samples) == 1 and "spread_pct" in self.counters:
            # a GPU row sampled inside one iteration (Note [GPU rows stop on their noise]):
            # its spread is over its own samples
            self.spread = self.counters["spread_pct"] / 100
        m = re.search(r"regime:(\w+)", self.label)
        self.regime = m.group(1) if m else None
        self.sort_key = (FAMILIES.index(self.family),) + tuple(
            _order(k, self.keys.get(k)) for k in KEYS)

    def get(self, key, default=None):
        return self.keys.get(key, default)

    def __getitem__(self, key):
        return self.keys.get(key)

    def gbps(self):
        """Achieved GB/s from the `bytes` counter (bytes per ns = GB/s)."""
        b = self.counters.get("bytes")
        if b:
            return b / self.median
        r = self.counters.get("bytes_per_second")
        return r / 1e9 if r else None

    def gflops(self):
        f = self.counters.get("flop")
        if f:
            return f / self.median
        r = self.counters.get("flops_per_second")
        return r / 1e9 if r else None

    def size_bytes(self):
        """Bytes of the allocation or transfer: size key, else shape x dtype, else
        the bytes counter."""
        if "size" in self.keys:
            return int(self.keys["size"])
        if "shape" in self.keys:
            return shape_numel(self.keys["shape"]) * DTYPE_BYTES.get(self.keys.get("dtype", "f32"), 4)
        return self.counters.get("bytes")

    def __repr__(self):
        return f"Run({self.name})"


def _read_json(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"not UTF-8 text (byte {e.start})") from None
    if not text.strip():
        raise InputError(path, "empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if e.pos >= len(text.rstrip()):
            raise InputError(path, f"truncated: the JSON ends early at byte {e.pos} "
                             "(was the benchmark killed before it finished?)") from None
        raise InputError(path, f"malformed JSON at line {e.lineno} column {e.colno}: "
                         f"{e.msg}") from None


NO_DEVICE = "no CUDA device"  # the error of every GPU run where no GPU exists


def load_gbench(path):
    """Reads one Google Benchmark JSON file -> (context, [Run], [skipped names])."""
    doc = _read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list) \
            or not isinstance(doc.get("context"), dict):
        raise InputError(path, "not Google Benchmark JSON (expected an object with a "
                         "'context' object and a 'benchmarks' list)")
    runs, aggregates, skipped = {}, {}, []
    for i, e in enumerate(doc["benchmarks"]):
        where = f"benchmarks[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise InputError(path, f"{where}: not a benchmark entry (no name)")
        where += f" ({e['name']!r})"
        if e.get("error_occurred"):
            msg = f"{e['name']}: {e.get('error_message', 'error')}"
            if msg not in skipped:  # one line per run, not per repetition
                skipped.append(msg)
            continue
        kind = e.get("run_type", "iteration")
        if kind not in ("iteration", "aggregate"):
            raise InputError(path, f"{where}: run_type {kind!r} is neither "
                             "'iteration' nor 'aggregate'")
        if kind == "aggregate" and e.get("aggregate_name") not in ("median", "mean"):
            continue  # stddev, cv: not times
        name = e.get("run_name") or e["name"]
        if kind == "aggregate" and not e.get("run_name"):
            name = name[: -len(e["aggregate_name"]) - 1]
        try:
            family, keys = parse_name(name)
        except ValueError as err:
            raise InputError(path, f"{where}: {err}") from None
        unit = e.get("time_unit")
        rt = e.get("real_time")
        if unit not in UNIT_NS:
            raise InputError(path, f"{where}: time_unit {unit!r} is not ns/us/ms/s")
        if not isinstance(rt, (int, float)) or isinstance(rt, bool) or not rt > 0:
            raise InputError(path, f"{where}: real_time missing or not a positive number")
        run = Run(family, keys, path)
        run.gbench_name = name
        if kind == "iteration":
            run = runs.setdefault(run.name, run)
            if run.gbench_name != name:
                raise InputError(path, f"{where}: {name!r} and {run.gbench_name!r} "
                                 f"both read as {run.name!r}")
            run.add(e, UNIT_NS[unit])
        else:
            aggregates.setdefault(run.name, {})[e["aggregate_name"]] = (run, e, unit)
    for name, aggs in aggregates.items():
        if name not in runs:  # only aggregates were written: the median is the sample
            run, e, unit = aggs.get("median") or aggs["mean"]
            run.add(e, UNIT_NS[unit])
            run.from_aggregate = True
            runs[name] = run
    if not runs and not skipped:
        raise InputError(path, "contains no benchmark runs")
    for r in runs.values():
        r.finish()
    return doc["context"], list(runs.values()), skipped


def load_semantics(path):
    doc = _read_json(path)
    if not isinstance(doc, dict) or not all(
            re.fullmatch(r"V\d+", k) and isinstance(v, bool) for k, v in doc.items()):
        raise InputError(path, 'expected an object like {"V1": true, "V2": false}')
    return doc


def load_recheck(path):
    """scripts/recheck's output -> its dict, checked: {"context": {...}, "cases":
    [{"a": run, "b": run, "first_pass": x, "rounds": [{"a_ns", "b_ns", "first"}],
    "ratio": {"median", "min", "max"}}]} (ratio absent when no round measured both)."""
    doc = _read_json(path)

    def bad(what):
        raise InputError(path, f"not a recheck file: {what}")
    if not isinstance(doc, dict) or not isinstance(doc.get("context"), dict) \
            or not isinstance(doc.get("cases"), list):
        bad("expected an object with a 'context' object and a 'cases' list")
    num = (int, float)
    for i, c in enumerate(doc["cases"]):
        if not isinstance(c, dict) or not all(isinstance(c.get(k), str) for k in ("a", "b")):
            bad(f"case {i} needs run names 'a' and 'b'")
        for k in ("a", "b"):
            try:
                parse_name(c[k])
            except ValueError as e:
                bad(f"case {i} {k}: {e}")
        if not isinstance(c.get("rounds"), list) or not all(
                isinstance(r, dict) and isinstance(r.get("a_ns"), num) and isinstance(r.get("b_ns"), num)
                and r["a_ns"] > 0 and r["b_ns"] > 0 for r in c["rounds"]):
            bad(f"case {i}: 'rounds' must list objects with positive 'a_ns' and 'b_ns'")
        if c["rounds"]:
            x = c.get("ratio")
            if not isinstance(x, dict) or not all(isinstance(x.get(k), num) for k in ("median", "min", "max")):
                bad(f"case {i}: measured rounds but no 'ratio' {{median, min, max}}")
    return doc


class RunSet:
    """All runs of several files, indexed by canonical name."""

    def __init__(self):
        self.runs, self.contexts, self.skipped = {}, {}, []
        self.machine, self.semantics, self.recheck = {}, None, None
        self._sorted, self._ceilings, self._rechecked = None, {}, None

    def add_file(self, path):
        return self.add(path, *load_gbench(path))

    def add(self, path, context, runs, skipped):
        for r in runs:
            if r.name in self.runs:
                raise InputError(path, f"run {r.name!r} also in {self.runs[r.name].path}")
        for r in runs:
            self.runs[r.name] = r
        self._sorted, self._ceilings = None, {}
        self.contexts[path] = context
        self.skipped += skipped
        return context

    def all(self):
        if self._sorted is None:
            self._sorted = sorted(self.runs.values(), key=lambda r: r.sort_key)
        return self._sorted

    def get(self, family, keys):
        return self.runs.get(canonical(family, keys))

    def like(self, run, **changes):
        """The run whose keys equal `run`'s but for `changes` (None drops a key)."""
        keys = dict(run.keys)
        for k, v in changes.items():
            if v is None:
                keys.pop(k, None)
            else:
                keys[k] = v
        return self.get(run.family, keys)

    def select(self, family=None, **want):
        """Runs whose family and keys match: a value, a tuple of values, None (key
        absent) or a predicate."""
        out = []
        for r in self.all():
            if family is not None and r.family not in _as_tuple(family):
                continue
            if all(_match(r.keys.get(k), w) for k, w in want.items()):
                out.append(r)
        return out

    def set_recheck(self, doc):
        """Reads re-check cases from doc ({"cases": [...]}, as raw/recheck.json), or none."""
        self.recheck, self._rechecked = doc, None

    def rechecked(self, a, b):
        """The case of raw/recheck.json that measured run b against run a in
        alternating rounds and has a ratio (b ÷ a), or None."""
        if self._rechecked is None:
            self._rechecked = {} if not self.recheck else {
                (canonical(*parse_name(c["a"])), canonical(*parse_name(c["b"]))): c
                for c in self.recheck["cases"] if c.get("ratio")}
        return self._rechecked.get((a.name, b.name))

    def time_ratio(self, a, b):
        """b's time ÷ a's: the interleaved median where raw/recheck.json re-checked the
        pair (either way round), else the ratio of the first pass's medians."""
        c = self.rechecked(a, b)
        if c:
            return c["ratio"]["median"]
        c = self.rechecked(b, a)
        if c:
            return 1 / c["ratio"]["median"]
        return b.median / a.median

    def sb(self, key, default=""):
        """An sb_* context value: machine.json first, then the raw files."""
        if self.machine.get(key):
            return self.machine[key]
        for c in self.contexts.values():
            if c.get(key):
                return c[key]
        return default


def _as_tuple(w):
    return w if isinstance(w, (tuple, list, set, frozenset)) else (w,)


def _match(value, want):
    if want is None:
        return value is None
    if callable(want):
        return want(value)
    return value in _as_tuple(want)


def load_results(path):
    """A results folder (raw/*.json, machine.json, raw/semantics.json,
    raw/recheck.json) or a single
    Google Benchmark JSON file -> RunSet."""
    rs = RunSet()
    if os.path.isfile(path):
        rs.add_file(path)
        return rs
    if not os.path.isdir(path):
        raise InputError(path, "no such results folder or JSON file")
    raw = os.path.join(path, "raw")
    files = sorted(f for f in os.listdir(raw) if f.endswith(".json")) \
        if os.path.isdir(raw) else []
    bench = [f for f in files if f not in ("semantics.json", "recheck.json")]
    if not bench:
        raise InputError(raw, "no Google Benchmark *.json files")
    for f in bench:
        rs.add_file(os.path.join(raw, f))
    if "semantics.json" in files:
        rs.semantics = load_semantics(os.path.join(raw, "semantics.json"))
    if "recheck.json" in files:
        rs.recheck = load_recheck(os.path.join(raw, "recheck.json"))
    mpath = os.path.join(path, "machine.json")
    if os.path.exists(mpath):
        rs.machine = _read_json(mpath)
        if not isinstance(rs.machine, dict):
            raise InputError(mpath, "expected a JSON object")
    return rs


# ---------------------------------------------------------------- ceilings

COMPUTE_OPS = ("matmul", "conv2d", "linear", "mlp")
BINARY_OPS = ("add", "mul")
UNARY_ELEMENTWISE_OPS = ("relu", "normalize")
READ_OPS = ("sum", "mean", "max", "var")  # reductions: a read, and a result thousands of times smaller


INT8_DTYPES = ("i8", "int8_dynamic", "int8_static")


def ceiling_kind(run):
    """(groups of baseline ops to try in order, 'bytes' or 'flop') for a kernel row, None
    otherwise. The first group with a matching baseline row decides; within a group the
    best row is the ceiling (_best_baseline)."""
    gpu = run["device"].startswith("cuda")
    op = run["op"]
    if run.family in ("baseline", "alloc", "transfer"):
        return None
    if op in COMPUTE_OPS:
        return (("gemm_peak",),) if gpu else (("fma_peak",),), "flop"
    first = "add" if op in BINARY_OPS else "read" if op in READ_OPS else "copy"
    if gpu:
        # The best of the STREAM kernels of the row's read:write mix (Note [GPU stream
        # kernels]: cudaMemcpy's d2d_copy is one of the 1:1 kind); results from before
        # those rows existed fall back to d2d_copy.
        return (GPU_MIX[first], ("d2d_copy",)), "bytes"
    # In-place elementwise rows read and write the updated tensor without the
    # read-for-ownership that a plain-store add/copy pays: their ceiling is the
    # in-place baseline (add_inplace, scale_inplace); results from before those rows
    # existed fall back to add/copy.
    if run["style"] == "inplace" and run.family == "elementwise":
        if op in BINARY_OPS:
            return (("add_inplace",), ("add",)), "bytes"
        if op in UNARY_ELEMENTWISE_OPS:
            return (("scale_inplace",), ("copy",)), "bytes"
    # Writes: the faster of the plain-store baseline and its streaming-store twin
    # (copy_nt, add_nt), whichever kind of store the row used.
    if first in STREAMING_TWINS:
        return ((first, STREAMING_TWINS[first]),), "bytes"
    return ((first,),), "bytes"


STREAMING_TWINS = {"copy": "copy_nt", "add": "add_nt"}
GPU_MIX = {"read": ("read",), "copy": ("copy", "scale", "d2d_copy"), "add": ("add", "triad")}


def rate(run, what):
    return run.gbps() if what == "bytes" else run.gflops()


def ceiling(rs, run):
    """(baseline Run, its rate, this run's % of it) or None. Baseline rows must have
    the same device, at most the row's threads (Note [Ceilings of up to a row's
    threads]) and the same regime where both rows state them; compute peaks prefer the
    same dtype. The best matching row is the ceiling."""
    kind = ceiling_kind(run)
    if not kind:
        return None
    ops, what = kind
    mine = rate(run, what)
    if mine is None:
        return None
    key = (ops, what, run["device"], run["threads"], what == "bytes" and run.regime,
           what == "flop" and run["dtype"],
           what == "bytes" and run.regime != "DRAM" and run.counters.get("bytes"))
    if key not in rs._ceilings:
        rs._ceilings[key] = _best_baseline(rs, run, ops, what)
    best = rs._ceilings[key]
    return (best, rate(best, what), 100.0 * mine / rate(best, what)) if best else None


def _best_baseline(rs, run, groups, what):
    for group in groups:
        cands = [b for b in rs.select("baseline", op=lambda v: v in group, device=run["device"])
                 if _threads_fit(b["threads"], run["threads"])
                 and (what == "flop" or _regime_fits(b, run))
                 and rate(b, what)]
        if what == "flop":
            # int8 rows (i8, int8_dynamic, int8_static) against the int8 multiply-add
            # peak, or none where the CPU has no int8 chain (a float32 peak would
            # flatter them); any other dtype against its own peak, else the float32
            # one: never against a peak of another kind (an int8 peak would flatter f16
            # rows).
            int8 = run["dtype"] in INT8_DTYPES
            same = [b for b in cands if b["dtype"] == ("i8" if int8 else run["dtype"])]
            cands = same or ([] if int8 else [b for b in cands if b["dtype"] in (None, "f32")])
        if cands:
            return pick_ceiling(cands, run.regime, what, run.counters.get("bytes") if what == "bytes" else None)
    return None


CACHE_REGIMES = ("L1", "L2", "LLC")


# Note [Cache rows across labels]: a regime label is a threshold (a working set of at
# most half a level's capacity), so a row just over it is labelled the next level while
# it still runs from this one: a 512x256 float32 sum (512 KiB read, 2 KiB written) on a
# 1 MiB L2 is "LLC", the ladder's 512 KiB read is "L2". Held to LLC-labelled sizes only,
# that row took the 4 MiB read, far slower than the L2, and read over 100% of it, while
# its bfloat16 twin (256 KiB, "L2") was held to the L2 read (docs/notes/bench.md, "Cache
# rows across labels"). So a cache-size row with a byte count may take a baseline of any
# cache label, and pick_ceiling holds it to the size nearest its bytes (the ladder has
# one within a factor of 1.41); DRAM rows and DRAM sizes stay apart from the caches.
def _regime_fits(b, run):
    if run.regime in CACHE_REGIMES and b.regime in CACHE_REGIMES and run.counters.get("bytes"):
        return True
    return _same(b.regime, run.regime)


def pick_ceiling(cands, regime, what, row_bytes=None):
    """The ceiling among baseline rows of one op group, threads and regime: the fastest;
    in DRAM the largest, since several sizes can fall in DRAM (a 32 MiB L3 makes the 8
    Mi-element baseline DRAM too, though part of it hits the L3) and the largest is the
    memory's own rate. In a cache regime holding several baseline sizes, a row with a
    byte count is held to the size that moves the nearest number of bytes (by ratio),
    the fastest of its ops there: a 2 MiB L2 per core labels the 1 Mi-element baseline
    LLC on 2 threads (4 MiB, not twice the 2 x 2 MiB), yet each thread's half stays in
    its L2 (the Intel VM of git 95b95bc (2026-11-24): a 123 GB/s "LLC" read beside 58 GB/s for the 8
    Mi-element one), which is no ceiling for a 64 MiB row."""
    if what == "bytes" and regime == "DRAM":
        return max(cands, key=lambda b: (shape_numel(b["shape"]), rate(b, what)))
    if what == "bytes" and row_bytes:
        dist = [abs(math.log(b.counters["bytes"] / row_bytes)) if b.counters.get("bytes") else math.inf
                for b in cands]
        near = min(dist)
        cands = [b for b, d in zip(cands, dist) if d == near]
    return max(cands, key=lambda b: rate(b, what))


# Where a case was run in several styles, layout comparisons use one: the first here.
STYLE_PREF = (None, "out", "outofplace", "inplace", "copy", "outofplace_system", "view")


def preferred_style(rs, r):
    """True when no variant of r (same keys but style) has a more preferred style."""
    mine = STYLE_PREF.index(r["style"]) if r["style"] in STYLE_PREF else len(STYLE_PREF)
    return not any(rs.like(r, style=s) for s in STYLE_PREF[:mine])


LAYOUT_FAMILIES = ("matmul", "conv", "elementwise", "copy", "reduce")


def layout_cases(rs, family=LAYOUT_FAMILIES, ops=lambda v: True, layouts=lambda v: v not in (None, "contiguous"),
                 base="contiguous", impl="ours", device=lambda v: True):
    """[(run, its twin in the `base` layout)]: the pairs the Memory layout table, the
    L claims and scripts/recheck's layout pick compare."""
    out = []
    for r in rs.select(family, impl=impl, op=ops, layout=layouts, device=device):
        b = rs.like(r, layout=base)
        if b:
            out.append((r, b))
    return out


def _same(a, b):
    return a is None or b is None or a == b


# Note [Ceilings of up to a row's threads]: a row run with T threads may use fewer (the
# elementwise grain keeps a 64 Ki-element bfloat16 row on one thread), so the best the
# machine did with up to T threads bounds it: its ceiling is the best baseline row of
# any thread count up to T. A 2-thread copy of an L2-size buffer pays the second
# thread's wake-up and can run slower than a 1-thread one; held to it, 2-thread L2 rows
# read far over 100% (docs/notes/bench.md, "Ceilings of up to a row's threads").
def _threads_fit(baseline_threads, row_threads):
    if baseline_threads is None or row_threads is None:
        return True
    return int(baseline_threads) <= int(row_threads)


def pct_ceiling(rs, run):
    c = ceiling(rs, run)
    return f"{c[2]:.0f}%" if c else "—"


# ---------------------------------------------------------------- formatting
# (fmt.py; re-exported here for the tools that read it through results)
from .fmt import (describe, devices, fmt_bytes, fmt_num, fmt_rate, fmt_spread,  # noqa: E402,F401
                  fmt_time, fmt_tm, fmt_x, group_by, md_table, varying_labels)


# ---------------------------------------------------------------- files

def compact_json(doc):
    """doc (a JSON object) as text with each top-level key on its own line and each
    element of a top-level list (Google Benchmark's "benchmarks") on its own, without
    indentation: the committed raw/ files (Note [Compact raw JSON] in collect.py)."""
    def one(v):
        return json.dumps(v, separators=(",", ":"))
    parts = []
    for k, v in doc.items():
        if isinstance(v, list) and v:
            parts.append(one(k) + ":[\n" + ",\n".join(one(e) for e in v) + "\n]")
        else:
            parts.append(one(k) + ":" + one(v))
    return "{\n" + ",\n".join(parts) + "\n}\n"


def atomic_write(path, data):
    """Writes str or bytes to path through a temp file in the same directory, so a
    failure leaves the old file untouched."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def run_checks(rs):
    """The run checks of TABLES.md (checks.py)."""
    from .checks import run_checks as checks
    return checks(rs)
