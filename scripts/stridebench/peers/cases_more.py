# peers/cases_more.py — the peer twins of alloc (the reuse experiment) and transfer;
# the builders table from family to case, and the overhead cases. Part of
# stridebench.peers (its __init__ says what the peer runner does).
import gc
import os
import re
import time

from .common import host_rss_bytes
from .timing import Case, Work
from .backends import numel
from .cases import QUICK, REUSE_CUDA_SHAPE, conv_case, copy_case, dims, elementwise_case, matmul_case, peer_keys, quant_case, reduce_case

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
