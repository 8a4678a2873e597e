# test_peers.py: scripts/peers.py, the PyTorch / NumPy peer runner. One smoke run
# (tiny shapes, 1 repetition) is shared by the tests; its JSON must be Google
# Benchmark's schema with names in the vocabulary (sbtables.parse_name), load through
# stridebench.results, mirror the C++ names (bench_copy.cpp, bench_alloc.cpp,
# bench_elementwise.cpp, bench_reduce.cpp), and give the Peers table a ratio next to a
# fixture of ours (tests/fixtures/peers/). Torch-specific
# checks skip with a message when torch does not import for this interpreter; a run
# where neither library imports must exit 0 with a message and write nothing.
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import sbtest

from stridebench import results as sb  # noqa: E402
PEERS = os.path.join(sbtest.SCRIPTS, "peers.py")
FIX = sbtest.fixture("peers", "bench_ours_smoke.json")
MACHINE = "test-machine-2c"
HAVE = {lib: importlib.util.find_spec(lib) is not None for lib in ("torch", "numpy")}


def load_peers_module():
    from stridebench import peers
    return peers


# Our benchmark binaries (the peers' cases and machine facts come from them): meson's
# test sets SB_BUILD_DIR; a build without benchmarks (the sanitizer one) has none, and
# these tests skip there.
def _bench_dir():
    d = os.path.join(os.environ.get("SB_BUILD_DIR", ""), "benchmarks")
    ok = os.environ.get("SB_BUILD_DIR") and os.path.isdir(d) and \
        any(f.startswith("bench_") and os.access(os.path.join(d, f), os.X_OK) for f in os.listdir(d))
    return d if ok else None


BENCH = _bench_dir()
NEED_BENCH = "needs our benchmark binaries: run through `meson test` of a build with benchmarks (SB_BUILD_DIR)"


def run_peers(*args, env=None, timeout=600):
    extra = ["--bench-dir", BENCH] if "--bench-dir" not in args else []
    return subprocess.run([sys.executable, PEERS, *args, *extra], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=timeout)


class SmokeRun(unittest.TestCase):
    """Every test here reads the one smoke run of setUpClass."""

    @classmethod
    def setUpClass(cls):
        if BENCH is None:
            raise unittest.SkipTest(NEED_BENCH)
        if not any(HAVE.values()):
            raise unittest.SkipTest("neither torch nor numpy imports for "
                                    f"{sys.executable}: no peer JSON to check")
        cls.tmp = tempfile.mkdtemp(prefix="sb-peers-")
        cls.out = os.path.join(cls.tmp, "json")
        t0 = time.perf_counter()
        cls.proc = run_peers("--out-dir", cls.out, "--matrix", "smoke", "--machine", MACHINE,
                             "--no-cuda")
        cls.seconds = time.perf_counter() - t0
        if cls.proc.returncode != 0:
            raise AssertionError(f"peers.py failed ({cls.proc.returncode}):\n"
                                 f"{cls.proc.stderr[-4000:]}")
        cls.docs = {}
        for lib in ("torch", "numpy"):
            p = os.path.join(cls.out, f"peers_{lib}.json")
            if HAVE[lib]:
                with open(p) as f:
                    cls.docs[lib] = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_files_per_library(self):
        for lib, have in HAVE.items():
            p = os.path.join(self.out, f"peers_{lib}.json")
            self.assertEqual(os.path.exists(p), have, p)

    def test_context(self):
        for lib, doc in self.docs.items():
            c = doc["context"]
            for k in ("date", "host_name", "executable", "num_cpus", "caches",
                      "library_build_type", "sb_machine", "sb_caches", "sb_matrix",
                      "sb_family", "sb_python_overhead_ns", f"sb_{lib}_version"):
                self.assertIn(k, c, f"{lib}: context lacks {k}")
            self.assertEqual(c["sb_family"], f"peers_{lib}")
            self.assertEqual(c["sb_machine"], MACHINE)  # --machine overrides the slug
            self.assertEqual(c["sb_matrix"], "smoke")
            self.assertGreater(float(c["sb_python_overhead_ns"]), 0)
            self.assertRegex(c["sb_caches"], r"^L1d:\d+,L2:\d+,L[23]:\d+$")
            self.assertIsInstance(c["caches"], list)

    def test_schema_and_names(self):
        for lib, doc in self.docs.items():
            ok = [e for e in doc["benchmarks"] if not e.get("error_occurred")]
            self.assertGreater(len(ok), 20, lib)
            for e in doc["benchmarks"]:
                family, keys = sb.parse_name(e["name"])  # raises outside the vocabulary
                self.assertEqual(e["name"], sb.canonical(family, keys),
                                 "names are canonical: keys in the contract's order")
                self.assertEqual(keys["impl"], lib)
                self.assertEqual(e["run_name"], e["name"])
                self.assertEqual(e["run_type"], "iteration")
                self.assertEqual(e["time_unit"], "ns")
                if e.get("error_occurred"):
                    self.assertTrue(e["error_message"])
                    continue
                self.assertGreaterEqual(e["iterations"], 1)
                self.assertGreater(e["real_time"], 0)
                self.assertGreaterEqual(e["cpu_time"], 0)
                self.assertEqual(e["repetitions"], 1)  # smoke: one repetition
                self.assertIn(e["repetition_index"], range(e["repetitions"]))
                if "bytes" in e:
                    self.assertAlmostEqual(e["bytes_per_second"],
                                           e["bytes"] / e["real_time"] * 1e9,
                                           delta=1e-6 * e["bytes_per_second"])
                if "flop" in e:
                    self.assertAlmostEqual(e["flops_per_second"],
                                           e["flop"] / e["real_time"] * 1e9,
                                           delta=1e-6 * e["flops_per_second"])
                if family not in ("alloc", "transfer", "peers", "quant"):
                    self.assertRegex(e.get("label", ""), r"^regime:(L1|L2|LLC|DRAM)$")

    def test_loads_through_results(self):
        for lib in self.docs:
            ctx, runs, skipped = sb.load_gbench(os.path.join(self.out, f"peers_{lib}.json"))
            self.assertEqual(ctx["sb_family"], f"peers_{lib}")
            self.assertTrue(runs)
            self.assertTrue(all(r.median > 0 for r in runs))

    def names(self, lib):
        return {e["name"] for e in self.docs[lib]["benchmarks"]}

    def test_mirrors_the_cpp_names(self):
        """Names the C++ harness registers at --sb_matrix=smoke (bench_copy.cpp,
        bench_alloc.cpp, bench_elementwise.cpp, bench_reduce.cpp), with the peer's impl."""
        want = [
            "copy/op:contiguous/impl:{}/device:cpu/layout:transposed/style:copy/dtype:f32/shape:64x64/threads:1",
            "copy/op:nchw_to_nhwc/impl:{}/device:cpu/layout:contiguous/style:copy/dtype:f32/shape:2x8x6x6/threads:1",
            "copy/op:permute/impl:{}/device:cpu/layout:contiguous/style:copy/dtype:f32/shape:8x8x8/threads:1",
            "alloc/op:alloc_free/impl:{}/device:cpu/threads:1/alloc:system/size:65536",
            "elementwise/op:add/impl:{}/device:cpu/layout:transposed/style:out/dtype:f32/shape:2x4x8x8/threads:1",
            "elementwise/op:relu/impl:{}/device:cpu/layout:sliced/style:inplace/dtype:f32/shape:2x4x8x8/threads:1",
            "elementwise/op:add/impl:{}/device:cpu/layout:transposed/style:out/dtype:f32/shape:2x4x16x16/threads:1",
            "reduce/op:sum/impl:{}/device:cpu/layout:column_major/dtype:f32/shape:64x48/threads:1/dim:outer",
        ]
        for lib in self.docs:
            for w in want:
                self.assertIn(w.format(lib), self.names(lib))

    def test_elementwise_matrix(self):
        for lib in self.docs:
            got = {sb.parse_name(n)[1].get("layout") + "/" + sb.parse_name(n)[1].get("style")
                   for n in self.names(lib) if n.startswith("elementwise/op:add/")}
            for layout in ("contiguous", "transposed", "sliced", "expanded", "channels_last"):
                for style in ("inplace", "out", "outofplace"):
                    self.assertIn(f"{layout}/{style}", got, lib)

    def test_overhead_rows(self):
        """Three per thread count of our cases (smoke: 1 and 2, as our binaries')."""
        for lib in self.docs:
            rows = [n for n in self.names(lib) if n.startswith("peers/op:overhead/")]
            self.assertEqual(sorted(sb.parse_name(n)[1]["threads"] for n in rows),
                             ["1", "1", "1", "2", "2", "2"], rows)
            self.assertIn("a no-op Python call costs", self.proc.stderr)

    def test_peak_alloc_by_style(self):
        """Out-of-place allocates its result; in-place and out= allocate nothing."""
        n = 2 * 4 * 16 * 16 * 4
        for lib, doc in self.docs.items():
            by = {}
            for e in doc["benchmarks"]:
                if e["name"].startswith("elementwise/op:add/") and \
                        "/layout:contiguous/" in e["name"] and "shape:2x4x16x16/" in e["name"]:
                    by[sb.parse_name(e["name"])[1]["style"]] = e
            self.assertGreaterEqual(by["outofplace"]["peak_alloc_bytes"], n, lib)
            self.assertEqual(by["outofplace"]["allocs_per_iter"], 1, lib)
            for s in ("inplace", "out"):
                self.assertLess(by[s]["peak_alloc_bytes"], 1024, f"{lib} {s}")
                self.assertEqual(by[s]["allocs_per_iter"], 0, f"{lib} {s}")

    def test_peers_table_ratio(self):
        """A fixture of ours (impl:ours, a smoke name) beside the peers' JSON:
        scripts/collect accepts them and the Peers table shows a peer ÷ ours ratio for
        the shared case."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "json")
            shutil.copytree(self.out, out)
            shutil.copy(FIX, out)
            res = os.path.join(tmp, "results")
            c = sbtest.run("collect", "--json-dir", out, "--results", res, "--no-plots")
            self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
            with open(os.path.join(res, MACHINE, "TABLES.md")) as f:
                text = f.read()
        peers = text[text.index("## Peers"):]
        case = "elementwise/op:add/layout:contiguous/style:out/dtype:f32/shape:2x4x16x16/threads:1"
        rows = [l for l in peers.splitlines() if f"| {case} |" in l]
        self.assertEqual(len(rows), len(self.docs), peers[:3000])
        for row in rows:
            cells = [x.strip() for x in row.strip("|").split("|")]
            self.assertIn(cells[0], self.docs)
            self.assertNotEqual(cells[2], "not measured")       # ours, from the fixture
            self.assertRegex(cells[4], r"^\d+(\.\d+)?x$")  # peer ÷ ours time

    def test_numpy_threads(self):
        if "numpy" not in self.docs:
            self.skipTest("numpy does not import")
        for n in self.names("numpy"):  # NumPy's ufuncs and copies run on one thread
            if "/threads:1" not in n:
                self.assertIn(n.split("/")[0], ("matmul", "quant", "peers"), n)

    def test_torch_quant_and_reuse(self):
        if "torch" not in self.docs:
            self.skipTest("torch does not import for this interpreter")
        by = {e["name"]: e for e in self.docs["torch"]["benchmarks"]}
        q = [e for n, e in by.items() if n.startswith("quant/op:linear/")]
        dts = {sb.parse_name(e["name"])[1]["dtype"] for e in q}
        self.assertEqual(dts, {"f32", "f16", "bf16", "int8_dynamic", "int8_static"})
        ctx = self.docs["torch"]["context"]  # which kernels torch's bf16 CPU rows ran
        self.assertIn(ctx["sb_torch_bf16_cpu"], ("onednn", "reference", "unknown"))
        self.assertEqual(ctx["sb_torch_bf16_cpu"], load_peers_module().torch_bf16_cpu_path())
        for e in q:
            if e.get("error_occurred"):
                self.assertIn("not supported", e["error_message"])
                continue
            self.assertGreater(e["weight_bytes"], 0)
            self.assertLess(e["rel_error"], 0.1)
        f32 = next(e for e in q if "/dtype:f32/" in e["name"])
        i8 = next(e for e in q if "/dtype:int8_dynamic/" in e["name"])
        self.assertLess(i8["weight_bytes"], 0.5 * f32["weight_bytes"])
        steps = sorted((int(sb.parse_name(n)[1]["step"]), e) for n, e in by.items()
                       if "/op:reuse_experiment/" in n)
        self.assertEqual([s for s, _ in steps], list(range(10)))
        nbytes = 64 * 1024 * 4
        alloc = {s: e["allocated_bytes"] for s, e in steps}
        self.assertEqual((alloc[0], alloc[1], alloc[2], alloc[3]), (0, nbytes, 2 * nbytes, nbytes))
        for _, e in steps:
            self.assertGreater(e["host_rss_bytes"], 0)
            self.assertIn("reserved_bytes", e)


@unittest.skipIf(BENCH is None, NEED_BENCH)
class NoLibrary(unittest.TestCase):
    def test_skips_with_a_message(self):
        """Neither library imports: exit 0, a message, no file, stale files removed."""
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "fake")
            os.makedirs(fake)
            for lib in ("torch", "numpy"):
                with open(os.path.join(fake, lib + ".py"), "w") as f:
                    f.write(f"raise ImportError('{lib} hidden by test_peers')\n")
            out = os.path.join(tmp, "json")
            os.makedirs(out)
            stale = os.path.join(out, "peers_torch.json")
            with open(stale, "w") as f:
                f.write("{}")
            p = run_peers("--out-dir", out, "--matrix", "smoke",
                          env={"PYTHONPATH": fake}, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("torch does not import", p.stderr)
            self.assertIn("numpy does not import", p.stderr)
            self.assertIn("neither torch nor numpy", p.stderr)
            self.assertEqual(os.listdir(out), [])

    def test_filter(self):
        """--filter keeps the matching runs (and the overhead rows) only."""
        lib = "numpy" if HAVE["numpy"] else "torch" if HAVE["torch"] else None
        if lib is None:
            self.skipTest("neither torch nor numpy imports")
        with tempfile.TemporaryDirectory() as tmp:
            p = run_peers("--out-dir", tmp, "--matrix", "smoke", "--libs", lib, "--no-cuda",
                          "--filter", "^copy/op:permute/", timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(tmp, f"peers_{lib}.json")) as f:
                names = {e["name"] for e in json.load(f)["benchmarks"]}
        self.assertEqual({n.split("/")[0] for n in names}, {"copy", "peers"})
        self.assertEqual(len([n for n in names if n.startswith("copy/")]), 1)

    def test_serve_answers_each_request_as_a_run_would(self):
        """Note [Peer runner serving the re-check]: --serve takes one request per line,
        writes DIR/peers_<lib>.json with the runs the request's filter selects (and the
        overhead rows) at its thread counts, answers "done", and ends at EOF."""
        if BENCH is None:
            self.skipTest(NEED_BENCH)
        lib = "numpy" if HAVE["numpy"] else "torch" if HAVE["torch"] else None
        if lib is None:
            self.skipTest("neither torch nor numpy imports")
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile("w+") as log, subprocess.Popen(
                [sys.executable, PEERS, "--serve", "--bench-dir", BENCH, "--matrix", "smoke", "--libs", lib,
                 "--no-cuda", "--machine", MACHINE, "--repetitions", "1"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True) as proc:
            got = []
            for k, filt in enumerate(["^copy/op:permute/", "^reduce/op:sum/", "^copy/op:permute/"]):
                d = os.path.join(tmp, str(k))
                os.makedirs(d)
                proc.stdin.write(json.dumps({"filter": filt, "threads": [1], "out_dir": d}) + "\n")
                proc.stdin.flush()
                self.assertEqual(proc.stdout.readline().strip(), "done")
                with open(os.path.join(d, f"peers_{lib}.json")) as f:
                    doc = json.load(f)
                names = {e["name"] for e in doc["benchmarks"]}
                self.assertTrue(names, filt)
                self.assertEqual({n.split("/")[0] for n in names}, {filt[1:].split("/")[0], "peers"}, filt)
                self.assertTrue(all(n.startswith("peers/") or n.startswith(filt[1:]) for n in names), names)
                self.assertTrue(all("threads:1" in n for n in names), names)
                self.assertEqual(doc["context"]["sb_family"], f"peers_{lib}")
                got.append(names)
            self.assertEqual(got[0], got[2])
            proc.stdin.close()
            rc = proc.wait(timeout=120)
            log.seek(0)
            self.assertEqual(rc, 0, log.read()[-2000:])

    def test_serve_asks_the_no_cache_child_when_told(self):
        """A request with "nocache" has torch's child without its CUDA cache measure the
        filter too (its `alloc:cudamalloc` rows; none on a machine without a GPU), and
        the answer holds the regular child's rows as before."""
        if BENCH is None:
            self.skipTest(NEED_BENCH)
        if not HAVE["torch"]:
            self.skipTest("torch does not import")
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile("w+") as log, subprocess.Popen(
                [sys.executable, PEERS, "--serve", "--bench-dir", BENCH, "--matrix", "smoke", "--libs", "torch",
                 "--machine", MACHINE, "--repetitions", "1"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True) as proc:
            filt = "^alloc/op:alloc_free/"
            proc.stdin.write(json.dumps({"filter": filt, "threads": [1], "out_dir": tmp, "nocache": True}) + "\n")
            proc.stdin.flush()
            self.assertEqual(proc.stdout.readline().strip(), "done")
            with open(os.path.join(tmp, "peers_torch.json")) as f:
                names = [e["name"] for e in json.load(f)["benchmarks"]]
            self.assertTrue([n for n in names if n.startswith(
                "alloc/op:alloc_free/impl:torch/device:cpu/threads:1/alloc:system/")], names)
            self.assertEqual(len([n for n in names if n.startswith("peers/")]),
                             len({n for n in names if n.startswith("peers/")}))  # not twice
            proc.stdin.close()
            rc = proc.wait(timeout=120)
            log.seek(0)
            text = log.read()
            self.assertEqual(rc, 0, text[-2000:])
            self.assertEqual(text.count("torch threads:1: a no-op Python call"), 2, text[-2000:])

    def test_bad_arguments(self):
        p = run_peers("--out-dir", "/nonexistent-dir-sb", "--filter", "(", timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("bad --filter", p.stderr)
        p = run_peers("--out-dir", "/tmp", "--libs", "jax", timeout=60)
        self.assertEqual(p.returncode, 2)
        with tempfile.TemporaryDirectory() as tmp:
            p = run_peers("--out-dir", tmp, "--bench-dir", tmp, timeout=60)
            self.assertEqual(p.returncode, 2)
            self.assertIn("no bench_* binaries", p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertEqual(os.listdir(tmp), [])


class Units(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = load_peers_module()

    def test_regimes(self):
        # bench_common.cpp's rule: a level holds a working set that fills at most half of
        # it, on the caches of our context
        r = self.m.Regimes({"sb_caches": f"L1d:{48 << 10},L2:{2 << 20},L3:{256 << 20}",
                            "sb_cores": "2"})
        self.assertEqual(r(24 << 10, 1), "L1")
        self.assertEqual(r(32 << 10, 1), "L2")   # fits L1, but fills 2/3 of it
        self.assertEqual(r(48 << 10, 2), "L1")   # private L1 per thread
        self.assertEqual(r(3 << 20, 1), "LLC")
        self.assertEqual(r(2 << 20, 2), "L2")
        self.assertEqual(r(100 << 20, 2), "LLC")
        self.assertEqual(r(200 << 20, 2), "DRAM")  # fits the LLC, but fills 78% of it
        # the AMD EPYC VM: 1 MiB L2, 32 MiB L3
        r = self.m.Regimes({"sb_caches": f"L1d:{32 << 10},L2:{1 << 20},L3:{32 << 20}",
                            "sb_cores": "2"})
        self.assertEqual(r(768 << 10, 1), "LLC")  # three 256 KiB tensors
        self.assertEqual(r(768 << 10, 2), "L2")
        self.assertEqual(r(64 << 20, 1), "DRAM")

    def test_gpu_rows_stop_on_their_noise(self):
        """The peer's CUDA rows follow benchmarks/gpu_sampling.h: at least min_samples
        kept, stop at a relative standard error of 0.5%, throttled samples left out and
        counted, unsteady when the time cap comes first or every sample is throttled."""
        from stridebench.peers import timing
        steady = iter([1.0, 1.001] * 100)
        r = timing.sample_until_steady(lambda: (next(steady) * 1e-4, False), 10, 0.5)
        self.assertTrue(r["steady"])
        self.assertEqual(r["kept"], 10)  # already steady: min_samples decides
        self.assertAlmostEqual(r["median"], 1.0005e-4)
        self.assertLess(r["rse"], 0.005)
        # noisy: +-50% alternating never reaches 0.5% before 0.5 s of samples
        noisy = iter([1.0, 2.0] * 10_000)
        r = timing.sample_until_steady(lambda: (next(noisy) * 1e-3, False), 10, 0.5)
        self.assertFalse(r["steady"])
        self.assertGreaterEqual(r["kept"] * 1.5e-3, 0.5 - 2e-3)
        self.assertAlmostEqual(r["spread"], (2.0 - 1.0) / 2 / 1.5)
        # throttled samples: left out of the median and counted
        seq = iter([(5e-3, True), (1e-4, False)] * 100)
        r = timing.sample_until_steady(lambda: next(seq), 10, 0.5)
        self.assertTrue(r["steady"])
        self.assertEqual((r["kept"], r["throttled"]), (10, 10))
        self.assertEqual(r["median"], 1e-4)
        # every sample throttled: all kept for the median, not steady
        r = timing.summarize([(2e-4, True), (1e-4, True), (3e-4, True)])
        self.assertEqual((r["kept"], r["throttled"], r["median"]), (0, 3, 2e-4))
        self.assertFalse(r["steady"])

    def test_gpu_timer_batches_short_calls_with_events(self):
        """GpuTimer times K back-to-back calls between two events, K from one call timed
        alone (200 µs a batch, at most 1000 calls), and reads the clock around each."""
        from stridebench.peers import timing

        class Clock:  # the device's time: each call of the timed function takes `cost`
            now, cost = 0.0, 3e-6

        class DevEvent:
            def __init__(self, enable_timing):
                assert enable_timing
                self.t = None

            def record(self):
                self.t = Clock.now

            def synchronize(self):
                pass

            def elapsed_time(self, other):  # milliseconds, as torch's
                return (other.t - self.t) * 1e3

        class Cuda:
            Event = DevEvent

            @staticmethod
            def synchronize():
                pass

        class Torch:
            cuda = Cuda

        calls = []

        def fn():
            calls.append(1)
            Clock.now += Clock.cost

        clocks = iter([(1980, 1980), (1000, 1980)] + [(1980, 1980)] * 10_000)
        g, k = timing.GpuTimer(Torch, "quick", lambda: next(clocks)).run(fn)
        self.assertEqual(k, 67)  # ceil(200 µs / 3 µs)
        self.assertAlmostEqual(g["median"], 3e-6)
        self.assertTrue(g["steady"])
        self.assertEqual(g["throttled"], 1)  # the first sample's clock read after it
        self.assertEqual(len(calls), 2 + k * (g["kept"] + g["throttled"]))
        Clock.cost = 1e-3  # long calls: one a batch
        g, k = timing.GpuTimer(Torch, "smoke").run(fn)
        self.assertEqual((k, g["kept"], g["throttled"]), (1, 3, 0))

    def fake_bench(self, tmp, names, name="bench_fake"):
        """A bench dir with one binary that lists `names` as --benchmark_list_tests."""
        d = os.path.join(tmp, "bench")
        os.makedirs(d, exist_ok=True)
        exe = os.path.join(d, name)
        with open(exe, "w") as f:
            f.write("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(names) + "\nEOF\n")
        os.chmod(exe, 0o755)
        return d

    def test_cases_come_from_our_binaries(self):
        """A case our binary lists is built by the peer with no edit in Python, Google
        Benchmark's suffixes dropped; impl:ours only; what a peer cannot do is left out."""
        new = "elementwise/op:add/impl:ours/device:cpu/layout:transposed/style:out/" \
              "dtype:f32/shape:3x5x7x9/threads:1"
        names = [new + "/min_time:0.100/repeats:3/real_time",
                 "elementwise/op:normalize/impl:ours/device:cpu/layout:contiguous/style:inplace/"
                 "dtype:f32/shape:3x5x7x9/threads:1",  # no in-place normalize in the peers
                 "matmul/op:matmul/impl:openblas/device:cpu/layout:contiguous/style:out/"
                 "dtype:f32/shape:8x8x8/threads:1",   # not ours
                 "reduce/op:sum/impl:ours/device:cpu/layout:column_major/dtype:f32/"
                 "shape:6x10/threads:2/dim:outer"]
        with tempfile.TemporaryDirectory() as tmp:
            ours = self.m.ours_cases(self.fake_bench(tmp, names), "quick")
        self.assertEqual(len(ours), 3)
        self.assertIn(new, ours)

        class Be:  # what building a Case's name needs of a backend
            impl, cuda = "numpy", False
        one = [c.name for c in self.m.peer_cases(Be(), "cpu", ours, "full", 1)]
        self.assertEqual(one, [new.replace("impl:ours", "impl:numpy")])
        two = [c.name for c in self.m.peer_cases(Be(), "cpu", ours, "full", 2)]
        self.assertEqual(two, ["reduce/op:sum/impl:numpy/device:cpu/layout:column_major/"
                               "dtype:f32/shape:6x10/threads:2/dim:outer"])
        # at quick, the peers' budget (QUICK) selects: not this shape
        self.assertEqual(self.m.peer_cases(Be(), "cpu", ours, "quick", 1), [])

    def test_bf16_cases_go_to_the_backends_that_take_them(self):
        """A bf16 case is built by a backend whose dtypes hold bf16 (torch), never by
        NumPy (no bfloat16)."""
        names = ["elementwise/op:add/impl:ours/device:cpu/layout:contiguous/style:out/"
                 "dtype:bf16/shape:3x5x7x9/threads:1",
                 "matmul/op:matmul/impl:ours/device:cpu/layout:contiguous/style:out/"
                 "dtype:bf16/shape:8x8x8/threads:1",
                 "reduce/op:sum/impl:ours/device:cpu/layout:contiguous/dtype:bf16/"
                 "shape:6x10/threads:1/dim:inner"]
        with tempfile.TemporaryDirectory() as tmp:
            ours = self.m.ours_cases(self.fake_bench(tmp, names), "quick")

        class Numpy:
            impl, cuda, dtypes = "numpy", False, ("f32",)

        class Torch:
            impl, cuda, dtypes = "torch", False, ("f32", "bf16")
        self.assertEqual(self.m.peer_cases(Numpy(), "cpu", ours, "full", 1), [])
        got = sorted(c.name for c in self.m.peer_cases(Torch(), "cpu", ours, "full", 1))
        self.assertEqual(got, sorted(n.replace("impl:ours", "impl:torch") for n in names))

    def test_conv_cases_per_device_and_precision(self):
        """conv2d rows are rebuilt by torch from the shape key (the 7-number form names
        output channels, kernel and groups): every precision on CUDA, f32 and bf16 on the
        CPU, outofplace only; NumPy takes none."""
        base = "conv/op:conv2d/impl:ours/device:{dev}/layout:channels_last/style:{st}/dtype:{dt}/shape:{sh}/threads:1"
        cuda = [base.format(dev="cuda:0", st="outofplace", dt=dt, sh=sh)
                for dt in ("f32", "tf32", "f16", "bf16") for sh in ("2x8x10x10", "2x16x6x6x8x1x1")]
        cpu = [base.format(dev="cpu", st="outofplace", dt=dt, sh="2x8x10x10") for dt in ("f32", "f16")]
        out = [base.format(dev="cuda:0", st="out", dt="f16", sh="2x8x10x10")]
        with tempfile.TemporaryDirectory() as tmp:
            ours = self.m.ours_cases(self.fake_bench(tmp, cuda + cpu + out), "full")

        class Numpy:
            impl, cuda, dtypes = "numpy", False, ("f32",)

        class Torch:
            impl, cuda, dtypes = "torch", True, ("f32", "bf16")
        self.assertEqual(self.m.peer_cases(Numpy(), "cpu", ours, "full", 1), [])
        got = sorted(c.name for c in self.m.peer_cases(Torch(), "cuda:0", ours, "full", 1))
        self.assertEqual(got, sorted(n.replace("impl:ours", "impl:torch") for n in cuda))
        got = [c.name for c in self.m.peer_cases(Torch(), "cpu", ours, "full", 1)]
        self.assertEqual(got, [cpu[0].replace("impl:ours", "impl:torch")])
        from stridebench.peers import cases
        self.assertEqual(cases.conv_geometry("2x8x10x10"), (2, 8, 10, 10, 8, 3, 1))
        self.assertEqual(cases.conv_geometry("8x256x56x56x64x1x1"), (8, 256, 56, 56, 64, 1, 1))
        self.assertIsNone(cases.conv_geometry("8x256x56"))

    def test_a_name_outside_the_contract_names_the_binary(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = self.fake_bench(tmp, ["elementwise/op:add/impl:ours/device:cpu/colour:red"])
            with self.assertRaises(ValueError) as e:
                self.m.ours_cases(d, "quick")
        self.assertIn("bench_fake", str(e.exception))
        self.assertIn("colour", str(e.exception))

    def test_machine_facts_from_our_context(self):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(sbtest.fixture("machine-a", "bench_copy.json"), tmp)
            ctx = self.m.our_context(tmp, tmp, "quick")
        with open(sbtest.fixture("machine-a", "bench_copy.json")) as f:
            want = json.load(f)["context"]
        self.assertEqual(ctx["sb_machine"], want["sb_machine"])
        self.assertEqual(ctx["sb_caches"], want["sb_caches"])

    def test_our_context_prefers_the_same_matrix(self):
        """Among our JSON files, the context of the peers' own matrix; else the first with
        a machine and its caches; the peers' and re-check files, unreadable JSON and
        contexts without a machine are passed over."""
        with open(sbtest.fixture("machine-a", "bench_copy.json")) as f:
            doc = json.load(f)

        def put(d, name, **ctx):
            with open(os.path.join(d, name), "w") as f:
                json.dump(dict(doc, context=dict(doc["context"], **ctx)), f)
        with tempfile.TemporaryDirectory() as tmp:
            put(tmp, "a_bench.json", sb_matrix="full", sb_machine="m-full")
            put(tmp, "b_bench.json", sb_matrix="quick", sb_machine="m-quick")
            put(tmp, "c_bench.json", sb_matrix="smoke", sb_machine="")  # no machine: passed over
            put(tmp, "peers_torch.json", sb_matrix="smoke", sb_machine="peers")
            with open(os.path.join(tmp, "broken.json"), "w") as f:
                f.write("{")
            self.assertEqual(self.m.our_context(tmp, tmp, "quick")["sb_machine"], "m-quick")
            self.assertEqual(self.m.our_context(tmp, tmp, "full")["sb_machine"], "m-full")
            self.assertEqual(self.m.our_context(tmp, tmp, "smoke")["sb_machine"], "m-full")

    def test_run_name_order(self):
        n = self.m.run_name("reduce", dim="inner", threads=2, op="sum", impl="torch",
                            device="cpu", shape="8x8")
        self.assertEqual(n, "reduce/op:sum/impl:torch/device:cpu/shape:8x8/threads:2/dim:inner")
        with self.assertRaises(AssertionError):
            self.m.run_name("reduce", colour="red")

    def test_timer_repetitions_last_min_time(self):
        calls = [0]

        def f():
            calls[0] += 1
            time.sleep(0.001)
        samples = self.m.Timer(3, 0.02).run(f, lambda: None)
        self.assertEqual(len(samples), 3)
        for real, cpu, iters in samples:
            self.assertGreaterEqual(real * iters, 0.02)
            self.assertGreater(real, 0.0009)
            self.assertLess(cpu, real)  # sleeping costs no CPU time
        self.assertGreaterEqual(calls[0], sum(i for _, _, i in samples) + 1)

    def test_timer_keeps_a_search_batch_that_lasted_min_time(self):
        """A call longer than min_time: the iteration search stops at one call, and that
        batch is the first repetition, as in Google Benchmark; each other repetition is one
        call too. Calls: the warm-up, then one per repetition."""
        calls = [0]

        def f():
            calls[0] += 1
            time.sleep(0.03)
        samples = self.m.Timer(3, 0.02).run(f, lambda: None)
        self.assertEqual([i for _, _, i in samples], [1, 1, 1])
        self.assertEqual(calls[0], 1 + 3)
        for real, _, _ in samples:
            self.assertGreaterEqual(real, 0.03)


if __name__ == "__main__":
    unittest.main()
