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
# `repetitions` (quick 5, full 5, smoke 1) each timing batches with time.perf_counter
# until it has lasted >= min_time (quick 0.02 s, full 0.1 s: the quick window is ours;
# torch.cuda.synchronize before the clock is read on GPU); real_time = time /
# iterations, cpu_time from time.thread_time.
# CUDA rows but the allocator's (class GpuTimer) are timed as ours: device events
# around batches of calls, sampled until the relative standard error of their mean is
# 0.5% (Note [GPU rows stop on their noise]); one entry with the median and counters.
# Python overhead: a no-op Python call and a 1-element op per style are measured in
# every child (peers/op:overhead runs, context sb_python_overhead_ns) and every case
# whose time is below 50x its fixed per-call overhead (overhead >= 2%) gets a warning.
# Families: elementwise, copy, reduce, matmul, conv (torch), quant (torch; numpy f32),
# alloc (M1-M5), transfer (H1, torch CUDA only). NumPy's ufuncs run on one thread,
# so numpy rows exist at threads:1 only, except its BLAS calls (matmul, linear).
# Cost of the harness itself: one Python call per iteration inside the timed loop.
#
# The subpackage: common (constants, machine facts, regimes, run names), timing (Timer,
# Work, Case), backends (torch, numpy), cases and cases_more (the peer twin of each of
# our cases, per family), runner (the child and the parent). The command line is
# scripts/peers.py, or `python3 -m stridebench peers`.
from .backends import NumpyBackend, TorchBackend  # noqa: F401
from .cases import ours_cases, torch_bf16_cpu_path  # noqa: F401
from .cases_more import peer_cases  # noqa: F401
from .common import LIBS, MATRIX, Regimes, our_context, run_name  # noqa: F401
from .runner import child, main, parent  # noqa: F401
from .timing import Timer  # noqa: F401
