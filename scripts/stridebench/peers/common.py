# peers/common.py — the constants, the message line, the machine facts of our binaries'
# context, the regimes, run names. Part of stridebench.peers (its __init__ says what the
# peer runner does).
import json
import os
import re
import subprocess
import sys
import tempfile

from .. import names  # the run-name vocabulary

SCRIPTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/
ENTRY = os.path.join(SCRIPTS, "peers.py")  # this module's command line (children run it too)
LIBS = ("torch", "numpy")
KEY_ORDER = names.KEYS  # the run-name keys, in order (names.py)
OVERHEAD_LIMIT = 0.02          # fixed per-call overhead must stay below 2% of a case
EXIT_NO_LIBRARY = 3            # a child whose library does not import
BIG_INPUT = 1 << 22            # elements: larger random inputs repeat a random block
BIG_BLOCK = (1 << 20) + 7      # of this many (odd, so rows do not line up)
GB_LIST_TIMEOUT = 60           # seconds for a binary's --benchmark_list_tests
MATRIX = {  # repetitions, min seconds per repetition
    "smoke": (1, 0.002),
    "quick": (5, 0.02),  # ours: bench_common.cpp repetitions(), min_time_s()
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
