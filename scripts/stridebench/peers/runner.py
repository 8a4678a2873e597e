# peers/runner.py — the child process (one library, one thread count) and the parent
# that starts the children and merges their JSON. Part of stridebench.peers (its
# __init__ says what the peer runner does).
import argparse
import datetime
import gc
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from .. import results as sbtables  # loading and checking what the tables accept
from .common import BIG_INPUT, ENTRY, EXIT_NO_LIBRARY, LIBS, MATRIX, OVERHEAD_LIMIT, Regimes, SCRIPTS, gpu_name, our_context, say
from .timing import GpuTimer, Skip, Timer, nvml_clock
from .backends import NumpyBackend, POOL, TorchBackend
from .cases import cpu_has_vnni, ours_cases, ours_cases_kept, torch_bf16_cpu_path
from .cases_more import overhead_cases, peer_cases

# ---------------------------------------------------------------- the child

def child(args):
    """Measures one library at one thread count; writes {context, benchmarks} to
    args.child_out. Exit EXIT_NO_LIBRARY when the library does not import. With
    --serve: Note [Peer runner serving the re-check]."""
    st = _child_setup(args)
    if isinstance(st, int):
        return st
    if not args.serve:
        _child_run(st, args.filter, args.child_out)
        return 0
    for line in sys.stdin:  # one request per line: {"filter": REGEX, "out": PATH}
        req = json.loads(line)
        _child_run(st, req["filter"], req["out"])
        print("done", flush=True)
    return 0


class _ChildState:
    """What a child sets up once: the library, its cases, the fixed per-call costs."""


def _child_setup(args):
    st = _ChildState()
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
    devices = ["cpu"]
    if lib == "torch" and threads == 1 and not args.no_cuda:
        try:
            if mod.cuda.is_available():
                devices.append("cuda:0")
        except Exception:  # noqa: BLE001
            pass
    overhead, context = {}, {}
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
    if args.child_filter:  # the parent's own selection (the cudaMalloc child)
        cases = [c for c in cases if c.family == "peers" or re.search(args.child_filter, c.name)]
    # names the scripts would reject never reach the JSON
    bad = []
    for c in cases:
        try:
            sbtables.parse_name(c.name)
        except ValueError as e:
            bad.append((c, e))
    for why in sorted({str(e).split(" (")[0] for _, e in bad}):
        n = sum(str(e).startswith(why) for _, e in bad)
        say(f"{lib} threads:{threads}: {n} cases left out: {why} of "
            "scripts/stridebench/results.py yet")
    st.cases = [c for c in cases if c not in [b for b, _ in bad]]
    st.lib, st.threads, st.mod, st.args, st.timer, st.regime = lib, threads, mod, args, timer, regime
    st.bend, st.py_ns, st.overhead, st.context = bend, py_ns, overhead, context
    st.entries_fixed = []  # the fixed per-call costs' entries, measured once
    st.gpu_timer = None  # made at the first CUDA row (NVML opened then)
    _measure(st, [c for c in st.cases if c.family == "peers"], st.entries_fixed)
    return st


def _child_run(st, filt_text, out_path):
    """Measures the cases whose name filt_text selects (all without one) and writes
    {context, benchmarks} to out_path."""
    filt = re.compile(filt_text) if filt_text else None
    sel = [c for c in st.cases if c.family != "peers" and (not filt or filt.search(c.name))]
    say(f"{st.lib} threads:{st.threads}: {len(sel)} cases")
    entries = list(st.entries_fixed)
    _measure(st, sel, entries)
    doc = {"context": _child_context(st), "benchmarks": entries}
    with open(out_path, "w") as f:
        json.dump(doc, f)


def _measure(st, sel, entries):
    """Runs the cases sel, appending their entries (and, for the fixed per-call costs,
    st.overhead and st.context)."""
    lib, threads, args, timer, regime = st.lib, st.threads, st.args, st.timer, st.regime
    bend, py_ns, overhead, context = st.bend, st.py_ns, st.overhead, st.context
    todo = [c for c in sel if c.family != "peers"]
    k, family, t_cases = 0, None, time.perf_counter()

    def left():  # the mean time per case so far times the cases left
        t = round((time.perf_counter() - t_cases) / max(k, 1) * (len(todo) - k))
        return f"{t // 60}:{t % 60:02d} left"
    for c in sel:
        if c.family != family:  # inputs are shared within a family (and a request) only
            family = c.family
            for key in [k for k, x in POOL.items() if not (args.serve and _numel(x) > BIG_INPUT)]:
                del POOL[key]  # Note [Peer runner serving the re-check]: the large ones stay
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
        if dev.startswith("cuda") and c.family not in HOST_TIMED:
            # timed as our GPU rows are (GpuTimer): one entry, its samples' median and noise
            if st.gpu_timer is None:
                st.gpu_timer = GpuTimer(st.mod, args.matrix, nvml_clock())
            g, k_calls = st.gpu_timer.run(w.fn)
            counters = _counters(w)
            counters.update({"calls_per_interval": k_calls, "samples": g["kept"],
                             "throttled": g["throttled"], "rse_pct": 100 * g["rse"],
                             "spread_pct": 100 * g["spread"], "steady": int(g["steady"])})
            entries.append(_entry(c.name, 1, 0, 1, g["median"], g["median"], "", counters))
            msg = f"[{k}/{len(todo)}] {left()}  {c.name}: {_fmt_ns(g['median'] * 1e9)} " \
                f"±{100 * g['spread']:.0f}% {g['kept']} samples x{k_calls}" \
                f"{'' if g['steady'] else ' (unsteady)'} ({time.perf_counter() - t0:.1f} s)"
            say(msg + _overhead_warning(overhead.get((dev, w.overhead_style), py_ns),
                                        g["median"] * 1e9, w, args.matrix))
            del w
            continue
        samples = timer.run(w.fn, be.sync, warm=not w.warmed)
        med = sorted(r for r, _, _ in samples)[len(samples) // 2] * 1e9
        n = samples[0][2]
        counters = _counters(w)
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
            say(msg + _overhead_warning(overhead.get((dev, w.overhead_style), py_ns), med, w, args.matrix))
        del w  # reference counting frees its tensors; gc runs between families


def _numel(x):
    """Elements of a pooled input (a tensor or an array; 0 for anything else)."""
    n = getattr(x, "numel", None)
    return n() if callable(n) else int(getattr(x, "size", 0) or 0)


def _child_context(st):
    lib, mod, context, bend = st.lib, st.mod, dict(st.context), st.bend
    context["sb_peak_alloc_method"] = bend["cpu"].peak_method
    if lib == "torch":
        context["sb_torch_version"] = mod.__version__
        context["sb_torch_threads"] = str(mod.get_num_threads())
        context["sb_gpu_name"] = gpu_name(mod)
        if any(d.startswith("cuda") for d in bend):
            context["sb_torch_tf32"] = "off (matmul and cuDNN), on for conv2d's tf32 rows"
            try:
                context["sb_torch_cudnn"] = f"{mod.backends.cudnn.version()}, benchmark on"
            except Exception:  # noqa: BLE001
                pass
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
    return context


# Families whose rows of ours are host-timed on the GPU too (bench_alloc_cuda's
# steady_clock), and the fixed per-call costs: host-timed here. Every other CUDA row is
# timed by GpuTimer, as ours.
HOST_TIMED = ("alloc", "peers")


def _overhead_warning(fixed, med, w, matrix):
    """A warning when the fixed per-call cost (ns) is over 2% of the case's time (ns)."""
    if w.check_overhead and matrix != "smoke" and fixed > OVERHEAD_LIMIT * med:
        return (f"  WARNING: the fixed per-call overhead ({_fmt_ns(fixed)}) is "
                f"{100 * fixed / med:.1f}% of this case (> 2%)")
    return ""


def _counters(w):
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
    return counters


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


def _plan(args):
    """The libraries, our cases and context for the children -> (libs, ours_ctx,
    threads_list, plan_dir) or an exit code after the message."""
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
        ours = ours_cases_kept(args.bench_dir, args.matrix, args.ours_list) if args.ours_list \
            else ours_cases(args.bench_dir, args.matrix)
        ours_ctx = our_context(args.bench_dir, args.context_from or args.out_dir, args.matrix)
    except (OSError, ValueError) as e:
        print(f"peers: error: {e}", file=sys.stderr)
        return 2
    threads_list = args.threads_list or sorted(
        {int(k["threads"]) for _, k in ours.values() if "threads" in k}) or [1]
    say(f"{len(ours)} cases of ours listed by {args.bench_dir}; machine {ours_ctx['sb_machine']}")
    plan_dir = tempfile.TemporaryDirectory()
    with open(os.path.join(plan_dir.name, "plan.json"), "w") as f:
        json.dump({"ours": ours, "context": ours_ctx}, f)
    return libs, ours_ctx, threads_list, plan_dir


def _child_cmd(args, lib, th, plan_dir, out=None, nocache=False, filt=None):
    """The command line and environment of the child for lib at th threads."""
    env = dict(os.environ)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[v] = str(th)
    cmd = [sys.executable, ENTRY, "--child", lib, "--cases", os.path.join(plan_dir.name, "plan.json"),
           "--threads", str(th), "--matrix", args.matrix]
    cmd += ["--serve"] if args.serve else ["--child-out", out]
    if nocache:  # torch's CUDA allocator without its cache: cudaMalloc/cudaFree
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        cmd += ["--child-filter", r"^alloc/.*/device:cuda:"]
    if filt:
        cmd += ["--filter", filt]
    if args.no_cuda:
        cmd += ["--no-cuda"]
    if args.repetitions:
        cmd += ["--repetitions", str(args.repetitions)]
    if args.min_time:
        cmd += ["--min-time", repr(args.min_time)]
    return cmd, env


def _merge(doc, nocache, entries, ctx):
    """A child's JSON into one library's entries and context."""
    if nocache:  # its overhead rows repeat the caching child's
        doc["benchmarks"] = [e for e in doc["benchmarks"] if not e["name"].startswith("peers/")]
    entries += doc["benchmarks"]
    for key, val in doc["context"].items():
        if nocache:
            continue
        if key == "sb_python_overhead_ns" or "_overhead_" in key:
            ctx.setdefault(key, val)  # the first (1-thread) child's
        else:
            ctx[key] = val


def _write(args, lib, dest, entries, ctx, threads_list, ours_ctx):
    """One library's file, written atomically -> whether it was written."""
    if not any(not e.get("error_occurred") for e in entries):
        say(f"{lib}: no case matched; {dest} not written")
        return False
    for i, e in enumerate(entries):
        e["family_index"] = i
    doc = {"context": gbench_context(args, lib, threads_list, ctx, ours_ctx), "benchmarks": entries}
    sbtables.atomic_write(dest, json.dumps(doc, indent=2) + "\n")
    say(f"wrote {dest} ({len(entries)} entries)")
    return True


def parent(args):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    t_start = time.perf_counter()
    plan = _plan(args)
    if isinstance(plan, int):
        return plan
    libs, ours_ctx, threads_list, plan_dir = plan
    if args.serve:
        return serve(args, libs, ours_ctx, plan_dir)
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
                cmd, env = _child_cmd(args, lib, th, plan_dir, out, nocache, args.filter)
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
            _merge(doc, nocache, entries, ctx)
            if lib == "torch" and nocache is None and th == threads_list[0] and \
                    doc["context"].get("sb_gpu_name") and not args.no_cuda:
                runs.append((1, True))
        if missing:
            if os.path.exists(dest):
                os.unlink(dest)
                say(f"removed the stale {dest}")
            continue
        written += _write(args, lib, dest, entries, ctx, threads_list, ours_ctx)
    if written == 0:
        say("neither torch nor numpy measured anything (not installed for "
            f"{sys.executable}?); no peer rows this time")
    say(f"done in {time.perf_counter() - t_start:.0f} s")
    return 0


# Note [Peer runner serving the re-check]
# scripts/recheck runs the peers' side of its cases once per round. Started afresh each
# round, the runner paid every round what does not change between rounds: importing the
# library in each child, listing the cases, and measuring the fixed per-call costs. With
# --serve the parent and its children stay up: the parent reads one request per line on
# stdin, {"filter": REGEX, "threads": [N, ...], "out_dir": DIR}, has each child of those
# thread counts (started at the first request that needs it, one per library and thread
# count, as without --serve) measure the cases the filter selects, writes
# DIR/peers_<lib>.json as the runner does, and answers "done" on stdout, or "error: WHY"
# and exits. The inputs of more than BIG_INPUT elements (16 MiB of float32 and up, from
# DRAM) stay in the pool from one request to the next: making them (their page faults)
# was most of a round's set-up (docs/notes/bench.md). Smaller ones are made anew in each
# request, as a fresh runner would: they live in the caches, where their place in memory
# can move a row's time, and ours get a fresh place each round too. EOF on stdin ends
# them all. torch's CUDA allocator rows without its cache (`alloc:cudamalloc`) come from
# a child of their own (PYTORCH_NO_CUDA_MEMORY_CACHING=1, as without --serve): a request
# with "nocache": true starts it (once) and has it measure the filter too.
def _serve_one(children, key, args, plan_dir, filt, nocache, entries, ctx):
    """One request to the child `key` (lib, threads, nocache), started at its first
    request; its rows merged into entries and ctx -> False (and the error line printed)
    when the child failed."""
    lib, th, _ = key
    proc = children.get(key)
    if proc is None:
        cmd, env = _child_cmd(args, lib, th, plan_dir, nocache=nocache)
        proc = children[key] = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "child.json")
        proc.stdin.write(json.dumps({"filter": filt, "out": out}) + "\n")
        proc.stdin.flush()
        if proc.stdout.readline().strip() != "done":
            rc = proc.wait()
            why = "does not import" if rc == EXIT_NO_LIBRARY else f"failed (exit {rc})"
            print(f"error: the {lib} threads:{th}{' (no cache)' if nocache else ''} child {why}", flush=True)
            return False
        with open(out) as f:
            _merge(json.load(f), nocache, entries, ctx)
    return True


def serve(args, libs, ours_ctx, plan_dir):
    children, ended = {}, False
    try:
        for line in sys.stdin:
            req = json.loads(line)
            for lib in libs:
                entries, ctx = [], {}
                threads_list = sorted(req["threads"])
                for th in threads_list:
                    if not _serve_one(children, (lib, th, False), args, plan_dir, req["filter"], False,
                                      entries, ctx):
                        return 1
                if lib == "torch" and req.get("nocache") and not args.no_cuda:
                    if not _serve_one(children, (lib, 1, True), args, plan_dir, req["filter"], True,
                                      entries, ctx):
                        return 1
                _write(args, lib, os.path.join(req["out_dir"], f"peers_{lib}.json"), entries, ctx,
                       threads_list, ours_ctx)
            print("done", flush=True)
        ended = True
    finally:  # at EOF the children end as this does; otherwise they are stopped
        for proc in children.values():
            if proc.poll() is None:
                if ended:
                    proc.stdin.close()
                else:
                    proc.terminate()
                proc.wait()
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
    ap.add_argument("--ours-list", metavar="FILE", help="keep the listing of our cases in FILE "
                    "and reuse it while the binaries are the same (the re-check's rounds)")
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
    ap.add_argument("--serve", action="store_true", help="take requests on stdin, one per line "
                    "(Note [Peer runner serving the re-check]; scripts/recheck's rounds)")
    args = ap.parse_args(argv)
    if (args.min_time is not None and not 0 < args.min_time <= 100) or \
            (args.repetitions is not None and args.repetitions < 1):
        ap.error("--min-time must be in (0, 100] seconds and --repetitions >= 1")
    if args.child:
        return child(args)
    if not args.bench_dir or not (args.out_dir or args.serve):
        ap.error("--out-dir (or --serve) and --bench-dir are required")
    return parent(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
