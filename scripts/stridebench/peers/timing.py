# peers/timing.py — Google Benchmark's timing discipline in Python (Timer) and a
# measured case (Work, Case, Skip). Part of stridebench.peers (its __init__ says what
# the peer runner does).
import math
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
