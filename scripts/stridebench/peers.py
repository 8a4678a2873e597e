# peers.py — the same cases as the C++ matrix (benchmarks/bench_*.cpp), run through
# PyTorch and NumPy, written as Google Benchmark JSON (docs/BENCHMARKS.md; docs/PEERS.md
# says what is measured and how). Run names are the C++ ones with impl:torch /
# impl:numpy, so scripts/tables puts each peer row next to our row of the same name.
#
#   scripts/peers.py --out-dir DIR --bench-dir BUILD/benchmarks [--matrix smoke|quick|full]
#                    [--filter REGEX] [--machine SLUG] [--libs torch,numpy]
#   writes DIR/peers_torch.json and DIR/peers_numpy.json (a library that does not
#   import is skipped with a message and its stale file removed; exit 0 either way).
#
# How: the parent starts one child process per (library, thread count), with
# OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS set before the library is
# imported (no threadpoolctl needed; torch.set_num_threads too), and merges what the
# children report into one file per library, written atomically.
# Timing (Google Benchmark's discipline, class Timer): a warm-up call (the allocation
# probe of the case), an iteration count found on batches of >= min_time/10, then
# `repetitions` (quick 3, full 5, smoke 1) each timing batches with time.perf_counter
# until it has lasted >= min_time (0.1 s; torch.cuda.synchronize before the clock is
# read on GPU); real_time = time / iterations, cpu_time from time.thread_time.
# Python overhead: a no-op Python call and a 1-element op per style are measured in
# every child (peers/op:overhead runs, context sb_python_overhead_ns) and every case
# whose time is below 50x its fixed per-call overhead (overhead >= 2%) gets a warning.
# Families: elementwise, copy, reduce, matmul, conv (torch), quant (torch; numpy f32),
# alloc (M1-M5), transfer (H1, torch CUDA only). NumPy's ufuncs run on one thread,
# so numpy rows exist at threads:1 only, except its BLAS calls (matmul, linear).
# Cost of the harness itself: one Python call per iteration inside the timed loop.
import argparse
import datetime
import gc
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from . import names  # the run-name vocabulary
from . import results as sbtables  # loading and checking what the tables accept

SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # scripts/
ENTRY = os.path.join(SCRIPTS, "peers.py")  # this module's command line (children run it too)
LIBS = ("torch", "numpy")
KEY_ORDER = names.KEYS  # the run-name keys, in order (names.py)
OVERHEAD_LIMIT = 0.02          # fixed per-call overhead must stay below 2% of a case
EXIT_NO_LIBRARY = 3            # a child whose library does not import
BIG_INPUT = 1 << 22            # elements: larger random inputs repeat a random block
BIG_BLOCK = (1 << 20) + 7      # of this many (odd, so rows do not line up)
MATRIX = {  # repetitions, min seconds per repetition
    "smoke": (1, 0.002),
    "quick": (3, 0.1),
    "full": (5, 0.1),
}


def say(msg):
    print(f"peers: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- machine facts
# Note [Facts from our context]: the machine, its caches and its slug come from the
# context our binaries write (bench_common.cpp), so a peer row and ours always name
# the same machine and apply the same regime rule to the same cache sizes.

def our_context(bench_dir, json_dir, matrix):
    """The context of our JSON in json_dir (the C++ families run before the peers under
    `ninja benchmark`), else of one case of one of our binaries run now at smoke."""
    best = None
    for f in sorted(os.listdir(json_dir)) if json_dir and os.path.isdir(json_dir) else []:
        if not f.endswith(".json") or f.startswith(("peers_", "recheck", "semantics")):
            continue
        try:
            with open(os.path.join(json_dir, f)) as fh:
                ctx = json.load(fh).get("context", {})
        except (OSError, ValueError, AttributeError):
            continue
        if ctx.get("sb_machine") and ctx.get("sb_caches"):
            if ctx.get("sb_matrix") == matrix:
                return ctx
            best = best or ctx
    if best:
        return best
    exes = [os.path.join(bench_dir, b) for b in ("bench_views", "bench_baseline_cuda")] + \
        sorted(os.path.join(bench_dir, f) for f in os.listdir(bench_dir) if f.startswith("bench_"))
    exe = next(e for e in exes if os.path.isfile(e) and os.access(e, os.X_OK))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "one.json")
        try:
            first = subprocess.run([exe, "--benchmark_list_tests", "--sb_matrix=smoke"],
                                   capture_output=True, text=True,
                                   timeout=GB_LIST_TIMEOUT).stdout.split()[0]
            p = subprocess.run([exe, "--sb_matrix=smoke", f"--benchmark_out={out}",
                                "--benchmark_filter=^" + re.escape(first) + "$",
                                "--benchmark_out_format=json"], capture_output=True,
                               text=True, timeout=GB_LIST_TIMEOUT)
            with open(out) as fh:
                ctx = json.load(fh)["context"]
        except (OSError, ValueError, KeyError, IndexError, subprocess.SubprocessError) as e:
            raise ValueError(f"{exe}: no machine context ({type(e).__name__}: {e})") from None
    if p.returncode != 0 or not ctx.get("sb_machine"):
        raise ValueError(f"{exe}: no machine context (exit {p.returncode})")
    return ctx


class Regimes:
    """bench_common.cpp regime() on the caches of our context (sb_caches, sb_cores)."""

    def __init__(self, ctx):
        sizes = dict(part.split(":") for part in ctx["sb_caches"].split(","))
        self.l1d, self.l2 = int(sizes.get("L1d", 0)), int(sizes.get("L2", 0))
        self.llc_level = 3 if "L3" in sizes else 2
        self.llc = int(sizes.get("L3", sizes.get("L2", 0)))
        self.cores = int(ctx.get("sb_cores") or ctx.get("num_cpus") or 1)

    def __call__(self, ws, threads):
        # a level counts when the working set fills at most half of it (private levels
        # times the threads)
        t = max(1, min(threads, self.cores))
        if self.l1d > 0 and 2 * ws <= self.l1d * t:
            return "L1"
        if self.l2 > 0 and 2 * ws <= self.l2 * (t if self.llc_level > 2 else 1):
            return "L2"
        if self.llc > 0 and self.llc_level > 2 and 2 * ws <= self.llc:
            return "LLC"
        return "DRAM"


def gpu_name(torch):
    """Device 0's name, as cudaGetDeviceProperties gives it, or ''."""
    try:
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - a broken CUDA install reads as no GPU
        pass
    return ""


def host_rss_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def run_name(family, **keys):
    for k in keys:
        assert k in KEY_ORDER, f"run_name: key {k!r} is not in docs/BENCHMARKS.md"
    return "/".join([family] + [f"{k}:{keys[k]}" for k in KEY_ORDER
                                if keys.get(k) is not None])


def shape_key(shape):
    return "x".join(str(d) for d in shape) or "1"


# ---------------------------------------------------------------- timing

class Timer:
    """Google Benchmark's loop: warm-up that finds the iteration count, then
    repetitions of that many iterations."""

    def __init__(self, reps, min_time):
        self.reps, self.min_time = reps, min_time

    @staticmethod
    def batch(fn, sync, n):
        sync()
        c0, t0 = time.thread_time(), time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return time.perf_counter() - t0, time.thread_time() - c0

    def run(self, fn, sync, warm=True):
        """-> [(real s, cpu s, iterations) per iteration, one per repetition].
        warm=False when the caller has already called fn (its allocation probe)."""
        if warm:
            self.batch(fn, sync, 1)  # warm-up: first touch, caches, lazy initialisation
        n = 1
        while True:  # iteration search, on batches of >= 1/10 of min_time
            t, c = self.batch(fn, sync, n)
            if t >= self.min_time / 10 or n >= 100_000_000:
                break
            n = int(min(max(n * self.min_time / 10 * 1.4 / max(t, 1e-9), n + 1), n * 10))
        samples = []
        if t >= self.min_time:  # as Google Benchmark: a search batch that lasted
            samples.append((t / n, c / n, n))  # min_time is the first repetition
        else:  # one batch lasts >= min_time (5% margin)
            n = max(n, math.ceil(n * self.min_time * 1.05 / max(t, 1e-9)))
        while len(samples) < self.reps:
            # n iterations in chunks of ~1/4 of it, until min_time has passed: each
            # repetition lasts >= min_time even when the machine slows down, and a rate
            # measured in a quiet moment cannot stretch one repetition to seconds
            iters, tt, cc, k = 0, 0.0, 0.0, max(1, n // 4)
            while tt < self.min_time:
                t, c = self.batch(fn, sync, k)
                iters, tt, cc = iters + k, tt + t, cc + c
                left = (self.min_time - tt) * 1.05 * iters / max(tt, 1e-9)
                k = max(1, min(math.ceil(left), math.ceil(iters / 4)))
            samples.append((tt / iters, cc / iters, iters))
        return samples


# ---------------------------------------------------------------- a measured case

class Work:
    """What a case builder returns: the timed callable and its counters."""

    def __init__(self, fn, bytes_=0, flop=0, ws=0, peak=None, allocs=None, extra=None,
                 overhead_style="outofplace", check_overhead=True, warmed=True):
        # warmed: the builder has called fn (alloc_of) so the timer skips its warm-up
        self.fn, self.bytes, self.flop, self.ws, self.warmed = fn, bytes_, flop, ws, warmed
        self.peak, self.allocs, self.extra = peak, allocs, extra or {}
        self.overhead_style, self.check_overhead = overhead_style, check_overhead


class Skip(Exception):
    """A case this library cannot run (recorded as error_occurred with the reason)."""


class Case:
    def __init__(self, family, keys, build, blas=False):
        self.family, self.keys, self.build, self.blas = family, keys, build, blas
        self.name = run_name(family, **keys)


# ---------------------------------------------------------------- backends
# One small adapter per library gives the cases what they need: inputs in each layout,
# the ops in each style, sizes, and how to measure what a call allocates.

class TorchBackend:
    impl = "torch"
    dtypes = ("f32", "bf16")  # the row dtypes it takes (bf16: torch.bfloat16)

    def __init__(self, device):
        import torch
        self.t, self.device = torch, device
        self.cuda = device.startswith("cuda")
        self.gen = torch.Generator().manual_seed(1)
        if self.cuda:
            # f32 rows are float32 arithmetic on both sides: cuDNN would take TF32 tensor
            # cores for conv2d by default (matmul's default is already off), and ours
            # take them only where a row says tf32.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False

    def version(self):
        return self.t.__version__

    def sync(self):
        if self.cuda:
            self.t.cuda.synchronize()

    def _dev(self, x):
        return x.to(self.device) if self.cuda else x

    def rand(self, shape, lo=-1.0, hi=1.0):
        n = numel(shape)
        if n <= BIG_INPUT:
            return self._dev(self.t.empty(shape).uniform_(lo, hi, generator=self.gen))
        block = self.t.empty(BIG_BLOCK).uniform_(lo, hi, generator=self.gen)
        return self._dev(block.repeat(-(-n // BIG_BLOCK))[:n].view(shape))

    def signs(self, shape):
        return self._dev(self.t.randint(0, 2, shape, generator=self.gen).float() * 2 - 1)

    def typed(self, x, dt):
        """x (float32) as the row's dtype."""
        return x.to(self.t.bfloat16) if dt == "bf16" else x

    def empty(self, shape, channels_last=False, dt="f32"):
        fmt = self.t.channels_last if channels_last else self.t.contiguous_format
        return self.t.empty(shape, device=self.device, memory_format=fmt,
                            dtype=self.t.bfloat16 if dt == "bf16" else self.t.float32)

    def to_channels_last(self, x):
        return x.contiguous(memory_format=self.t.channels_last)

    def transpose(self, x, *perm):
        return x.permute(*perm) if perm else x.t()

    def expand(self, x, shape):
        return x.expand(*shape)

    def contiguous(self, x):
        return x.contiguous()

    def clone(self, x):  # keeps a dense layout (preserve_format), as ours
        return x.clone()

    def swap(self, x, d1, d2):
        return x.transpose(d1, d2)

    def normalize(self, x):  # (x - mean) / sqrt(var + eps) along the last dim: fused
        F, w = self.t.nn.functional, (x.shape[-1],)
        return lambda: F.layer_norm(x, w, eps=1e-5)

    def reduce(self, op, x, dim):
        f = {"sum": x.sum, "mean": x.mean, "max": x.amax, "var": x.var}[op]
        return lambda: f(dim)

    @staticmethod
    def strides(x):
        return tuple(x.stride())

    @staticmethod
    def itemsize(x):
        return x.element_size()

    # elementwise: (fn for the style) ---------------------------------
    def binary(self, op, style, a, b, c):
        t = self.t
        if op == "add":
            if style == "inplace":
                flip = [False]

                def f():  # alternate add_/sub_ so the values stay bounded
                    flip[0] = not flip[0]
                    return a.add_(b) if flip[0] else a.sub_(b)
                return f
            if style == "out":
                return lambda: t.add(a, b, out=c)
            return lambda: t.add(a, b)
        if op == "mul":  # b holds +-1: a's magnitudes never change
            if style == "inplace":
                return lambda: a.mul_(b)
            if style == "out":
                return lambda: t.mul(a, b, out=c)
            return lambda: t.mul(a, b)
        raise ValueError(op)

    def loop(self, a, b, c=None, t1=None, t2=None):
        t = self.t
        if c is not None:
            return lambda: t.clamp_min(t.add(t.mul(a, b, out=t1), b, out=t2), 0, out=c)
        return lambda: t.relu(t.add(t.mul(a, b), b))

    def relu(self, style, a, c):
        t = self.t
        if style == "inplace":
            return lambda: a.relu_()
        if style == "out":  # at::relu is clamp_min(x, 0); relu has no out= overload
            return lambda: t.clamp_min(a, 0, out=c)
        return lambda: t.relu(a)

    def sum(self, x, dim):
        return lambda: x.sum(dim)

    def matmul(self, a, b, c=None):
        t = self.t
        return (lambda: t.matmul(a, b, out=c)) if c is not None else (lambda: t.matmul(a, b))

    # allocation of one call --------------------------------------------
    def alloc_of(self, fn, inputs):
        """(peak bytes, allocations, result) of one call of fn. CUDA: the caching allocator's
        statistics (exact). CPU: torch keeps no CPU allocator statistics, so the bytes
        of the storage the call returns when it is new (temporaries inside the call are
        not seen)."""
        t = self.t
        if self.cuda:
            self.sync()
            base = t.cuda.memory_allocated()
            n0 = t.cuda.memory_stats().get("allocation.all.allocated", 0)
            t.cuda.reset_peak_memory_stats()
            y = fn()
            self.sync()
            peak = t.cuda.max_memory_allocated() - base
            n = t.cuda.memory_stats().get("allocation.all.allocated", 0) - n0
            return peak, n, y
        y = fn()
        ptrs = {x.data_ptr() for x in inputs}
        if isinstance(y, t.Tensor) and y.data_ptr() not in ptrs:
            return y.storage().nbytes(), 1, y
        return 0, 0, y

    peak_method = ("CUDA: torch.cuda.max_memory_allocated() rise over one call; CPU: "
                   "bytes of the new storage the call returns (torch keeps no CPU "
                   "allocator statistics; temporaries inside the call are not seen)")


class NumpyBackend:
    impl = "numpy"
    dtypes = ("f32",)  # NumPy has no bfloat16

    def __init__(self, device):
        import numpy
        self.np, self.device, self.cuda = numpy, device, False
        self.rng = numpy.random.default_rng(1)

    def version(self):
        return self.np.__version__

    def sync(self):
        pass

    def rand(self, shape, lo=-1.0, hi=1.0):
        n = numel(shape)
        x = self.rng.random(min(n, BIG_BLOCK) if n > BIG_INPUT else n, dtype=self.np.float32)
        x *= hi - lo
        x += lo
        if n <= BIG_INPUT:
            return x.reshape(shape)
        y = self.np.empty(n, self.np.float32)
        for i in range(0, n, BIG_BLOCK):  # a plain copy per block: fast, unlike np.resize
            y[i:i + BIG_BLOCK] = x[:min(BIG_BLOCK, n - i)]
        return y.reshape(shape)

    def signs(self, shape):
        return (self.rng.integers(0, 2, size=shape) * 2 - 1).astype(self.np.float32)

    @staticmethod
    def typed(x, dt):  # noqa: ARG004 - float32 only (dtypes)
        return x

    def empty(self, shape, channels_last=False, dt="f32"):  # noqa: ARG002 - float32 only
        if channels_last:  # NHWC storage seen as NCHW
            n, c, h, w = shape
            return self.np.empty((n, h, w, c), self.np.float32).transpose(0, 3, 1, 2)
        return self.np.empty(shape, self.np.float32)

    def to_channels_last(self, x):
        return self.np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)

    def transpose(self, x, *perm):
        return x.transpose(*perm) if perm else x.T

    def expand(self, x, shape):
        return self.np.broadcast_to(x, shape)

    def contiguous(self, x):
        return self.np.ascontiguousarray(x)

    def clone(self, x):  # keeps a dense layout, as ours
        return x.copy(order="K")

    def swap(self, x, d1, d2):
        return x.swapaxes(d1, d2)

    def normalize(self, x):  # NumPy has no fused kernel: mean, var, then the scaling
        np = self.np

        def f():
            m = x.mean(-1, keepdims=True)
            return (x - m) / np.sqrt(x.var(-1, keepdims=True) + np.float32(1e-5))
        return f

    def reduce(self, op, x, dim):
        if op == "var":
            return lambda: x.var(axis=dim, ddof=1)
        f = {"sum": x.sum, "mean": x.mean, "max": x.max}[op]
        return lambda: f(axis=dim)

    @staticmethod
    def strides(x):
        return tuple(s // x.itemsize for s in x.strides)

    @staticmethod
    def itemsize(x):
        return x.itemsize

    def binary(self, op, style, a, b, c):
        np = self.np
        if op == "add":
            if style == "inplace":
                flip = [False]

                def f():
                    flip[0] = not flip[0]
                    return np.add(a, b, out=a) if flip[0] else np.subtract(a, b, out=a)
                return f
            if style == "out":
                return lambda: np.add(a, b, out=c)
            return lambda: np.add(a, b)
        if op == "mul":
            if style == "inplace":
                return lambda: np.multiply(a, b, out=a)
            if style == "out":
                return lambda: np.multiply(a, b, out=c)
            return lambda: np.multiply(a, b)
        raise ValueError(op)

    def loop(self, a, b, c=None, t1=None, t2=None):
        np, zero = self.np, self.np.float32(0)
        if c is not None:
            return lambda: np.maximum(np.add(np.multiply(a, b, out=t1), b, out=t2), zero, out=c)
        return lambda: np.maximum(np.add(np.multiply(a, b), b), zero)

    def relu(self, style, a, c):
        np = self.np
        zero = np.float32(0)
        if style == "inplace":
            return lambda: np.maximum(a, zero, out=a)
        if style == "out":
            return lambda: np.maximum(a, zero, out=c)
        return lambda: np.maximum(a, zero)

    def sum(self, x, dim):
        return lambda: x.sum(axis=dim)

    def matmul(self, a, b, c=None):
        np = self.np
        return (lambda: np.matmul(a, b, out=c)) if c is not None else (lambda: np.matmul(a, b))

    def alloc_of(self, fn, inputs):
        """(peak bytes, allocations, result): NumPy reports its data buffers to tracemalloc, so
        the peak is the traced-memory rise over one call (temporaries included, plus a
        few hundred bytes of Python objects); allocations: 1 when the call returns a
        new array owning its data."""
        import tracemalloc
        started = not tracemalloc.is_tracing()
        if started:
            tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            y = fn()
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            if started:
                tracemalloc.stop()
        new = isinstance(y, self.np.ndarray) and y.base is None and \
            not any(y is x for x in inputs)
        return max(0, peak), int(new), y

    peak_method = ("tracemalloc peak rise over one call (NumPy traces its data "
                   "buffers; includes Python object bytes)")


POOL = {}


def pooled(be, key, make):
    """One input per key and device, made once and shared by the cases of a family (the
    C++ harness's pooled()): large random inputs are generated once."""
    k = (be.impl, be.device) + tuple(key)
    if k not in POOL:
        POOL[k] = make()
    return POOL[k]


def span_bytes(be, x):
    shape = tuple(x.shape)
    if any(d == 0 for d in shape):
        return 0
    span = 1 + sum((d - 1) * abs(s) for d, s in zip(shape, be.strides(x)))
    return span * be.itemsize(x)


def distinct_bytes(be, x):
    n = 1
    for d, s in zip(tuple(x.shape), be.strides(x)):
        if s != 0:
            n *= d
    return n * be.itemsize(x)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# ---------------------------------------------------------------- the cases
# Note [Cases from our binaries]: the peers run the cases our benchmark binaries
# register (their --benchmark_list_tests at the same --sb_matrix; the run name says
# everything a case is, by the naming contract of docs/BENCHMARKS.md), each rebuilt in
# torch or NumPy by its family's builder below from the name's keys. A case a family
# gains in C++ is measured by the peers with no edit here; a builder returns None for
# what the library cannot do the same way (a style it has no form for, a dtype it has
# no kernel for), and those cases are listed, not measured. At --matrix quick the
# peers' 2.5-minute budget takes the subset QUICK selects.

# The peers' quick budget: regexes on our run names (impl:ours), any of which selects.
QUICK = (
    r"^elementwise/op:(add|mul|relu|normalize|loop)/.*/layout:contiguous/.*/shape:1x16x64x64/",
    r"^elementwise/op:add/.*/style:out/dtype:f32/shape:1x16x64x64/",
    r"^elementwise/op:add/.*/layout:contiguous/.*/shape:64x64x128x128/threads:1$",
    r"^elementwise/op:add/.*/layout:(contiguous|transposed)/style:out/.*/shape:64x64x128x128/",
    r"^copy/", r"^reduce/op:sum/.*/shape:4096x4096/", r"^matmul/", r"^conv/", r"^quant/",
    r"^alloc/", r"^transfer/",
)
REUSE_CUDA_SHAPE = {"smoke": (1, 64, 1024)}  # else 1 GiB, as CLAIMS.md (bench_alloc_cuda.cpp)
GB_LIST_TIMEOUT = 60


def ours_cases(bench_dir, matrix):
    """{name: (family, keys)} of the impl:ours cases our binaries in bench_dir register
    at `matrix`, names canonical. Raises ValueError naming the binary on failure."""
    exes = sorted(os.path.join(bench_dir, f) for f in os.listdir(bench_dir)
                  if f.startswith("bench_") and not f.endswith(".p")
                  and os.path.isfile(os.path.join(bench_dir, f))
                  and os.access(os.path.join(bench_dir, f), os.X_OK))
    if not exes:
        raise ValueError(f"{bench_dir}: no bench_* binaries (build them first: ninja -C BUILD)")
    out = {}
    for exe in exes:
        try:
            p = subprocess.run([exe, "--benchmark_list_tests", f"--sb_matrix={matrix}"],
                               capture_output=True, text=True, timeout=GB_LIST_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as e:
            raise ValueError(f"{exe} --benchmark_list_tests: {e}") from None
        if p.returncode != 0:
            raise ValueError(f"{exe} --benchmark_list_tests exited {p.returncode}: "
                             f"{(p.stderr or p.stdout).strip()[-300:]}")
        for line in p.stdout.split():
            try:
                family, keys = sbtables.parse_name(line)
            except ValueError as e:
                raise ValueError(f"{exe}: run {line!r}: {e}") from None
            if keys.get("impl") == "ours":
                out[sbtables.canonical(family, keys)] = (family, keys)
    return out


def dims(shape_key_):
    return tuple(int(d) for d in shape_key_.split("x"))


def takes(be, dt):
    """Whether the backend runs rows of dtype dt (torch: f32 and bf16; NumPy: f32)."""
    return dt in getattr(be, "dtypes", ("f32",))


def peer_keys(keys, be, dev, **change):
    """Our keys with the peer's impl (and device), plus any changes."""
    k = dict(keys, impl=be.impl, device=dev)
    k.update(change)
    return {key: k[key] for key in KEY_ORDER if k.get(key) is not None}


def elementwise_case(be, dev, keys):
    """bench_elementwise.cpp's cases: 4-D NCHW sizes. For binary ops the layout is b's
    and a is contiguous, except channels_last where a, b and out all are; unary ops take
    x in the layout. transposed: dims 2 and 3 stored swapped (a .transpose(2, 3) view);
    sliced: every other element of a buffer twice as long in W; expanded: 1x1xHxW
    broadcast to NxCxHxW. In-place updates a dense copy (binary: of a; unary: of x, a
    fresh stepped tensor for sliced). The peers' outofplace is their own default
    allocator (torch's CPU one is plain posix_memalign/free), so there is no
    outofplace_system row; normalize has no in-place or out= form in torch or NumPy, and
    an expanded tensor takes no in-place write. op:loop (S3): relu(add(mul(a, b), b)),
    out= into three buffers made once vs out-of-place (two temporaries and a result)."""
    op, layout, style = keys["op"], keys["layout"], keys["style"]
    if not takes(be, keys["dtype"]) or style == "outofplace_system":
        return None
    if op == "normalize" and style != "outofplace":
        return None
    if style == "inplace" and layout == "expanded" and op in ("relu", "normalize"):
        return None
    if op == "loop" and layout != "contiguous":
        return None
    return _ew_case(be, dev, op, layout, style, dims(keys["shape"]), int(keys["threads"]), keys["dtype"])


def _ew_make(be, layout, shape, make):
    """A tensor of NCHW `shape` in the layout (bench_elementwise.cpp make())."""
    n, c, h, w = shape
    if layout == "transposed":
        return be.swap(make((n, c, w, h)), 2, 3)
    if layout == "sliced":
        return make((n, c, h, 2 * w))[..., ::2]
    if layout == "expanded":
        return be.expand(make((1, 1, h, w)), shape)
    if layout == "channels_last":
        return be.to_channels_last(make(shape))
    return make(shape)


def _ew_case(be, dev, op, layout, style, shape, threads, dt="f32"):
    keys = dict(op=op, impl=be.impl, device=dev, layout=layout, style=style, dtype=dt,
                shape=shape_key(shape), threads=threads)
    binary = op in ("add", "mul", "loop")
    isz = sbtables.DTYPE_BYTES[dt]

    def build():
        rand = lambda s: be.typed(be.rand(s), dt)  # noqa: E731
        ones = lambda s: be.typed(be.rand(s, 1.0, 1.0), dt)  # noqa: E731 - mul's b: a *= b keeps a
        if binary:
            la = "channels_last" if layout == "channels_last" else "contiguous"
            a = pooled(be, ("a", la, shape, dt), lambda: _ew_make(be, la, shape, rand))
            b = pooled(be, ("b", op == "mul", layout, shape, dt),
                       lambda: _ew_make(be, layout, shape, ones if op == "mul" else rand))
            # (loop's b is uniform, as ours: it is never updated in place)
        else:
            a = pooled(be, ("x", layout, shape, dt), lambda: _ew_make(be, layout, shape, rand))
            b = None
        target = None
        if style == "inplace":  # a fresh dense copy; the shared inputs never change
            target = _ew_make(be, layout, shape, rand) if not binary and \
                layout == "sliced" else be.clone(a)
        c = be.empty(shape, layout == "channels_last", dt) if style == "out" else None
        if op == "loop":
            fn = be.loop(a, b, c, be.empty(shape, dt=dt), be.empty(shape, dt=dt)) if style == "out" \
                else be.loop(a, b)
        elif op == "normalize":
            fn = be.normalize(a)
        elif binary:
            fn = be.binary(op, style, target if style == "inplace" else a, b, c)
        else:
            fn = be.relu(style, target if style == "inplace" else a, c)
        inputs = [x for x in (a, b, c, target) if x is not None]
        peak, allocs, _ = be.alloc_of(fn, inputs)
        if op == "add" and style == "inplace":
            fn()  # undo the add_ of the probe
        n = numel(shape)
        if op == "loop":  # mul: a, b -> t1; add: t1, b -> t2; relu: t2 -> y
            nbytes = distinct_bytes(be, a) + 2 * distinct_bytes(be, b) + 5 * isz * n
            ws = span_bytes(be, a) + span_bytes(be, b) + 3 * isz * n
        else:
            nbytes = distinct_bytes(be, a) + (distinct_bytes(be, b) if binary else 0) + isz * n
            ws = (span_bytes(be, b) if binary else 0) + \
                (span_bytes(be, target) if style == "inplace" else span_bytes(be, a) + isz * n)
        flop = {"normalize": 6, "loop": 3}.get(op, 1) * n
        return Work(fn, nbytes, flop, ws, peak, allocs, overhead_style=style)
    return Case("elementwise", keys, build)


def copy_case(be, dev, keys):
    """bench_copy.cpp: contiguous() of a transposed 2-D or channels-last 4-D tensor, its
    clone() twin (layout contiguous), NCHW -> NHWC, permute(2, 0, 1).contiguous()."""
    op, layout, shape, dt = keys["op"], keys["layout"], dims(keys["shape"]), keys["dtype"]
    if not takes(be, dt) or keys["style"] != "copy":
        return None
    rand = lambda s: be.typed(be.rand(s), dt)  # noqa: E731
    if op == "contiguous" and layout == "transposed" and len(shape) == 2:
        src, f = lambda: be.transpose(rand(shape[::-1])), be.contiguous
    elif op == "contiguous" and layout == "channels_last" and len(shape) == 4:
        src, f = lambda: be.to_channels_last(rand(shape)), be.contiguous
    elif op == "contiguous" and layout == "contiguous":
        src, f = lambda: rand(shape), be.clone
    elif op == "nchw_to_nhwc" and layout == "contiguous" and len(shape) == 4:
        src, f = lambda: rand(shape), be.to_channels_last
    elif op == "permute" and layout == "contiguous" and len(shape) == 3:
        src, f = lambda: rand(shape), lambda x: be.contiguous(be.transpose(x, 2, 0, 1))
    else:
        return None

    def build():
        x = pooled(be, ("copy", layout, shape, dt), src)
        fn = lambda: f(x)  # noqa: E731
        peak, allocs, y = be.alloc_of(fn, [x])
        nbytes = distinct_bytes(be, x) + distinct_bytes(be, y)
        ws = span_bytes(be, x) + span_bytes(be, y)
        return Work(fn, nbytes, 0, ws, peak, allocs)
    return Case("copy", peer_keys(keys, be, dev), build)


def reduce_case(be, dev, keys):
    """bench_reduce.cpp's cases: sum, mean, max, var (correction 1) over dim 1 (inner)
    or dim 0 (outer) of an R x C float32 matrix stored row-major (contiguous) or column
    by column (column_major: a .t() view), the result allocated by the call (no style
    key, as ours)."""
    op, layout, dim, shape = keys["op"], keys["layout"], keys["dim"], dims(keys["shape"])
    if not takes(be, keys["dtype"]) or len(shape) != 2 or keys.get("style") is not None:
        return None
    return Case("reduce", peer_keys(keys, be, dev),
                lambda: _reduce_work(be, op, layout, dim, shape, keys["dtype"]))


def _reduce_work(be, op, layout, dim, shape, dt="f32"):
    rand = lambda s: be.typed(be.rand(s), dt)  # noqa: E731
    x = pooled(be, ("reduce", layout, shape, dt), lambda: rand(shape) if layout ==
               "contiguous" else be.transpose(rand(shape[::-1])))
    fn = be.reduce(op, x, 1 if dim == "inner" else 0)
    peak, allocs, _ = be.alloc_of(fn, [x])
    out_bytes = (shape[0] if dim == "inner" else shape[1]) * sbtables.DTYPE_BYTES[dt]
    return Work(fn, distinct_bytes(be, x) + out_bytes, (4 if op == "var" else 1) * numel(shape),
                span_bytes(be, x) + out_bytes, peak, allocs)


def matmul_case(be, dev, keys):
    """[M,K] x [K,N], shape MxKxN, as benchmarks/bench_matmul.cpp: layout names the
    non-contiguous operand, always A: contiguous (A, B row-major), transposed (A a .t()
    view of a row-major [K, M] buffer), sliced (A every other row of a row-major [2M, K]
    buffer), column_major (A, B and the out= buffer column-major), contiguous_first (A
    transposed; A.contiguous() then the product, timed together). Styles out and
    outofplace."""
    layout, style, dt = keys["layout"], keys["style"], keys["dtype"]
    if not takes(be, dt) or style not in ("out", "outofplace"):
        return None
    m, k, n = dims(keys["shape"])

    def build():
        rand = lambda s: be.typed(be.rand(s), dt)  # noqa: E731
        a = pooled(be, ("mm_a", m, k, dt), lambda: rand((m, k)))
        b = pooled(be, ("mm_b", k, n, dt), lambda: rand((k, n)))
        if layout in ("transposed", "contiguous_first", "column_major"):
            a = pooled(be, ("mm_at", m, k, dt), lambda: be.transpose(rand((k, m))))
        elif layout == "sliced":
            a = pooled(be, ("mm_as", m, k, dt), lambda: rand((2 * m, k))[::2])
        if layout == "column_major":
            b = pooled(be, ("mm_bt", k, n, dt), lambda: be.transpose(rand((n, k))))
        c = None
        if style == "out":
            c = be.transpose(be.empty((n, m), dt=dt)) if layout == "column_major" else be.empty((m, n), dt=dt)
        if layout == "contiguous_first":
            mm = be.matmul
            fn = (lambda: mm(be.contiguous(a), b, c)()) if c is not None else \
                (lambda: mm(be.contiguous(a), b)())  # noqa: E731
        else:
            fn = be.matmul(a, b, c)
        peak, allocs, y = be.alloc_of(fn, [a, b] + ([c] if c is not None else []))
        nbytes = distinct_bytes(be, a) + distinct_bytes(be, b) + distinct_bytes(be, y)
        if layout == "contiguous_first":  # the copy reads and writes a once more
            nbytes += 2 * distinct_bytes(be, a)
        ws = span_bytes(be, a) + span_bytes(be, b) + span_bytes(be, y)
        return Work(fn, nbytes, 2 * m * n * k, ws, peak, allocs)
    return Case("matmul", peer_keys(keys, be, dev), build, blas=True)


def conv_case(be, dev, keys):
    """conv2d 3x3, stride 1, padding 1, no bias, C -> C channels (bench_conv.cpp's main
    case), NCHW vs channels-last (input and weights in the layout), and max/avg pooling
    3x3, stride 2, padding 1 on the same input; shape is the input's NCHW sizes.
    torch only (NumPy has neither), out-of-place only (torch has no out= form). The
    full matrix's depthwise and 1x1 convolutions carry the same op and shape keys as the
    3x3 one: a peer cannot tell them apart by name, so only C = 64 is taken as 3x3."""
    op, layout = keys["op"], keys["layout"]
    if be.impl != "torch" or keys["dtype"] != "f32" or keys["style"] != "outofplace" or \
            layout not in ("contiguous", "channels_last"):
        return None
    nb, c, h, w = dims(keys["shape"])
    if op == "conv2d":
        if c != 64:
            return None

        def build():
            F = be.t.nn.functional
            x, wt = be.rand((nb, c, h, w)), be.rand((c, c, 3, 3))
            if layout == "channels_last":
                x, wt = be.to_channels_last(x), be.to_channels_last(wt)
            fn = lambda: F.conv2d(x, wt, None, 1, 1)  # noqa: E731
            peak, allocs, y = be.alloc_of(fn, [x, wt])
            if layout == "channels_last" and not y.is_contiguous(
                    memory_format=be.t.channels_last):
                raise Skip("torch returned an NCHW result for a channels-last input")
            nbytes = distinct_bytes(be, x) + distinct_bytes(be, wt) + distinct_bytes(be, y)
            return Work(fn, nbytes, 2 * nb * c * h * w * c * 9, nbytes, peak, allocs)
        return Case("conv", peer_keys(keys, be, dev), build)
    if op not in ("max_pool2d", "avg_pool2d"):
        return None

    def build_pool():
        fn_op = getattr(be.t.nn.functional, op)
        x = be.rand((nb, c, h, w))
        if layout == "channels_last":
            x = be.to_channels_last(x)
        fn = lambda: fn_op(x, 3, 2, 1)  # noqa: E731
        peak, allocs, y = be.alloc_of(fn, [x])
        if layout == "channels_last" and not y.is_contiguous(
                memory_format=be.t.channels_last):
            raise Skip("torch returned an NCHW result for a channels-last input")
        nbytes = distinct_bytes(be, x) + distinct_bytes(be, y)
        flop = 9 * y.numel() if op == "avg_pool2d" else 0  # as bench_conv.cpp
        return Work(fn, nbytes, flop, nbytes, peak, allocs)
    return Case("conv", peer_keys(keys, be, dev), build_pool)


def quant_case(be, dev, keys):
    """A linear layer y = x W^T + b, [batch, in] x [out, in], shape batch x in x out:
    f32, f16, bf16 (the layer and x in bfloat16), int8 dynamic (quantize_dynamic) and
    int8 static (prepare, calibrate,
    convert) through torch; f32 through NumPy (x @ W.T + b). Counters weight_bytes
    and rel_error (vs the same layer in float64). Our MLP rows have no peer."""
    dt = keys["dtype"]
    if keys["op"] != "linear" or (be.impl == "numpy" and dt != "f32") or \
            dt not in ("f32", "f16", "bf16", "int8_dynamic", "int8_static"):
        return None
    batch, fin, fout = dims(keys["shape"])

    def build():
        if be.impl == "numpy":
            np = be.np
            x, wt, bias = be.rand((batch, fin)), be.rand((fout, fin)) / 32, be.rand((fout,))
            fn = lambda: np.add(np.matmul(x, wt.T), bias)  # noqa: E731
            peak, allocs, y = be.alloc_of(fn, [x])
            ref = x.astype(np.float64) @ wt.T.astype(np.float64) + bias
            rel = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
            return Work(fn, x.nbytes + wt.nbytes + bias.nbytes + y.nbytes,
                        2 * batch * fin * fout, 0, peak, allocs,
                        extra={"weight_bytes": wt.nbytes, "rel_error": rel})
        return _torch_linear(be, dt, batch, fin, fout)
    return Case("quant", peer_keys(keys, be, dev), build, blas=(dt == "f32"))


def cpu_has_vnni():
    """Whether the CPU has 8-bit dot products (AVX512_VNNI or AVX_VNNI), from
    /proc/cpuinfo (True where it cannot be read: no change from torch's defaults)."""
    flags = cpu_flags()
    return not flags or bool({"avx512_vnni", "avx_vnni"} & flags)


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo (empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def torch_bf16_cpu_path():
    """Which kernels torch 1.13 runs a CPU bfloat16 matmul or linear with: oneDNN where
    the CPU has AVX-512BW, VL and DQ (its mkldnn_bf16_device_check), else ATen's
    reference loops (one multiply-add at a time). "unknown" where the flags cannot be read."""
    flags = cpu_flags()
    if not flags:
        return "unknown"
    return "onednn" if {"avx512bw", "avx512vl", "avx512dq"} <= flags else "reference"


def static_qconfig(q, engine):
    """torch's default static qconfig for the engine, with 7-bit activations
    (reduce_range) where the CPU has no VNNI: without it, oneDNN's u8 x s8 products
    (vpmaddubsw) saturate their int16 pair sums, which cost the layer 9-20% relative
    error on an AVX2-only EPYC. torch's own x86 qconfig reduces the range for the same
    reason, and our int8 static layer takes 7-bit activations on every CPU (quant.h)."""
    qc = q.get_default_qconfig(engine)
    if engine == "onednn" and not cpu_has_vnni():
        qc = q.QConfig(activation=qc.activation.with_args(reduce_range=True), weight=qc.weight)
    return qc


def _torch_linear(be, dt, batch, fin, fout):
    t = be.t
    q = t.ao.quantization
    t.manual_seed(3)
    lin = t.nn.Linear(fin, fout).eval()
    x = be.rand((batch, fin))
    with t.no_grad():
        ref = lin.double()(x.double()) if not be.cuda else lin.double().to(be.device)(x.double())
        lin = lin.float()
    model = t.nn.Sequential(lin).to(be.device).eval()
    if dt == "f32":
        m = model
    elif dt in ("f16", "bf16"):
        half = t.float16 if dt == "f16" else t.bfloat16
        m, x = model.to(half), x.to(half)
        try:
            with t.no_grad():
                m(x)
        except RuntimeError as e:
            raise Skip(f"{dt} linear not supported by torch {t.__version__} on "
                       f"{be.device}: {str(e).splitlines()[0]}") from None
    else:
        if be.cuda:
            raise Skip("torch int8 quantization runs on the CPU only")
        engines = t.backends.quantized.supported_engines
        engine = next((e for e in ("fbgemm", "x86", "onednn", "qnnpack") if e in engines), None)
        if engine is None:
            raise Skip(f"no quantized engine in torch {t.__version__}")
        t.backends.quantized.engine = engine
        if dt == "int8_dynamic":
            m = q.quantize_dynamic(model, {t.nn.Linear}, dtype=t.qint8)
        else:
            qm = t.nn.Sequential(q.QuantStub(), lin, q.DeQuantStub()).eval()
            qm.qconfig = static_qconfig(q, engine)
            prepared = q.prepare(qm)
            with t.no_grad():
                for _ in range(4):  # calibration pass
                    prepared(be.rand((batch, fin)))
            m = q.convert(prepared)
    with t.no_grad():
        y = m(x).double()
        rel = float((y - ref).norm() / ref.norm())
    wbytes = _weight_bytes(t, m)
    fn_ = m

    def fn():
        with t.no_grad():
            return fn_(x)
    peak, allocs, _ = be.alloc_of(fn, [x])
    isz = x.element_size()
    return Work(fn, batch * fin * isz + wbytes + fout * 4 + batch * fout * isz,
                2 * batch * fin * fout, 0, peak, allocs,
                extra={"weight_bytes": wbytes, "rel_error": rel})


def _weight_bytes(t, m):
    """Bytes of the layer's weights as stored, bias excluded (as ours: quant.h
    weight_bytes()): f32/f16 elements; int8 elements plus per-channel scales and zero
    points when the quantization is per channel."""
    total = 0
    for mod in m.modules():
        w = getattr(mod, "weight", None)
        if callable(w) and not isinstance(w, t.nn.Parameter):  # quantized Linear
            w = w()
            total += w.numel() * w.element_size()
            if w.qscheme() in (t.per_channel_affine, t.per_channel_symmetric):
                for q in (w.q_per_channel_scales(), w.q_per_channel_zero_points()):
                    total += q.numel() * q.element_size()
        elif isinstance(mod, t.nn.Linear):
            total += mod.weight.numel() * mod.weight.element_size()
    return total


def alloc_kind(be):
    """The allocator a peer's rows measure: torch's CPU allocator is plain
    posix_memalign/free (no cache) and NumPy's np.empty is malloc (it caches only blocks
    < 1 KiB): both `alloc:system` on the CPU. On CUDA torch's caching allocator is
    `alloc:caching`, and the same with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (a child of its
    own) `alloc:cudamalloc`."""
    if not be.cuda:
        return "system"
    return "cudamalloc" if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1" else "caching"


def alloc_case(be, dev, keys, matrix):
    """M5: alloc + free latency (torch.empty / np.empty of n bytes, never touched, then
    dropped) at each of our sizes; M1-M4: the CLAIMS.md reuse experiment (torch only),
    one run per step, on our shape (CUDA: 1 GiB, as CLAIMS.md). Every allocator row of
    ours maps to the peer's one allocator (alloc_kind)."""
    kind = alloc_kind(be)
    if keys["op"] == "alloc_free":
        n = int(keys["size"])

        def build():
            if be.impl == "torch":
                t, d = be.t, be.device
                fn = lambda: t.empty(n, dtype=t.uint8, device=d)  # noqa: E731
            else:
                np = be.np
                fn = lambda: np.empty(n, dtype=np.uint8)  # noqa: E731
            return Work(fn, check_overhead=False, warmed=False)
        return Case("alloc", peer_keys(keys, be, dev, alloc=kind), build)
    if keys["op"] == "reuse_experiment" and be.impl == "torch":
        step = int(keys["step"])
        shape = dims(keys["shape"]) if "shape" in keys else \
            REUSE_CUDA_SHAPE.get(matrix, (256, 1024, 1024))
        return Case("alloc", peer_keys(keys, be, dev, alloc=kind),
                    lambda: ("single", _reuse_experiment(be, shape)[step]))
    return None


_REUSE = {}


def _reuse_experiment(be, shape):
    """CLAIMS.md's sequence through torch, once per process; the steps as in
    bench_alloc.cpp (0 before .. 9 del e; empty_cache()). Returns per step
    (seconds, counters)."""
    key = (be.device, shape)
    if key in _REUSE:
        return _REUSE[key]
    t = be.t
    nbytes = numel(shape) * 4
    dev = be.device
    host_live = [0]
    live, host = {}, {}  # the experiment's device tensors; its host tensors
    gc.collect()
    if be.cuda:
        t.cuda.empty_cache()
    rss0 = host_rss_bytes()
    steps = []

    def host_zeros():  # a host tensor whose pages are resident (zeros writes them)
        host_live[0] += nbytes
        return t.zeros(shape)

    def record(secs):
        rss = host_rss_bytes()
        c = {"host_allocated_bytes": host_live[0], "host_rss_bytes": rss}
        if be.cuda:
            c["allocated_bytes"] = t.cuda.memory_allocated()
            c["reserved_bytes"] = t.cuda.memory_reserved()
        else:  # torch keeps no CPU statistics: live tensors counted; RSS growth the
            # host buffers do not explain is what torch holds from the OS
            c["allocated_bytes"] = sum(nbytes for v in live.values() if v is not None)
            c["reserved_bytes"] = max(0, rss - rss0 - host_live[0])
        steps.append((secs, c))

    def timed(f):
        be.sync()
        t0 = time.perf_counter()
        f()
        be.sync()
        record(time.perf_counter() - t0)

    def zeros():
        return t.zeros(shape, device=dev)

    def step3():  # b = b.to(host)
        h = host_zeros()
        h.copy_(live["b"])
        host["b"] = h
        live["b"] = None

    def step8():  # e on the host, then e = e.to(device); the host buffer dies at once
        h = host_zeros()
        e = t.empty(shape, device=dev)
        e.copy_(h)
        live["e"] = e
        del h
        host_live[0] -= nbytes

    def step9():
        live["e"] = None
        if be.cuda:
            t.cuda.empty_cache()

    def assign(k):
        def f():
            live[k] = zeros()  # the new tensor exists before the old one dies
        return f

    for f in (lambda: None, assign("a"), assign("b"), step3, assign("c"), assign("c"),
              assign("d"), lambda: live.__setitem__("d", None), step8, step9):
        timed(f)
    host.clear()
    host_live[0] = 0
    live.clear()
    gc.collect()
    _REUSE[key] = steps
    return steps


def transfer_case(be, dev, keys):
    """H1, as bench_transfer.cpp: one blocking copy_ between a contiguous host tensor
    (pageable, or pinned) and a device tensor, h2d and d2h, at our sizes. torch CUDA
    only, and not in the cudaMalloc child."""
    if not be.cuda or os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1":
        return None
    op, kind, n = keys["op"], keys["alloc"], int(keys["size"])
    if op not in ("h2d", "d2h") or kind not in ("pageable", "pinned") or keys.get("dtype") != "f32":
        return None

    def build():
        t = be.t
        host = t.ones(n // 4, pin_memory=(kind == "pinned"))  # pages touched
        devt = t.zeros(n // 4, device=be.device)
        src, dst = (host, devt) if op == "h2d" else (devt, host)
        fn = lambda: dst.copy_(src)  # noqa: E731
        return Work(fn, n, 0, 0, check_overhead=False, warmed=False)
    return Case("transfer", peer_keys(keys, be, dev), build)


BUILDERS = {
    "elementwise": elementwise_case, "copy": copy_case, "reduce": reduce_case,
    "matmul": matmul_case, "conv": conv_case, "quant": quant_case,
    "alloc": lambda be, dev, keys, matrix: alloc_case(be, dev, keys, matrix),
    "transfer": transfer_case,
}


def peer_cases(be, dev, ours, matrix, threads):
    """The peer's cases for our `ours` ({name: (family, keys)}) on dev at `threads`, in
    our order, one per peer name; at quick, those QUICK selects."""
    out, seen = [], set()
    for name, (family, keys) in ours.items():
        if family not in BUILDERS:
            continue  # baseline, views: ours alone
        on_cuda = keys["device"].startswith("cuda")
        if on_cuda != dev.startswith("cuda"):
            continue
        if int(keys.get("threads", 1)) != threads:  # CUDA rows without threads: the 1-thread child
            continue
        if matrix == "quick" and not any(re.search(q, name) for q in QUICK):
            continue
        build = BUILDERS[family]
        c = build(be, dev, keys, matrix) if family == "alloc" else build(be, dev, keys)
        if c is not None and c.name not in seen:
            seen.add(c.name)
            out.append(c)
    return out


def overhead_cases(be, dev, threads):
    """A 1-element op per style: the fixed cost of one call from Python."""
    out = []
    for style in ("inplace", "out", "outofplace"):
        keys = dict(op="overhead", impl=be.impl, device=dev, style=style, dtype="f32",
                    shape="1", threads=threads)

        def build(style=style):
            a, b = be.rand((1,)), be.rand((1,))
            c = be.empty((1,))
            # no bytes/flop counters: these rows have no ceiling and no roofline place
            return Work(be.binary("add", style, a, b, c), 0, 0, 12, check_overhead=False,
                        warmed=False)
        out.append(Case("peers", keys, build))
    return out


# ---------------------------------------------------------------- the child

def child(args):
    """Measures one library at one thread count; writes {context, benchmarks} to
    args.child_out. Exit EXIT_NO_LIBRARY when the library does not import."""
    lib, threads = args.child, args.threads
    try:
        mod = __import__(lib)
    except Exception as e:  # noqa: BLE001 - any import failure means: skip this library
        say(f"{lib} does not import ({type(e).__name__}: {e}); skipping {lib}")
        return EXIT_NO_LIBRARY
    if lib == "torch":
        mod.set_num_threads(threads)
        if mod.get_num_threads() != threads:
            say(f"warning: torch runs {mod.get_num_threads()} threads, not {threads}")
    reps, min_time = MATRIX[args.matrix]
    reps, min_time = args.repetitions or reps, args.min_time or min_time
    timer = Timer(reps, min_time)
    with open(args.cases) as f:
        plan = json.load(f)  # written by the parent: our cases and our context
    ours = {name: (fam, keys) for name, (fam, keys) in plan["ours"].items()}
    regime = Regimes(plan["context"])
    filt = re.compile(args.filter) if args.filter else None
    devices = ["cpu"]
    if lib == "torch" and threads == 1 and not args.no_cuda:
        try:
            if mod.cuda.is_available():
                devices.append("cuda:0")
        except Exception:  # noqa: BLE001
            pass
    entries, overhead, context = [], {}, {}
    bend = {}
    # the fixed per-call costs first: a no-op Python call, then 1-element ops
    noop = lambda: None  # noqa: E731
    py_ns = min(r for r, _, _ in timer.run(noop, noop)) * 1e9
    context["sb_python_overhead_ns"] = f"{py_ns:.1f}"
    say(f"{lib} threads:{threads}: a no-op Python call costs {py_ns:.0f} ns")
    cases = []
    for dev in devices:
        be = (TorchBackend if lib == "torch" else NumpyBackend)(dev)
        bend[dev] = be
        cases += overhead_cases(be, dev, threads)
        for c in peer_cases(be, dev, ours, args.matrix, threads):
            if lib == "numpy" and threads > 1 and not c.blas:
                continue  # NumPy's ufuncs and copies run on one thread
            cases.append(c)
    sel = [c for c in cases if c.family == "peers" or not filt or filt.search(c.name)]
    if args.child_filter:  # the parent's own selection (the cudaMalloc child)
        sel = [c for c in sel if re.search(args.child_filter, c.name)]
    # names the scripts would reject never reach the JSON
    bad = []
    for c in sel:
        try:
            sbtables.parse_name(c.name)
        except ValueError as e:
            bad.append((c, e))
    for why in sorted({str(e).split(" (")[0] for _, e in bad}):
        n = sum(str(e).startswith(why) for _, e in bad)
        say(f"{lib} threads:{threads}: {n} cases left out: {why} of "
            "scripts/stridebench/results.py yet")
    sel = [c for c in sel if c not in [b for b, _ in bad]]
    todo = [c for c in sel if c.family != "peers"]
    say(f"{lib} threads:{threads}: {len(todo)} cases")
    k, family, t_cases = 0, None, time.perf_counter()

    def left():  # the mean time per case so far times the cases left
        t = round((time.perf_counter() - t_cases) / max(k, 1) * (len(todo) - k))
        return f"{t // 60}:{t % 60:02d} left"
    for c in sel:
        if c.family != family:  # inputs are shared within a family only
            family = c.family
            POOL.clear()
            gc.collect()
        if c.family != "peers":
            k += 1
        dev = c.keys["device"]
        be = bend[dev]
        t0 = time.perf_counter()
        try:
            w = c.build()
        except Skip as e:
            entries.append({"name": c.name, "run_name": c.name, "run_type": "iteration",
                            "repetitions": 1, "repetition_index": 0, "threads": 1,
                            "iterations": 0, "real_time": 0, "cpu_time": 0,
                            "time_unit": "ns", "error_occurred": True,
                            "error_message": str(e)})
            say(f"[{k}/{len(todo)}] {left()}  {c.name}: not measured: {e}")
            continue
        if isinstance(w, tuple):  # a single timed event (the reuse experiment's steps)
            secs, counters = w[1]
            entries.append(_entry(c.name, 1, 0, 1, secs, secs, None, counters))
            say(f"[{k}/{len(todo)}] {left()}  {c.name}: {_fmt_ns(secs * 1e9)}")
            continue
        samples = timer.run(w.fn, be.sync, warm=not w.warmed)
        med = sorted(r for r, _, _ in samples)[len(samples) // 2] * 1e9
        n = samples[0][2]
        counters = {}
        if w.bytes:
            counters["bytes"] = w.bytes
        if w.flop:
            counters["flop"] = w.flop
        if w.peak is not None:
            counters["peak_alloc_bytes"] = w.peak
        if w.allocs is not None:
            counters["allocs_per_iter"] = w.allocs
        counters.update(w.extra)
        # the regime comes from the CPU's caches: GPU rows get none
        label = f"regime:{regime(w.ws, threads)}" if w.ws and dev == "cpu" else ""
        for i, (r, cpu, iters) in enumerate(samples):
            entries.append(_entry(c.name, len(samples), i, iters, r, cpu, label, counters))
        if c.family == "peers":  # the fixed cost: the least a call took (load only adds)
            med = min(r for r, _, _ in samples) * 1e9
            overhead[(dev, c.keys["style"])] = med
            context[f"sb_{lib}_overhead_{c.keys['style']}_ns"] = f"{med:.1f}"
            say(f"{lib} threads:{threads}: a 1-element {c.keys['style']} add on {dev} "
                f"costs {med:.0f} ns")
        else:
            spread = (max(r for r, _, _ in samples) - min(r for r, _, _ in samples)) / 2 * 1e9
            msg = f"[{k}/{len(todo)}] {left()}  {c.name}: {_fmt_ns(med)} ±{100 * spread / med:.0f}%" \
                f" x{n} ({time.perf_counter() - t0:.1f} s)"
            fixed = overhead.get((dev, w.overhead_style), py_ns)
            if w.check_overhead and args.matrix != "smoke" and fixed > OVERHEAD_LIMIT * med:
                msg += (f"  WARNING: the fixed per-call overhead ({_fmt_ns(fixed)}) is "
                        f"{100 * fixed / med:.1f}% of this case (> 2%)")
            say(msg)
        del w  # reference counting frees its tensors; gc runs between families
    context["sb_peak_alloc_method"] = bend["cpu"].peak_method
    if lib == "torch":
        context["sb_torch_version"] = mod.__version__
        context["sb_torch_threads"] = str(mod.get_num_threads())
        context["sb_gpu_name"] = gpu_name(mod)
        if any(d.startswith("cuda") for d in bend):
            context["sb_torch_tf32"] = "off (matmul and cuDNN)"
        context["sb_torch_bf16_cpu"] = torch_bf16_cpu_path()
        try:
            context["sb_quant_engine"] = mod.backends.quantized.engine
            context["sb_quant_static_reduce_range"] = str(
                mod.backends.quantized.engine == "onednn" and not cpu_has_vnni()).lower()
        except Exception:  # noqa: BLE001
            pass
        try:
            import numpy
            context["sb_numpy_version"] = numpy.__version__
        except Exception:  # noqa: BLE001
            pass
    else:
        context["sb_numpy_version"] = mod.__version__
    doc = {"context": context, "benchmarks": entries}
    with open(args.child_out, "w") as f:
        json.dump(doc, f)
    return 0


def _entry(name, reps, i, iters, real_s, cpu_s, label, counters):
    e = {"name": name, "family_index": 0, "per_family_instance_index": 0,
         "run_name": name, "run_type": "iteration", "repetitions": reps,
         "repetition_index": i, "threads": 1, "iterations": iters,
         "real_time": real_s * 1e9, "cpu_time": cpu_s * 1e9, "time_unit": "ns"}
    if counters.get("bytes"):
        e["bytes_per_second"] = counters["bytes"] / real_s if real_s > 0 else 0.0
    for k, v in counters.items():
        e[k] = float(v)
    if counters.get("flop"):
        e["flops_per_second"] = counters["flop"] / real_s if real_s > 0 else 0.0
    if label:
        e["label"] = label
    return e


def _fmt_ns(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


# ---------------------------------------------------------------- the parent

def gbench_context(args, lib, threads_list, child_ctx, ours_ctx):
    """Google Benchmark's context keys and ours: the machine's from our context (Note
    [Facts from our context]), the run's from this run and its children."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ctx = {k: ours_ctx[k] for k in ("host_name", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled",
                                    "caches", "sb_machine", "sb_cpu_model", "sb_cores",
                                    "sb_caches", "sb_gpu_name") if k in ours_ctx}
    ctx.update({
        "date": now.astimezone().isoformat(timespec="seconds"),
        "executable": f"{sys.executable} {ENTRY}",
        "load_avg": list(os.getloadavg()),
        "library_build_type": "release",
        "sb_threads": ",".join(str(t) for t in threads_list),
        "sb_git_revision": git_revision(),
        "sb_date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sb_matrix": args.matrix,
        "sb_family": f"peers_{lib}",
        "sb_python_version": sys.version.split()[0],
    })
    if args.machine:
        ctx["sb_machine"] = args.machine
    ctx.update({k: v for k, v in child_ctx.items() if k not in ctx})
    if child_ctx.get("sb_gpu_name") and not ctx.get("sb_gpu_name"):
        ctx["sb_gpu_name"] = child_ctx["sb_gpu_name"]
    return ctx


def git_revision():
    try:
        r = subprocess.run(["sh", os.path.join(SCRIPTS, "git_revision"), os.path.dirname(SCRIPTS)],
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip() if r.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parent(args):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    t_start = time.perf_counter()
    libs = [l.strip() for l in args.libs.split(",") if l.strip()]
    for l in libs:
        if l not in LIBS:
            print(f"peers: error: unknown library {l!r} (torch, numpy)", file=sys.stderr)
            return 2
    if args.filter:
        try:
            re.compile(args.filter)
        except re.error as e:
            print(f"peers: error: bad --filter: {e}", file=sys.stderr)
            return 2
    try:  # Note [Cases from our binaries], Note [Facts from our context]
        ours = ours_cases(args.bench_dir, args.matrix)
        ours_ctx = our_context(args.bench_dir, args.context_from or args.out_dir, args.matrix)
    except (OSError, ValueError) as e:
        print(f"peers: error: {e}", file=sys.stderr)
        return 2
    threads_list = args.threads_list or sorted(
        {int(k["threads"]) for _, k in ours.values() if "threads" in k}) or [1]
    say(f"{len(ours)} cases of ours listed by {args.bench_dir}; machine {ours_ctx['sb_machine']}")
    plan_dir = tempfile.TemporaryDirectory()
    plan_file = os.path.join(plan_dir.name, "plan.json")
    with open(plan_file, "w") as f:
        json.dump({"ours": ours, "context": ours_ctx}, f)
    written = 0
    for lib in libs:
        dest = os.path.join(args.out_dir, f"peers_{lib}.json")
        entries, ctx, missing = [], {}, False
        runs = [(th, None) for th in threads_list]
        k = 0
        while k < len(runs):
            th, nocache = runs[k]
            k += 1
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "child.json")
                env = dict(os.environ)
                for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                    env[v] = str(th)
                cmd = [sys.executable, ENTRY, "--child", lib, "--cases", plan_file,
                       "--threads", str(th), "--matrix", args.matrix, "--child-out", out]
                if nocache:  # torch's CUDA allocator without its cache: cudaMalloc/cudaFree
                    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
                    cmd += ["--child-filter", r"^alloc/.*/device:cuda:"]
                if args.filter:
                    cmd += ["--filter", args.filter]
                if args.no_cuda:
                    cmd += ["--no-cuda"]
                if args.repetitions:
                    cmd += ["--repetitions", str(args.repetitions)]
                if args.min_time:
                    cmd += ["--min-time", repr(args.min_time)]
                t0 = time.perf_counter()
                proc = subprocess.Popen(cmd, env=env)
                try:
                    rc = proc.wait()
                except BaseException:  # interrupted or terminated: take the child along
                    proc.terminate()
                    proc.wait()
                    raise
                say(f"{lib} threads:{th}: {time.perf_counter() - t0:.0f} s")
                if rc == EXIT_NO_LIBRARY:
                    missing = True
                    break
                if rc != 0:
                    print(f"peers: error: the {lib} threads:{th} run failed (exit {rc})",
                          file=sys.stderr)
                    return 1
                with open(out) as f:
                    doc = json.load(f)
            if nocache:  # its overhead rows repeat the caching child's
                doc["benchmarks"] = [e for e in doc["benchmarks"]
                                     if not e["name"].startswith("peers/")]
            entries += doc["benchmarks"]
            if lib == "torch" and nocache is None and th == threads_list[0] and \
                    doc["context"].get("sb_gpu_name") and not args.no_cuda:
                runs.append((1, True))
            for key, val in doc["context"].items():
                if nocache:
                    continue
                if key == "sb_python_overhead_ns" or "_overhead_" in key:
                    ctx.setdefault(key, val)  # the first (1-thread) child's
                else:
                    ctx[key] = val
        if missing:
            if os.path.exists(dest):
                os.unlink(dest)
                say(f"removed the stale {dest}")
            continue
        if not any(not e.get("error_occurred") for e in entries):
            say(f"{lib}: no case matched; {dest} not written")
            continue
        for i, e in enumerate(entries):
            e["family_index"] = i
        doc = {"context": gbench_context(args, lib, threads_list, ctx, ours_ctx), "benchmarks": entries}
        sbtables.atomic_write(dest, json.dumps(doc, indent=2) + "\n")
        written += 1
        say(f"wrote {dest} ({len(entries)} entries)")
    if written == 0:
        say("neither torch nor numpy measured anything (not installed for "
            f"{sys.executable}?); no peer rows this time")
    say(f"done in {time.perf_counter() - t_start:.0f} s")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="peers.py", description="The C++ matrix's cases "
                                 "through PyTorch and NumPy, as Google Benchmark JSON.")
    ap.add_argument("--out-dir", help="writes peers_torch.json and peers_numpy.json here")
    ap.add_argument("--matrix", default="quick", choices=sorted(MATRIX))
    ap.add_argument("--filter", help="regex on run names (re.search)")
    ap.add_argument("--bench-dir", help="our benchmark binaries (BUILD/benchmarks): the "
                    "cases and the machine facts come from them")
    ap.add_argument("--context-from", metavar="DIR", help="our JSON whose context names the "
                    "machine (default: --out-dir; else one case of ours is run for it)")
    ap.add_argument("--machine", help="sb_machine slug (default: our binaries' context)")
    ap.add_argument("--libs", default="torch,numpy", help="comma-separated: torch,numpy")
    ap.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--threads-list", type=lambda s: [int(x) for x in s.split(",")],
                    help="thread counts (default: those of our cases)")
    ap.add_argument("--no-cuda", action="store_true", help="CPU cases only")
    ap.add_argument("--repetitions", type=int, help="repetitions per case (default: the matrix's; "
                    "scripts/recheck uses 1 per round)")
    ap.add_argument("--min-time", type=float, help="seconds per repetition (default: the matrix's, "
                    "quick 0.1; scripts/recheck gives both sides the same)")
    ap.add_argument("--child", choices=LIBS, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    ap.add_argument("--cases", help=argparse.SUPPRESS)
    ap.add_argument("--child-filter", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if (args.min_time is not None and not 0 < args.min_time <= 100) or \
            (args.repetitions is not None and args.repetitions < 1):
        ap.error("--min-time must be in (0, 100] seconds and --repetitions >= 1")
    if args.child:
        return child(args)
    if not args.out_dir or not args.bench_dir:
        ap.error("--out-dir and --bench-dir are required")
    return parent(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
