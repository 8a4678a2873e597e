# peers/timing.py — Google Benchmark's timing discipline in Python (Timer) and a
# measured case (Work, Case, Skip). Part of stridebench.peers (its __init__ says what
# the peer runner does).
import math
import statistics
import time

from .common import run_name

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


# ---------------------------------------------------------------- GPU rows

# The stop rule of our GPU rows (benchmarks/gpu_sampling.h, Note [GPU rows stop on their
# noise]) and their batching (Note [Batched GPU timing] in cuda_bench_common.h), so that
# a peer's CUDA row is timed as ours is: device events around K back-to-back calls,
# intervals sampled until the relative standard error of their mean is MAX_RSE.
GPU_RULE = {  # matrix -> (min samples, max seconds of samples), as gpu_stop_rule()
    "smoke": (3, 0.02),
    "quick": (10, 0.5),
    "full": (10, 2.0),
}
MAX_RSE = 0.005
BATCH_SECONDS = 200e-6
MAX_BATCH = 1000
THROTTLE = 0.9  # a sample whose SM clock sat below this x its maximum is left out


def summarize(samples, max_rse=MAX_RSE):
    """samples: [(seconds, throttled)] -> dict(median, rse, spread, kept, throttled,
    steady) over the unthrottled samples, or over all of them when none is."""
    v = sorted(t for t, thr in samples if not thr)
    throttled = sum(1 for _, thr in samples if thr)
    all_throttled = not v
    if all_throttled:
        v = sorted(t for t, _ in samples)
    r = {"median": 0.0, "rse": math.inf, "spread": 0.0, "kept": 0 if all_throttled else len(v),
         "throttled": throttled, "steady": False}
    if not v:
        return r
    n = len(v)
    r["median"] = statistics.median(v)
    mean = statistics.fmean(v)
    if n > 1 and mean > 0:
        r["rse"] = statistics.stdev(v, mean) / (mean * math.sqrt(n))
    r["spread"] = (v[-1] - v[0]) / 2 / r["median"] if r["median"] > 0 else 0.0
    r["steady"] = not all_throttled and r["rse"] <= max_rse
    return r


def sample_until_steady(take, min_samples, max_seconds, max_rse=MAX_RSE, max_samples=100_000):
    """take() -> (seconds, throttled); samples until at least min_samples are kept with a
    relative standard error of their mean <= max_rse, or max_seconds of samples have
    passed (then not steady)."""
    samples, spent, kept, mean, m2 = [], 0.0, 0, 0.0, 0.0
    while len(samples) < max_samples:
        t, thr = take()
        samples.append((t, thr))
        spent += t
        if not thr:  # Welford over the kept samples
            kept += 1
            d = t - mean
            mean += d / kept
            m2 += d * (t - mean)
        if kept >= min_samples and kept > 1 and mean > 0:
            if math.sqrt(m2 / (kept - 1)) / (mean * math.sqrt(kept)) <= max_rse:
                return summarize(samples, max_rse)
        if spent >= max_seconds and len(samples) >= min_samples:
            break
    r = summarize(samples, max_rse)
    r["steady"] = False
    return r


class GpuTimer:
    """Times a CUDA call as our GPU rows are timed. clock() -> (sm MHz, max MHz) or None
    (no NVML: nothing is flagged as throttled)."""

    def __init__(self, torch, matrix, clock=None):
        self.torch, self.clock = torch, clock
        self.min_samples, self.max_seconds = GPU_RULE[matrix]

    def _interval(self, fn, k):
        cuda = self.torch.cuda
        start, stop = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3  # ms -> s

    def _slow(self):
        c = self.clock() if self.clock else None
        return bool(c) and c[1] > 0 and c[0] < THROTTLE * c[1]

    def run(self, fn):
        """-> (summary of summarize(), calls per interval)."""
        fn()
        self.torch.cuda.synchronize()
        once = self._interval(fn, 1)
        k = 1 if once >= BATCH_SECONDS else min(MAX_BATCH, math.ceil(BATCH_SECONDS / max(once, 1e-7)))

        def take():
            before = self._slow()
            t = self._interval(fn, k) / k
            return t, before or self._slow()
        return sample_until_steady(take, self.min_samples, self.max_seconds), k


def nvml_clock():
    """(SM clock MHz, its maximum) of device 0 through pynvml, as our rows read NVML;
    None when pynvml or the driver's NVML is not there."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        top = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
    except Exception:  # noqa: BLE001 - no NVML: no throttle flags
        return None

    def read():
        try:
            return pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM), top
        except Exception:  # noqa: BLE001
            return None
    return read


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
