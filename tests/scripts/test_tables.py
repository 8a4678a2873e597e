# test_tables.py: scripts/stridebench/results.py (names, loading, medians, ceilings, atomic
# writes) and scripts/tables (TABLES.md content, claim verdicts, bad input), on the
# fixture JSON of tests/fixtures (see make_fixtures.py for the numbers).
import json
import os
import shutil
import re
import tempfile
import unittest

import sbtest
from stridebench import results as sb
from stridebench import summary

ADD = "elementwise/op:add/impl:ours/device:cpu/layout:{}/style:{}/dtype:f32/shape:4096x4096/threads:8"
MATMUL = "matmul/op:matmul/impl:ours/device:cpu/layout:{}/style:out/dtype:f32/shape:1024x1024/threads:8"
TORCH_ADD = "elementwise/op:add/impl:torch/device:cpu/layout:contiguous/style:{}/dtype:f32/shape:4096x4096/threads:8"


def claims(text):
    """{claim ID: (figure, verdict)} from the Claims table of a TABLES.md."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\| ([LSPMHV]\d) \|", line)
        if m:
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            out[m.group(1)] = (cells[3], cells[4])
    return out


class NameTest(unittest.TestCase):
    def test_parses_and_strips_gbench_segments(self):
        fam, keys = sb.parse_name(
            "alloc/op:reuse_experiment/impl:torch/device:cuda:0/dtype:f32/"
            "shape:256x1024x1024/step:3/repeats:3/manual_time")
        self.assertEqual(fam, "alloc")
        self.assertEqual(keys, {"op": "reuse_experiment", "impl": "torch",
                                "device": "cuda:0", "dtype": "f32",
                                "shape": "256x1024x1024", "step": "3"})
        self.assertEqual(sb.canonical(fam, keys), "alloc/op:reuse_experiment/impl:torch/"
                         "device:cuda:0/dtype:f32/shape:256x1024x1024/step:3")

    def test_rejects_names_outside_the_vocabulary(self):
        for name, why in (
                ("elementwize/op:add/device:cpu", "unknown family"),
                ("elementwise/op:add/device:cpu/layout:diagonal", "layout 'diagonal'"),
                ("elementwise/op:plus/device:cpu", "op 'plus'"),
                ("elementwise/op:add/device:cpu/layuot:transposed", "unknown key"),
                ("elementwise/op:add/device:cpu/dtype:f32/layout:sliced", "out of order"),
                ("elementwise/op:add/device:cpu/shape:4096by4096", "shape"),
                ("elementwise/op:add/layout:sliced", "no device"),
                ("elementwise/op:add/device:cpu/threads:4/threads:8", "twice")):
            with self.subTest(name=name):
                with self.assertRaisesRegex(ValueError, why):
                    sb.parse_name(name)


class LoadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rs = sb.load_results(sbtest.fixture("machine-a", "bench_elementwise.json"))
        cls.all = sb.load_results(sbtest.results_dir(tempfile.mkdtemp()))

    def test_median_and_spread_over_iteration_entries(self):
        r = self.rs.runs[ADD.format("transposed", "out")]
        self.assertEqual(len(r.samples), 3)  # the 4 aggregates are not samples
        self.assertAlmostEqual(r.median, 17.742e6, delta=1)  # ms -> ns
        self.assertAlmostEqual(r.spread, (1.04 - 0.98) / 2, places=9)
        self.assertEqual(r.counters["bytes"], 3 * 4096 * 4096 * 4)
        self.assertEqual(r.regime, "DRAM")

    def test_gpu_row_sampled_inside_one_iteration(self):
        """A GPU row of one iteration (Note [GPU rows stop on their noise]): its spread is
        the spread_pct counter over its own samples, not None for lack of repetitions."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench_matmul.json")
            shutil.copy(sbtest.fixture("machine-a", "bench_matmul.json"), path)

            def one(doc):
                cuda = [e for e in doc["benchmarks"] if "device:cuda" in e["name"]
                        and e.get("run_type") == "iteration"][:1]
                cuda[0].update(repetitions=1, repetition_index=0, spread_pct=1.5, samples=17, rse_pct=0.3)
                doc["benchmarks"] = cuda
            sbtest.edit(path, one)
            (r,) = sb.load_results(path).runs.values()
            self.assertEqual(len(r.samples), 1)
            self.assertAlmostEqual(r.spread, 0.015)
            self.assertEqual(r.counters["samples"], 17)
            self.assertIn("±2%", sb.fmt_tm(r))
            self.assertNotIn("unsteady", sb.fmt_tm(r))  # no steady counter: an older row
            r.counters["steady"] = 0
            self.assertTrue(sb.fmt_tm(r).endswith("±2% (unsteady)"))

    def test_aggregates_only_and_time_units(self):
        view = self.all.runs["views/op:view/impl:ours/device:cpu/layout:contiguous/"
                             "style:view/dtype:f32/shape:4096x4096/threads:8"]
        self.assertTrue(view.from_aggregate)
        self.assertAlmostEqual(view.median, 21.0, places=6)
        self.assertEqual(sb.fmt_tm(view), "21.0 ns ±?")
        s = self.all.runs["reduce/op:sum/impl:ours/device:cpu/layout:contiguous/dtype:f32/"
                          "shape:4096x4096/threads:8/dim:outer"]  # written in us
        self.assertAlmostEqual(s.median, 3.3e6, delta=1e-3)

    def test_ceilings(self):
        r = self.all.runs[ADD.format("transposed", "out")]
        base, top, pct = sb.ceiling(self.all, r)
        self.assertEqual((base["op"], base.regime), ("add", "DRAM"))
        self.assertAlmostEqual(top, 20.0, places=6)
        self.assertAlmostEqual(pct, 100 * 3 * 4096 * 4096 * 4 / 17.742e6 / 20, places=6)
        mm = self.all.runs[MATMUL.format("sliced")]
        self.assertEqual(sb.ceiling(self.all, mm)[0]["op"], "fma_peak")
        self.assertAlmostEqual(sb.ceiling(self.all, mm)[2], 100 * 2 * 1024**3 / 16e6 / 500)
        gpu = [r for r in self.all.runs.values() if r["op"] == "matmul"
               and r["device"] == "cuda:0"][0]
        self.assertEqual(sb.ceiling(self.all, gpu)[0]["op"], "gemm_peak")
        r.keys["threads"] = "3"  # no baseline row with 3 threads: no ceiling
        try:
            self.assertIsNone(sb.ceiling(self.all, r))
        finally:
            r.keys["threads"] = "8"

    def test_gpu_rows_take_the_ceiling_of_their_own_mix(self):
        """Issue #50: a GPU row is held to the best STREAM kernel of its read:write mix
        (add, triad for a binary op; read for a reduction; copy, scale or cudaMemcpy for a
        copy), falling back to d2d_copy in results without those rows."""
        res = sbtest.results_dir(tempfile.mkdtemp())
        ew, base = os.path.join(res, "raw", "bench_elementwise.json"), os.path.join(res, "raw", "bench_baseline.json")
        cpu_add = ADD.format("contiguous", "out")
        gpu_add = cpu_add.replace("device:cpu", "device:cuda:0").replace("threads:8", "threads:1")
        sbtest.add_twins(ew, lambda n: n.startswith(cpu_add + "/"), {"device:cpu": "device:cuda:0", "threads:8": "threads:1"})
        rs = sb.load_results(res)
        self.assertEqual(sb.ceiling(rs, rs.runs[gpu_add])[0]["op"], "d2d_copy")  # nothing else there
        d2d = "baseline/op:d2d_copy/impl:ours/device:cuda:0/dtype:f32/shape:268435456"

        def stream_row(op, speed):  # d2d_copy's twin as `op`, `speed` times its rate
            sbtest.add_twins(base, lambda n: n.startswith(d2d + "/"), {"op:d2d_copy": "op:" + op},
                             scale={"real_time": 1 / speed})
        stream_row("add", 1.02)
        stream_row("triad", 1.05)
        stream_row("copy", 1.5)  # another mix: never an add row's ceiling
        stream_row("read", 2.0)
        rs = sb.load_results(res)
        c = sb.ceiling(rs, rs.runs[gpu_add])
        self.assertEqual(c[0]["op"], "triad")
        self.assertAlmostEqual(c[1], rs.runs[d2d].gbps() * 1.05, places=6)
        contiguous = [r for r in rs.runs.values() if r.family == "copy" and r["device"] == "cpu"][0]
        self.assertEqual(sb.ceiling_kind(contiguous)[0], (("copy", "copy_nt"),))  # the CPU rule stands

    def test_dram_ceiling_is_the_largest_baseline_of_the_regime(self):
        # A 32 MiB L3 labels the 8 Mi-element baseline DRAM too, and part of it hits the
        # L3: among several DRAM rows the largest is the ceiling; in a cache regime the
        # size nearest the row's bytes is, even where a smaller size runs faster (a 2 MiB
        # L2 per core keeps a 4 MiB "LLC" baseline on 2 threads in the L2s).
        res = sbtest.results_dir(tempfile.mkdtemp())
        big = "baseline/op:add/impl:ours/device:cpu/dtype:f32/shape:33554432/threads:8"
        llc = "baseline/op:add/impl:ours/device:cpu/dtype:f32/shape:1048576/threads:8"

        def twin(e, old, new, speed):  # the run at another size, `speed` times the rate
            k = int(new) / int(old)
            f = dict(e, name=e["name"].replace(old, new), real_time=e["real_time"] * k / speed)
            if "run_name" in e:
                f["run_name"] = e["run_name"].replace(old, new)
            for c in ("bytes", "flop"):
                if c in e:
                    f[c] = e[c] * k
            return f

        def add_rows(doc):
            extra = []
            for e in doc["benchmarks"]:
                n = e.get("run_name") or e["name"]
                if n.startswith(big + "/"):  # an 8 Mi-element twin, DRAM, 1.5x the rate
                    extra.append(twin(e, "33554432", "8388608", 1.5))
                if n.startswith(llc + "/"):  # a second LLC size, 1.2x the rate, and a third in the L2s, 2x
                    extra.append(twin(e, "1048576", "2097152", 1.2))
                    extra.append(twin(e, "1048576", "262144", 2.0))
            doc["benchmarks"] += extra
        sbtest.edit(os.path.join(res, "raw", "bench_baseline.json"), add_rows)
        rs = sb.load_results(res)
        twin8 = rs.runs[big.replace("33554432", "8388608")]
        self.assertAlmostEqual(twin8.gbps() / rs.runs[big].gbps(), 1.5, places=6)
        r = rs.runs[ADD.format("transposed", "out")]
        base, top, _ = sb.ceiling(rs, r)
        self.assertEqual((base["shape"], base.regime), ("33554432", "DRAM"))
        self.assertAlmostEqual(top, 20.0, places=6)
        fast = rs.runs[llc.replace("1048576", "262144")]
        self.assertAlmostEqual(fast.gbps() / rs.runs[llc].gbps(), 2.0, places=6)
        r.regime = "LLC"  # the same row as if it fitted the LLC: the LLC size nearest its 192 MiB
        rs._ceilings = {}
        bytes_ = r.counters["bytes"]
        try:
            base, top, pct = sb.ceiling(rs, r)
            self.assertEqual(base["shape"], "2097152")
            self.assertAlmostEqual(top, rs.runs[llc.replace("1048576", "2097152")].gbps(), places=6)
            self.assertAlmostEqual(pct, 100 * r.gbps() / top, places=6)
            # a row of the small size's bytes (3 MiB) is held to the small size; one
            # between 1048576 (12 MiB) and 2097152 (24 MiB) to the nearer by ratio
            for row_bytes, want in ((3 * 262144 * 4, "262144"), (14 * 2**20, "1048576"), (20 * 2**20, "2097152")):
                r.counters["bytes"] = row_bytes
                self.assertEqual(sb.ceiling(rs, r)[0]["shape"], want, row_bytes)
        finally:
            r.regime = "DRAM"
            r.counters["bytes"] = bytes_

    def test_cache_rows_take_the_nearest_cache_size_across_the_label(self):
        # The half-capacity rule labels a working set just over half the L2 (a 512x256
        # float32 sum: 512 KiB read plus its 2 KiB result, on a 1 MiB L2) LLC, while the
        # ladder's 512 KiB read is labelled L2; held only to LLC-labelled sizes that row
        # took the 4 MiB one, at less than half the L2's rate, and read 114% of it. A cache
        # row takes the cache size nearest its bytes whatever its label; never a DRAM one.
        res = sbtest.results_dir(tempfile.mkdtemp())
        llc = "baseline/op:add/impl:ours/device:cpu/dtype:f32/shape:1048576/threads:8"  # 12 MiB, LLC
        path = os.path.join(res, "raw", "bench_baseline.json")

        def relabel(doc, old, new):
            for e in doc["benchmarks"]:
                if (e.get("run_name") or e["name"]).startswith(old + "/") and e.get("label"):
                    e["label"] = new
        # 3 MiB, labelled L2, 2.5x the LLC size's rate
        sbtest.add_twins(path, lambda n: n.startswith(llc + "/"), {"shape:1048576": "shape:262144"},
                         scale={"real_time": 1 / 4 / 2.5, "bytes": 1 / 4})
        sbtest.edit(path, lambda doc: relabel(doc, llc.replace("1048576", "262144"), "regime:L2"))
        rs = sb.load_results(res)
        small, big = rs.runs[llc.replace("1048576", "262144")], rs.runs[llc]
        self.assertEqual((small.regime, big.regime), ("L2", "LLC"))
        self.assertAlmostEqual(small.gbps() / big.gbps(), 2.5, places=6)
        r = rs.runs[ADD.format("transposed", "out")]
        regime, bytes_ = r.regime, r.counters["bytes"]
        try:
            for label, row_bytes, want in (("LLC", 3.2 * 2**20, "262144"),  # nearer the L2-labelled size
                                           ("LLC", 9 * 2**20, "1048576"),
                                           ("L2", 11 * 2**20, "1048576"),   # nearer the LLC-labelled one
                                           ("LLC", 300 * 2**20, "1048576")):  # not the 384 MiB DRAM row
                r.regime, r.counters["bytes"] = label, row_bytes
                rs._ceilings = {}
                base, top, pct = sb.ceiling(rs, r)
                self.assertEqual(base["shape"], want, (label, row_bytes))
                self.assertAlmostEqual(pct, 100 * r.gbps() / top, places=6)
        finally:
            r.regime, r.counters["bytes"] = regime, bytes_

    def test_ceilings_of_up_to_a_rows_threads(self):
        # Note [Ceilings of up to a row's threads]: a row of T threads is held to the best
        # baseline of any thread count up to T (a 2-thread copy of an L2-size buffer ran
        # at half the 1-thread rate on a 2-vCPU VM), and a 1-thread row never to a
        # baseline of more threads.
        res = sbtest.results_dir(tempfile.mkdtemp())
        big = "baseline/op:add/impl:ours/device:cpu/dtype:f32/shape:33554432/threads:8"
        path = os.path.join(res, "raw", "bench_baseline.json")
        # the same size on 1 thread at twice the 8-thread rate; on 16 threads at 4 times
        sbtest.add_twins(path, lambda n: n.startswith(big + "/"), {"threads:8": "threads:1"}, scale={"real_time": 0.5})
        sbtest.add_twins(path, lambda n: n.startswith(big + "/"), {"threads:8": "threads:16"}, scale={"real_time": 0.25})
        ew = os.path.join(res, "raw", "bench_elementwise.json")
        row = ADD.format("transposed", "out")
        sbtest.add_twins(ew, lambda n: n.startswith(row + "/"), {"threads:8": "threads:1"})
        rs = sb.load_results(res)
        one, eight = rs.runs[big.replace("threads:8", "threads:1")], rs.runs[big]
        self.assertAlmostEqual(one.gbps() / eight.gbps(), 2.0, places=6)
        base, top, pct = sb.ceiling(rs, rs.runs[row])
        self.assertEqual(base["threads"], "1")
        self.assertAlmostEqual(top, one.gbps(), places=6)
        base1, top1, _ = sb.ceiling(rs, rs.runs[row.replace("threads:8", "threads:1")])
        self.assertEqual((base1["threads"], top1), ("1", one.gbps()))  # not the 16-thread one

    def test_streaming_twin_is_the_ceiling_when_faster(self):
        # copy_nt / add_nt: the same access pattern with streaming stores; the ceiling of a
        # copy or add row is the faster of the pair (in-place rows keep their own)
        big = "baseline/op:add/impl:ours/device:cpu/dtype:f32/shape:33554432/threads:8"
        for speed, want in ((1.3, "add_nt"), (0.8, "add")):
            with self.subTest(speed=speed):
                res = sbtest.results_dir(tempfile.mkdtemp())

                def add_twin(doc):
                    extra = []
                    for e in doc["benchmarks"]:
                        if (e.get("run_name") or e["name"]).startswith(big + "/"):
                            f = dict(e, name=e["name"].replace("op:add/", "op:add_nt/"), real_time=e["real_time"] / speed)
                            if "run_name" in e:
                                f["run_name"] = e["run_name"].replace("op:add/", "op:add_nt/")
                            extra.append(f)
                    doc["benchmarks"] += extra
                sbtest.edit(os.path.join(res, "raw", "bench_baseline.json"), add_twin)
                rs = sb.load_results(res)
                base, top, _ = sb.ceiling(rs, rs.runs[ADD.format("transposed", "out")])
                self.assertEqual((base["op"], base.regime), (want, "DRAM"))
                self.assertAlmostEqual(top, 20.0 * max(speed, 1.0), places=6)
                inplace = rs.runs[ADD.format("contiguous", "inplace")]
                self.assertEqual(sb.ceiling(rs, inplace)[0]["op"], "add_inplace")

    def test_inplace_rows_use_the_inplace_baselines(self):
        T = 4096 * 4096 * 4
        relu = ADD.replace("op:add", "op:relu")
        want = {ADD.format("contiguous", "inplace"): ("add_inplace", 3 * T / 10.5e6 / 30),
                relu.format("contiguous", "inplace"): ("scale_inplace", 2 * T / 6.8e6 / 28),
                ADD.format("contiguous", "out"): ("add", 3 * T / 11e6 / 20),
                ADD.format("contiguous", "outofplace"): ("add", 3 * T / 12.1e6 / 20),
                relu.format("contiguous", "out"): ("copy", 2 * T / 7e6 / 20)}
        for name, (op, frac) in want.items():
            with self.subTest(name=name):
                base, _, pct = sb.ceiling(self.all, self.all.runs[name])
                self.assertEqual((base["op"], base.regime), (op, "DRAM"))
                self.assertAlmostEqual(pct, 100 * frac, places=6)
        # peers' in-place rows too; results from before the in-place baselines fall back
        torch = self.all.runs[TORCH_ADD.format("inplace")]
        self.assertEqual(sb.ceiling(self.all, torch)[0]["op"], "add_inplace")
        tmp = tempfile.mkdtemp()
        res = sbtest.results_dir(tmp)

        def drop(doc):
            doc["benchmarks"] = [e for e in doc["benchmarks"] if "_inplace/" not in e["name"]]
        sbtest.edit(os.path.join(res, "raw", "bench_baseline.json"), drop)
        old = sb.load_results(res)
        self.assertEqual(sb.ceiling(old, old.runs[ADD.format("contiguous", "inplace")])[0]["op"], "add")
        self.assertEqual(sb.ceiling(old, old.runs[relu.format("contiguous", "inplace")])[0]["op"], "copy")

    def test_reductions_use_the_read_ceiling(self):
        # sum, mean, max and var read their input and write a result thousands of times
        # smaller: every one is held to the machine's read rate, not to a copy's, whose
        # bytes count a write too (mean, max and var were once held to copy / copy_nt)
        res = sbtest.results_dir(tempfile.mkdtemp())
        row = ("reduce/op:sum/impl:ours/device:cpu/layout:contiguous/dtype:f32/shape:4096x4096/"
               "threads:8/dim:outer")

        def add_ops(doc):
            extra = []
            for e in doc["benchmarks"]:
                if (e.get("run_name") or e["name"]).startswith(row + "/"):
                    for op in ("mean", "max", "var"):
                        f = dict(e, name=e["name"].replace("op:sum/", f"op:{op}/"))
                        if "run_name" in e:
                            f["run_name"] = e["run_name"].replace("op:sum/", f"op:{op}/")
                        extra.append(f)
            doc["benchmarks"] += extra
        sbtest.edit(os.path.join(res, "raw", "bench_reduce.json"), add_ops)
        rs = sb.load_results(res)
        read = rs.runs["baseline/op:read/impl:ours/device:cpu/dtype:f32/shape:33554432/threads:8"]
        for op in ("sum", "mean", "max", "var"):
            with self.subTest(op=op):
                r = rs.runs[row.replace("op:sum/", f"op:{op}/")]
                base, top, pct = sb.ceiling(rs, r)
                self.assertEqual((base["op"], base.regime), ("read", "DRAM"))
                self.assertAlmostEqual(pct, 100 * r.gbps() / read.gbps(), places=6)

    def test_int8_rows_use_the_int8_peak_and_nothing_else_does(self):
        tmp = tempfile.mkdtemp()
        res = sbtest.results_dir(tmp)
        path = os.path.join(res, "raw", "bench_baseline.json")

        # an int8 peak 4x the float32 one
        self.assertTrue(sbtest.add_twins(path, lambda n: "/op:fma_peak/" in n, {"dtype:f32": "dtype:i8"},
                                         {"flop": 4, "flops_per_second": 4}))
        rs = sb.load_results(res)
        quant = [r for r in rs.runs.values() if r["op"] == "linear" and r["device"] == "cpu"
                 and r["impl"] == "ours"]
        by = {r["dtype"]: sb.ceiling(rs, r)[0]["dtype"] for r in quant}
        self.assertEqual(by["int8_dynamic"], "i8")
        self.assertEqual(by["int8_static"], "i8")
        self.assertEqual(by["f32"], "f32")
        self.assertEqual(by["f16"], "f32")  # never the (higher) int8 peak

    def test_int8_rows_have_no_ceiling_without_an_int8_peak(self):
        """A CPU without an int8 multiply-add chain (no AVX2: an Arm build) registers no
        int8 peak row; its int8 rows then have no ceiling, never the float32 peak."""
        tmp = tempfile.mkdtemp()
        res = sbtest.results_dir(tmp)
        rs = sb.load_results(res)
        self.assertFalse([r for r in rs.select("baseline") if r["op"] == "fma_peak" and r["dtype"] == "i8"])
        quant = [r for r in rs.runs.values() if r["op"] == "linear" and r["device"] == "cpu"
                 and r["impl"] == "ours"]
        by = {r["dtype"]: sb.ceiling(rs, r) for r in quant}
        self.assertIsNone(by["int8_dynamic"])
        self.assertIsNone(by["int8_static"])
        self.assertEqual(by["f32"][0]["dtype"], "f32")

    def test_bf16_rows_use_the_bf16_peak_where_measured_else_the_f32_one(self):
        """A bf16 matmul row is held to the bf16 dot-product peak when the run has one
        (a CPU with AVX512_BF16), else to the float32 FMA peak (its GEMM then runs the
        float32 kernels)."""
        tmp = tempfile.mkdtemp()
        res = sbtest.results_dir(tmp)
        mm = os.path.join(res, "raw", "bench_matmul.json")

        # a bf16 twin of every contiguous out= matmul row of ours
        self.assertTrue(sbtest.add_twins(
            mm, lambda n: "impl:ours" in n and "/layout:contiguous/style:out/" in n, {"dtype:f32": "dtype:bf16"}))
        rs = sb.load_results(res)
        bf = [r for r in rs.runs.values() if r["op"] == "matmul" and r["dtype"] == "bf16"
              and r["device"] == "cpu"]
        self.assertTrue(bf)
        self.assertEqual({sb.ceiling(rs, r)[0]["dtype"] for r in bf}, {"f32"})
        base = os.path.join(res, "raw", "bench_baseline.json")

        # a bf16 peak twice the float32 one
        sbtest.add_twins(base, lambda n: "/op:fma_peak/" in n and "dtype:f32" in n, {"dtype:f32": "dtype:bf16"},
                         {"flop": 2, "flops_per_second": 2})
        rs = sb.load_results(res)
        for r in [r for r in rs.runs.values() if r["op"] == "matmul" and r["dtype"] == "bf16"
                  and r["device"] == "cpu"]:
            b, _, pct = sb.ceiling(rs, r)
            self.assertEqual(b["dtype"], "bf16")
            self.assertAlmostEqual(pct, 0.5 * sb.ceiling(rs, rs.like(r, dtype="f32"))[2], places=6)
        # the Summary's ceilings give the bf16 peak beside the float32 one, "—" where none ran
        ceil = summary._ceiling_rows(rs, "cpu")  # [device, threads, copy, read, f32, bf16, int8]
        self.assertTrue(ceil)
        for row in ceil:
            self.assertNotIn(row[5], ("—", row[4]))
        fresh = sb.load_results(sbtest.results_dir(tempfile.mkdtemp()))
        self.assertEqual({row[5] for row in summary._ceiling_rows(fresh, "cpu")}, {"—"})

    def test_run_checks_flag_contradicting_baselines(self):
        self.assertEqual(sb.run_checks(self.all), [])  # the fixture machine was quiet
        tmp = tempfile.mkdtemp()
        res = sbtest.results_dir(tmp)
        path = os.path.join(res, "raw", "bench_baseline.json")

        def fn(doc):  # a 1-thread FLOP peak half the 8-thread one; an LLC copy 10x slower
            extra = []
            for e in doc["benchmarks"]:
                if "/op:fma_peak/" in e["name"] and "dtype:f32" in e["name"]:
                    c = json.loads(json.dumps(e))
                    for k in ("name", "run_name"):
                        if k in c:
                            c[k] = c[k].replace("threads:8", "threads:1")
                    c["real_time"] *= 2
                    if "flops_per_second" in c:
                        c["flops_per_second"] /= 2
                    extra.append(c)
                if "/op:copy/" in e["name"] and e.get("label") == "regime:LLC":
                    e["real_time"] *= 10
                    if "bytes_per_second" in e:
                        e["bytes_per_second"] /= 10
            self.assertTrue(extra)
            doc["benchmarks"] += extra
        sbtest.edit(path, fn)
        checks = sb.run_checks(sb.load_results(res))
        self.assertEqual(len(checks), 2, checks)
        self.assertIn("8-thread FLOP peak is only 2.00x", checks[0])
        self.assertIn("LLC `copy` ceiling with 8 thread(s)", checks[1])
        p = sbtest.run("tables", res)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(res, "TABLES.md")) as f:
            text = f.read()
        self.assertIn("- `cpu`: the 8-thread FLOP peak is only 2.00x", text)

    def _one_thread_twin(self, row, f):
        """An edit for sbtest.edit: the 8-thread run `row`'s twin on 1 thread at f times its
        time (its stale rate counter dropped), in place of every 1-thread run before it."""
        def fn(doc):
            doc["benchmarks"] = [e for e in doc["benchmarks"] if "threads:1/" not in (e.get("run_name") or e["name"]) + "/"]
            extra = []
            for e in doc["benchmarks"]:
                if (e.get("run_name") or e["name"]).startswith(row + "/"):
                    c = json.loads(json.dumps(e))
                    for k in ("name", "run_name"):
                        if k in c:
                            c[k] = c[k].replace("threads:8", "threads:1")
                    c["real_time"] *= f
                    c.pop("bytes_per_second", None)
                    extra.append(c)
            self.assertTrue(extra)
            doc["benchmarks"] += extra
        return fn

    def _check_one_thread_twins(self, file, row, flagged, quiet, message):
        """The run checks of a result whose `row` has a 1-thread twin at `flagged` times its
        time (one check: message, then the row and its ratio) and at `quiet` times (none)."""
        res = sbtest.results_dir(tempfile.mkdtemp())
        path = os.path.join(res, "raw", file)
        sbtest.edit(path, self._one_thread_twin(row, flagged))
        checks = sb.run_checks(sb.load_results(res))
        self.assertEqual(len(checks), 1, checks)
        self.assertIn(message, checks[0])
        self.assertIn(f"`{row}` {max(flagged, 1 / flagged):.2f}x", checks[0])
        sbtest.edit(path, self._one_thread_twin(row, quiet))
        self.assertEqual(sb.run_checks(sb.load_results(res)), [])

    def test_run_checks_flag_contended_compute_rows(self):
        # a 1-thread twin of an 8-thread matmul row that is only 2x slower: 8 threads ran
        # 2x (< 0.65 x 8): the other cores were busy; 6x (0.75 N) is not flagged
        self._check_one_thread_twins(
            "bench_matmul.json",
            "matmul/op:matmul/impl:ours/device:cpu/layout:contiguous/style:out/dtype:f32/shape:1024x1024/threads:8",
            2, 6, "1 of our compute rows ran less than 0.65 N times as fast on N threads")

    def test_run_checks_flag_memory_rows_slower_on_more_threads(self):
        # a 1-thread twin of an 8-thread add at half its time: 8 threads took 2x the
        # 1-thread time, so a core was busy; at 0.8x (1.25x) it is not flagged
        self._check_one_thread_twins(
            "bench_elementwise.json",
            "elementwise/op:add/impl:ours/device:cpu/layout:contiguous/style:out/dtype:f32/shape:4096x4096/threads:8",
            0.5, 0.8, "1 of our memory-bound rows took over 1.5x their 1-thread time on N threads")

    def _scale_row(self, row, f, rate_key):
        """An edit for sbtest.edit: the run `row`'s times x f, its stale rate counter dropped."""
        def fn(doc):
            hit = [e for e in doc["benchmarks"] if (e.get("run_name") or e["name"]).startswith(row + "/")]
            self.assertTrue(hit)
            for e in hit:
                e["real_time"] *= f
                e.pop(rate_key, None)
        return fn

    def test_run_checks_flag_memory_rows_faster_than_the_memory(self):
        # our 4096^2 add out= (192 MiB moved, 91.6% of the DRAM add ceiling) at half its time:
        # 183%, faster than the memory the baseline measured
        res = sbtest.results_dir(tempfile.mkdtemp())
        row = "elementwise/op:add/impl:ours/device:cpu/layout:contiguous/style:out/dtype:f32/shape:4096x4096/threads:8"
        path = os.path.join(res, "raw", "bench_elementwise.json")

        def scale(f):
            return self._scale_row(row, f, "bytes_per_second")
        sbtest.edit(path, scale(0.5))
        # with the fixture's 30 MiB L3, 192 MiB is under 8x the cache: part of it could be cached
        self.assertEqual(sb.run_checks(sb.load_results(res)), [])

        def small_llc(doc):
            doc["context"]["sb_caches"] = "L1d:49152,L2:2097152,L3:16777216"
        for f in os.listdir(os.path.join(res, "raw")):
            if f.startswith("bench_"):
                sbtest.edit(os.path.join(res, "raw", f), small_llc)
        checks = sb.run_checks(sb.load_results(res))
        self.assertEqual(len(checks), 1, checks)
        self.assertIn("1 of our memory-bound rows moving at least 8x the last-level cache read above 130% "
                      f"of their DRAM ceiling (`{row}` 183%)", checks[0])
        sbtest.edit(path, scale(1.6))  # 115%: within what two moments of one memory give
        self.assertEqual(sb.run_checks(sb.load_results(res)), [])

    def test_run_checks_flag_compute_rows_above_the_peak(self):
        # our 8-thread matmul row at a third of its time: above the run's FMA peak, which
        # then read low (no kernel runs faster than the hardware)
        res = sbtest.results_dir(tempfile.mkdtemp())
        row = "matmul/op:matmul/impl:ours/device:cpu/layout:contiguous/style:out/dtype:f32/shape:1024x1024/threads:8"
        path = os.path.join(res, "raw", "bench_matmul.json")
        base = sb.load_results(res)
        pct = sb.ceiling(base, next(r for r in base.select(impl="ours") if r.name == row))[2]

        def scale(f):
            return self._scale_row(row, f, "flops_per_second")
        f = pct / 150.0  # the row at 150% of the peak
        sbtest.edit(path, scale(f))
        checks = sb.run_checks(sb.load_results(res))
        self.assertEqual(len(checks), 1, checks)
        self.assertIn("1 of our compute rows read above 105% of the FLOP peak measured in this run "
                      f"(`{row}` 150%)", checks[0])
        sbtest.edit(path, scale(150.0 / 103.0))  # 103%: within two moments of one core
        self.assertEqual(sb.run_checks(sb.load_results(res)), [])

    def test_duplicate_run_across_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = sbtest.results_dir(tmp)
            os.link(os.path.join(d, "raw", "bench_matmul.json"),
                    os.path.join(d, "raw", "bench_matmul2.json"))
            with self.assertRaisesRegex(sb.InputError, "also in"):
                sb.load_results(d)

    def test_atomic_write_keeps_old_file_on_failure(self):
        with tempfile.TemporaryDirectory() as tmp:
            p = os.path.join(tmp, "TABLES.md")
            sb.atomic_write(p, "old\n")
            with self.assertRaises(TypeError):
                sb.atomic_write(p, None)
            with open(p) as f:
                self.assertEqual(f.read(), "old\n")
            self.assertEqual(os.listdir(tmp), ["TABLES.md"])  # no temp file left


class TablesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.res = sbtest.results_dir(self.tmp.name)
        self.raw = os.path.join(self.res, "raw")

    def render(self):
        p = sbtest.run("tables", self.res)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.res, "TABLES.md"), encoding="utf-8") as f:
            return f.read()

    def test_gpu_sampling_line(self):
        """The Machine and method section counts the GPU rows sampled to their noise, the
        unsteady ones and the throttled samples, with the clocks and temperatures seen."""
        self.assertNotIn("GPU rows sampled to their noise", self.render())  # none here yet

        def fn(doc):
            names = []
            for e in doc["benchmarks"]:
                if "device:cuda" not in e["name"]:
                    continue
                n = e.get("run_name", e["name"])
                if n not in names:
                    names.append(n)
                i = names.index(n)
                e.update(samples=12, steady=0 if i == 0 else 1, throttled=2, sm_clock_mhz=1755 + i, temp_c=50 + i)
        sbtest.edit(os.path.join(self.raw, "bench_matmul.json"), fn)
        line = next(l for l in self.render().splitlines() if l.startswith("GPU rows sampled to their noise"))
        self.assertRegex(line, r"^GPU rows sampled to their noise: \d+, of which 1 unsteady; \d+ samples left out "
                               r"as throttled \(SM clock below 90% of its maximum\); SM clock after the rows "
                               r"1755-\d+ MHz, temperature 50-\d+ °C\.$")

    def test_reuse_experiments_of_two_allocators_stay_apart(self):
        # a second allocator's experiment (reserved == allocated, as cudaMalloc direct
        # gives) must get its own table, not overwrite the caching one's steps
        def fn(doc):
            extra = []
            for e in doc["benchmarks"]:
                if "op:reuse_experiment/impl:ours/" in e["name"]:
                    c = json.loads(json.dumps(e))
                    for k in ("name", "run_name"):
                        if k in c:
                            c[k] = c[k].replace("/step:", "/alloc:cudamalloc/step:")
                    if "allocated_bytes" in c:
                        c["reserved_bytes"] = c["allocated_bytes"]
                    extra.append(c)
            self.assertTrue(extra)
            doc["benchmarks"] += extra
        sbtest.edit(os.path.join(self.raw, "bench_alloc.json"), fn)
        text = self.render()
        self.assertIn("(`impl:ours`), allocator state after each step", text)
        self.assertIn("(`impl:ours`, `alloc:cudamalloc`), allocator state after each step", text)
        self.assertIn("| 5 | c = zeros again | 2.00 GiB | 3.00 GiB | 1.00 GiB |", text)
        self.assertIn("| 5 | c = zeros again | 2.00 GiB | 2.00 GiB | 1.00 GiB |", text)

    def test_every_table_and_the_layout_ratio(self):
        text = self.render()
        for title in ("Memory layout", "In-place vs out-of-place", "Precision and "
                      "quantization", "Precision of memory-bound rows", "Channels-last", "Views vs copies", "Allocator",
                      "Host to device", "Roofline", "Claims", "Peers"):
            self.assertIn(f"\n## {title}\n", text)
        self.assertIn("half the range", text)  # the spread is defined in the header
        # transposed add: 17.742 ms vs 11.0 ms contiguous, 57% of the 20 GB/s DRAM add
        row = [l for l in text.splitlines()
               if l.startswith("| add | transposed | f32 | 4096x4096 | 8 | out |")]
        self.assertEqual(len(row), 1)
        self.assertIn("| 11.0 ms ±3% | 17.7 ms ±3% | 1.61x | — | 0.62x | 57% |", row[0])
        self.assertIn("transposed add runs at 0.62x the contiguous rate (1.61x its time)",
                      text)
        # the fixture has no int8 peak row: int8 rows take no ceiling, never the f32 peak
        self.assertIn("| ours | linear | — | 64x4096x4096 | 8 | int8_dynamic | 8.00 ms ±3% | "
                      "2.50x | 16.0 MiB | 25% | 8.0e-03 | — |", text)
        self.assertIn("| conv2d | f32 | 32x64x56x56 | 8 | out | 60.0 ms ±3% | 45.0 ms ±3% "
                      "| 1.33x | 3.00 ms ±3% | 1 |", text)
        self.assertIn("| 5 | c = zeros again | 2.00 GiB | 3.00 GiB | 1.00 GiB |", text)
        self.assertIn("| ours | h2d | 64.0 MiB | 5.59 ms ±3% | 12.0 GB/s | 2.80 ms ±3% | "
                      "24.0 GB/s | 2.00x |", text)
        # the roofline's reading: ours and the peers apart, each extreme named with its impl
        # (the two int8 rows have no int8 peak in the fixture: no ceiling)
        self.assertIn("Reading: our 29 kernel rows reach a median 73% of their ceiling (lowest 21%: linear "
                      "f32 64x4096x4096 8 threads; highest 99%: contiguous relu out f32 32x64x56x56 8 threads); "
                      "peers' 4 kernel rows reach a median 79% of their ceiling (lowest 62%: torch contiguous "
                      "add inplace f32 4096x4096 8 threads; highest 93%: torch contiguous relu outofplace f32 "
                      "4096x4096 8 threads); 2 rows have no matching baseline row.", text)

    def test_machine_table_names_the_openblas_environment(self):
        """OPENBLAS_* variables that bench_matmul ran under are in the machine table: they
        choose the kernels and blocking of OpenBLAS's rows and of NumPy's and PyTorch's GEMMs."""
        self.assertNotIn("| openblas_env |", self.render())
        sbtest.edit(os.path.join(self.raw, "bench_matmul.json"), lambda d: d["context"].update(
            sb_openblas_core="Haswell", sb_openblas_env="OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512"))
        text = self.render()
        self.assertIn("| openblas_core | Haswell |", text)
        self.assertIn("| openblas_env | OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512 |", text)

    def test_views_table_names_the_threads(self):
        # a 1-thread twin of a views row: the two rows differ by their threads column
        def add_one_thread(doc):
            extra = []
            for e in doc["benchmarks"]:
                if "op:view/" in e["name"]:
                    e2 = dict(e)
                    for k in ("name", "run_name"):
                        if k in e2:
                            e2[k] = e2[k].replace("threads:8", "threads:1")
                    extra.append(e2)
            doc["benchmarks"].extend(extra)
        sbtest.edit(os.path.join(self.raw, "bench_views.json"), add_one_thread)
        views = self.render().split("\n## Views vs copies\n")[1].split("\n## ")[0]
        self.assertIn("| impl | op | layout | dtype | shape | threads | style |", views)
        rows = [l for l in views.splitlines() if l.startswith("| ours | view | contiguous | f32 | 4096x4096 |")]
        self.assertEqual(sorted(r.split(" | ")[5] for r in rows), ["1", "8"])

    def test_layout_row_without_a_contiguous_twin_is_shown_without_ratios(self):
        twin = "elementwise/op:add/impl:ours/device:cpu/layout:contiguous/style:out/dtype:f32/shape:4096x4096/threads:8"
        sbtest.edit(os.path.join(self.raw, "bench_elementwise.json"), lambda d: d.update(benchmarks=[
            e for e in d["benchmarks"] if not (e.get("run_name") or e["name"]).startswith(twin + "/")]))
        text = self.render()
        row = [l for l in text.splitlines() if l.startswith("| add | transposed | f32 | 4096x4096 | 8 | out |")]
        self.assertEqual(len(row), 1)
        self.assertIn("| out | not measured | 17.7 ms ±3% | — | — | — | 57% |", row[0])
        self.assertNotIn("transposed add runs at", text)

    def test_channels_last_conversion_of_the_same_threads_and_no_gemm_row(self):
        # A 1-thread conversion row (sorted first) must not stand in for the 8-thread
        # one; the conv family's GEMM reference row (op:matmul) has no NHWC twin and
        # stays out of the Channels-last table.
        def add_rows(doc):
            extra = []
            for e in doc["benchmarks"]:
                if "nchw_to_nhwc" in e["name"] and "threads:8" in e["name"]:
                    e1 = dict(e)
                    for k in ("name", "run_name"):
                        e1[k] = e[k].replace("threads:8", "threads:1")
                    e1["real_time"] = e["real_time"] * 10
                    extra.append(e1)
            doc["benchmarks"] = extra + doc["benchmarks"]
        sbtest.edit(os.path.join(self.raw, "bench_copy.json"), add_rows)

        def add_gemm(doc):
            e = dict(doc["benchmarks"][0])
            for k in ("name", "run_name"):
                e[k] = e[k].replace("op:conv2d", "op:matmul").replace(
                    "shape:32x64x56x56", "shape:100352x576x64")
            doc["benchmarks"].append(e)
        sbtest.edit(os.path.join(self.raw, "bench_conv.json"), add_gemm)
        text = self.render()
        self.assertIn("| conv2d | f32 | 32x64x56x56 | 8 | out | 60.0 ms ±3% | 45.0 ms ±3% "
                      "| 1.33x | 3.00 ms ±3% | 1 |", text)
        cl = text.split("\n## Channels-last\n")[1].split("\n## Views vs copies\n")[0]
        self.assertNotIn("| matmul |", cl)

    def test_claim_verdicts(self):
        c = claims(self.render())
        self.assertEqual(len(c), 23)
        expect = {
            "L1": "holds for the sliced layout, not for the transposed layout", "L2": "not measured",
            "L3": "does not hold", "L4": "holds", "L5": "holds",
            "L6": "holds for the contiguous layout, not for the column_major layout",
            "L7": "holds: views allocate nothing; contiguous() and clone() allocate", "S1": "holds",
            "S2": "holds for relu or matmul, not for add", "S3": "holds",
            "P1": "holds", "P2": "holds", "P3": "does not hold", "M1": "holds",
            "M2": "holds", "M3": "holds", "M4": "holds",
            "M5": "holds (caching wins from 64.0 KiB)",
            "H1": "holds from 64.0 MiB up, not below",
            "V1": "holds", "V2": "holds", "V3": "holds", "V4": "holds"}
        self.assertEqual({k: v for k, (_, v) in c.items()}, expect)
        self.assertEqual(c["L3"][0], "transposed 1.61x, sliced 1.20x")
        self.assertTrue(c["S1"][0].startswith("torch rows: "))
        self.assertIn("add 1.06x, relu 1.04x", c["S1"][0])
        self.assertTrue(c["M1"][0].startswith("torch rows on cuda:0"))

    def test_claims_mark_noisy_cases(self):
        """L3's transposed add pair with its row's last repetition 3x the others (a
        first-pass spread over ±10%, never re-checked): the figure marks that case, the
        verdict counts it, and the verdict's kind (the Claims reading) is unchanged."""
        text = self.render()
        before = claims(text)["L3"]
        tally = next(l for l in text.splitlines() if l.startswith("Reading: holds"))
        row = ADD.format("transposed", "out")
        self.assertEqual(sbtest.stall_last(os.path.join(self.raw, "bench_elementwise.json"), row), 3)
        text = self.render()
        self.assertEqual(claims(text)["L3"], ("transposed 1.61x (noisy), sliced 1.20x",
                                              before[1] + " (1 of 2 cases noisy)"))
        self.assertIn(tally, text)
        self.assertIn(f"**L3** elementwise ops run at the same speed contiguous or not: {before[1]} (1 of 2 cases noisy).",
                      text)

    def test_summary_on_one_screen(self):
        """The answer first: machine and ceilings, per family the costliest layout and
        style, one line per claim, the peers; short enough for one screen."""
        text = self.render()
        self.assertEqual(text.split("\n## ")[1].split("\n")[0], "Summary")
        summ = text.split("\n## Summary\n")[1].split("\n## ")[0]
        self.assertLessEqual(len(summ.strip().splitlines()), 60, summ)
        self.assertIn("8 cores", summ)
        self.assertIn("| device | threads | copy GB/s | read GB/s | f32 peak | bf16 peak | int8 peak |", summ)
        self.assertRegex(summ, r"\| elementwise \(cpu\) \| add transposed 4096x4096, 8 thr \| 0\.62x \| 57% \|")
        self.assertIn("| matmul (cuda:0) | matmul transposed 4096x4096 | 0.99x |", summ)
        self.assertEqual(len(re.findall(r"^- \*\*[LSPMHV]\d\*\* ", summ, re.M)), 23)
        c = claims(text)
        for cid, (_, v) in c.items():  # the summary says what the Claims table says
            self.assertIn(f"**{cid}**", summ)
            self.assertIn(f": {v}.", summ)
        self.assertIn("Peers ([Peers](#peers)): torch on `cpu`: ", summ)

    def test_l7_reshape_of_a_transposed_tensor_copies_as_pytorch_says(self):
        views = os.path.join(self.raw, "bench_views.json")

        def transposed_reshape(doc):
            for e in doc["benchmarks"]:
                if e["name"].startswith("views/op:reshape/"):
                    for k in ("name", "run_name"):
                        e[k] = e[k].replace("layout:contiguous/style:view", "layout:transposed/style:copy")
                    e["peak_alloc_bytes"] = 64.0 * 2**20
        sbtest.edit(views, transposed_reshape)
        self.assertEqual(claims(self.render())["L7"][1],
                         "holds as PyTorch defines it: views allocate nothing; reshape of a transposed "
                         "tensor copies, as PyTorch's rule says; contiguous() and clone() allocate")

    def test_verdicts_flip_with_the_numbers(self):
        ew = os.path.join(self.raw, "bench_elementwise.json")
        sbtest.scale_time(ew, ADD.format("transposed", "out"), 11.5 / 17.742)
        sbtest.scale_time(ew, ADD.format("sliced", "out"), 11.5 / 13.2)
        sbtest.scale_time(os.path.join(self.raw, "bench_quant.json"),
                          "quant/op:linear/impl:ours/device:cpu/dtype:f16/"
                          "shape:64x4096x4096/threads:8", 10.0 / 12.0)
        sbtest.scale_time(os.path.join(self.raw, "peer_torch.json"),
                          TORCH_ADD.format("outofplace"), 1.5)
        sbtest.scale_time(os.path.join(self.raw, "bench_matmul.json"),
                          MATMUL.format("sliced"), 10.1 / 16.0)
        sbtest.edit(os.path.join(self.raw, "semantics.json"),
                    lambda d: d.update(V4=False))
        c = claims(self.render())
        self.assertEqual(c["L3"], ("transposed 1.05x, sliced 1.05x", "holds"))
        self.assertEqual(c["P3"][1], "holds")
        self.assertEqual(c["S1"][1], "holds for relu, not for add")
        self.assertEqual(c["L1"][1], "does not hold")
        self.assertEqual(c["V4"], ("semantic check failed", "does not hold"))

    def test_precision_table_and_p3_show_bf16_beside_f16(self):
        """bf16 quant rows sit beside f16 in the Precision table, and P3's line shows
        them without letting them decide the fp16 claim."""
        quant = os.path.join(self.raw, "bench_quant.json")
        before = claims(self.render())["P3"]
        # bf16 twins of the f16 rows, 1.25x the f16 time
        self.assertTrue(sbtest.add_twins(quant, lambda n: "/dtype:f16/" in n, {"dtype:f16": "dtype:bf16"},
                                         {"real_time": 1.25, "cpu_time": 1.25}))
        text = self.render()
        table = text[text.index("## Precision and quantization"):]
        table = table[:table.index("\n## ", 5)]
        rows = [l for l in table.splitlines() if l.startswith("| ours |")]
        dts = [l.split("|")[6].strip() for l in rows]  # impl, op, layout, shape, threads, dtype
        self.assertIn("bf16", dts)
        self.assertEqual(dts.index("bf16"), dts.index("f16") + 1, dts)  # beside f16
        after = claims(text)["P3"]
        self.assertEqual(after[1], before[1])  # the verdict is fp16's alone
        self.assertIn("bf16 (not judged):", after[0])

    def _bf16_add_twins(self):
        """bf16 twins of ours f32 add out= rows, half the bytes: the contiguous one in half
        the time, the transposed one in 0.8x. Returns the elementwise file's path."""
        ew = os.path.join(self.raw, "bench_elementwise.json")
        for layout, t in (("contiguous", 0.5), ("transposed", 0.8)):
            self.assertTrue(sbtest.add_twins(
                ew, lambda n, l=layout: f"op:add/impl:ours/device:cpu/layout:{l}/style:out/dtype:f32/" in n,
                {"dtype:f32": "dtype:bf16"}, {"real_time": t, "cpu_time": t, "bytes": 0.5}))
        return ew

    @staticmethod
    def _precision_add_rows(text):
        """The Precision of memory-bound rows section of `text`, and its add rows by layout."""
        sec = text[text.index("## Precision of memory-bound rows"):]
        sec = sec[:sec.index("\n## ", 5)]
        return sec, {l.split("|")[2].strip(): l for l in sec.splitlines() if l.startswith("| add |")}

    def test_precision_of_memory_bound_rows(self):
        """bf16 twins of ours f32 adds, half the bytes: the contiguous one in half the
        time (the same % of its ceiling), the transposed one in 0.8x (behind by 3/8 of
        f32's 57%). The table gives each pair's points and time ratio; the reading counts
        them and names the furthest behind."""
        self._bf16_add_twins()
        text = self.render()
        sec, rows = self._precision_add_rows(text)
        self.assertEqual(set(rows), {"contiguous", "transposed"}, sec)
        self.assertIn("| 57% | bf16 |", rows["transposed"])
        self.assertIn("| 35% | -21 | 0.80x |", rows["transposed"])
        self.assertIn("| +0 | 0.50x |", rows["contiguous"])
        self.assertIn("bf16: 1 of 2 rows within 5 points of float32's % of ceiling and 0 ahead by more; "
                      "furthest behind: transposed add out 4096x4096 8 threads, 35% against 57%", sec)
        # a run without 16-bit rows says so
        res = sbtest.results_dir(self.tmp.name, name="plain")
        p = sbtest.run("tables", res)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(res, "TABLES.md"), encoding="utf-8") as f:
            self.assertIn("## Precision of memory-bound rows\n\nNot measured: no `elementwise`, `copy` or "
                          "`reduce` rows of ours in float32 and a 16-bit dtype.", f.read())

    def test_precision_of_memory_bound_rows_take_the_interleaved_ratio(self):
        """A pair the re-check measured alternating: the transposed bf16 add at 0.8x its
        twin's time in the first pass, 0.5x interleaved. Its points come from the
        interleaved ratio (35% x 0.8 / 0.5 = 57%: level with f32's 57%), the row shows
        that ratio with its range, and the reading counts it within 5 points, saying
        how many pairs it read that way."""
        self._bf16_add_twins()
        twin = "elementwise/op:add/impl:ours/device:cpu/layout:transposed/style:out/dtype:{}/shape:4096x4096/threads:8"
        case = {"a": twin.format("f32"), "b": twin.format("bf16"), "pick": "precision", "first_pass": 0.8,
                "rounds": [{"a_ns": 100.0, "b_ns": b, "first": f} for b, f in ((48.0, "a"), (50.0, "b"), (53.0, "a"))],
                "ratio": {"median": 0.5, "min": 0.48, "max": 0.53}, "se": 0.03, "settled": "noise"}
        with open(os.path.join(self.raw, "recheck.json"), "w") as f:
            json.dump({"context": {"sb_matrix": "quick", "selection": "picks", "precision": True}, "cases": [case]}, f)
        text = self.render()
        sec, rows = self._precision_add_rows(text)
        self.assertIn("| 35% | +0 | 0.80x | 0.50x [0.48x–0.53x] |", rows["transposed"])
        self.assertIn("| +0 | 0.50x | — |", rows["contiguous"])
        self.assertIn("bf16: 2 of 2 rows within 5 points of float32's % of ceiling and 0 ahead by more "
                      "(1 of them by their interleaved time ratio)", sec)
        self.assertIn("pick: precision", text[text.index("## Interleaved re-check"):])

    def test_precision_of_memory_bound_rows_leaves_out_rows_faster_than_the_memory(self):
        """A pair whose float32 row the run checks found faster than the memory (it and
        the baseline saw two bandwidths) is shown marked and is neither counted nor
        named furthest behind, as a 2-thread DRAM add on a shared VM once was."""
        ew = self._bf16_add_twins()

        def small_llc(doc):  # 192 MiB is then 12x the last-level cache; the bf16 twin's 96 MiB is 6x
            doc["context"]["sb_caches"] = "L1d:49152,L2:2097152,L3:16777216"
        for f in os.listdir(self.raw):
            if f.startswith("bench_"):
                sbtest.edit(os.path.join(self.raw, f), small_llc)
        row = "elementwise/op:add/impl:ours/device:cpu/layout:contiguous/style:out/dtype:f32/shape:4096x4096/threads:8"
        sbtest.edit(ew, lambda doc: [e.update(real_time=e["real_time"] * 0.5) or e.pop("bytes_per_second", None)
                                     for e in doc["benchmarks"] if (e.get("run_name") or e["name"]).startswith(row + "/")])
        text = self.render()
        self.assertIn(f"`{row}` 183%", text)  # the run check names it
        sec, rows = self._precision_add_rows(text)
        self.assertIn("| 183% | bf16 |", rows["contiguous"])
        self.assertIn("| -92 (run check) | 1.00x |", rows["contiguous"])
        self.assertIn("| -21 | 0.80x |", rows["transposed"])
        self.assertIn("bf16: 0 of 1 rows within 5 points of float32's % of ceiling and 0 ahead by more; "
                      "furthest behind: transposed add out 4096x4096 8 threads, 35% against 57%; 1 more marked "
                      "(run check) and not counted", sec)

    def test_precision_of_memory_bound_rows_leaves_out_rows_slowed_by_a_busy_core(self):
        """A pair whose bf16 row took 2x its 1-thread twin's time on 8 threads (a busy
        core, by the run checks) is shown marked and not counted either."""
        ew = self._bf16_add_twins()
        self.assertTrue(sbtest.add_twins(
            ew, lambda n: "op:add/impl:ours/device:cpu/layout:transposed/style:out/dtype:bf16/" in n,
            {"threads:8": "threads:1"}, {"real_time": 0.5, "cpu_time": 0.5}))
        text = self.render()
        sec, rows = self._precision_add_rows(text)
        self.assertIn("| -21 (run check) | 0.80x |", rows["transposed"])
        self.assertIn("| +0 | 0.50x |", rows["contiguous"])
        self.assertIn("bf16: 1 of 1 rows within 5 points of float32's % of ceiling and 0 ahead by more; "
                      "furthest behind: contiguous add out 4096x4096 8 threads", sec)
        self.assertIn("1 more marked (run check) and not counted", sec)

    def test_precision_of_memory_bound_rows_leave_out_noisy_pairs_not_rechecked(self):
        """The contiguous bf16 add's last repetition took 3x the others (a first-pass
        spread of ±107%, as a stalled shared VM gives): the pair is shown marked noisy and
        neither counted nor named furthest behind, however its points lie; once the
        re-check measured it alternating, it is counted by that ratio and unmarked."""
        ew = self._bf16_add_twins()
        row = "elementwise/op:add/impl:ours/device:cpu/layout:contiguous/style:out/dtype:bf16/shape:4096x4096/threads:8"
        self.assertEqual(sbtest.stall_last(ew, row), 3)
        text = self.render()
        sec, rows = self._precision_add_rows(text)
        self.assertIn("| 5.50 ms ±107% |", rows["contiguous"])
        self.assertIn("| +0 (noisy: ±107%, not re-checked) | 0.50x | — |", rows["contiguous"])
        self.assertIn("| -21 | 0.80x |", rows["transposed"])
        self.assertIn("bf16: 0 of 1 rows within 5 points of float32's % of ceiling and 0 ahead by more; "
                      "furthest behind: transposed add out 4096x4096 8 threads, 35% against 57%; 1 more marked "
                      "noisy and not counted: a row's first pass spread over ±10% and the re-check did not "
                      "measure the pair", sec)
        twin = row.replace("dtype:bf16", "dtype:f32")
        case = {"a": twin, "b": row, "pick": "precision", "first_pass": 0.5,
                "rounds": [{"a_ns": 100.0, "b_ns": b, "first": f} for b, f in ((49.0, "a"), (50.0, "b"), (51.0, "a"))],
                "ratio": {"median": 0.5, "min": 0.49, "max": 0.51}, "se": 0.01, "settled": "noise"}
        with open(os.path.join(self.raw, "recheck.json"), "w") as f:
            json.dump({"context": {"sb_matrix": "quick", "selection": "picks", "precision": True}, "cases": [case]}, f)
        sec, rows = self._precision_add_rows(self.render())
        self.assertIn("| +0 | 0.50x | 0.50x [0.49x–0.51x] |", rows["contiguous"])
        self.assertIn("bf16: 1 of 2 rows within 5 points of float32's % of ceiling and 0 ahead by more "
                      "(1 of them by their interleaved time ratio)", sec)
        self.assertNotIn("noisy", sec)

    def test_layout_reading_marks_a_noisy_slowest_layout(self):
        """The Memory layout reading quotes each op's slowest layout; where that pair was
        never re-checked and a row's first pass spread over ±10%, it says so, as the
        Summary does."""
        ew = os.path.join(self.raw, "bench_elementwise.json")
        sec = lambda t: t[t.index("### Memory layout on `cpu`"):t.index("\n## ", t.index("### Memory layout on `cpu`"))]
        reading = lambda t: next(l for l in sec(t).splitlines() if l.startswith("Reading:"))
        self.assertNotIn("noisy", reading(self.render()))
        row = "elementwise/op:add/impl:ours/device:cpu/layout:transposed/style:out/dtype:f32/shape:4096x4096/threads:8"
        sbtest.stall_last(ew, row)
        self.assertIn("transposed add runs at", reading(self.render()))
        self.assertRegex(reading(self.render()), r"transposed add runs at [^,]*\(noisy: ±\d+%, not re-checked\)")

    def test_channels_last_and_l5_per_precision_on_a_gpu(self):
        """GPU conv2d rows in four precisions: the Channels-last reading and the L5
        verdict name each device and precision (NHWC slower in f32 on the GPU, faster in
        tf32, f16 and bf16), and the Precision table holds the conv rows against f32."""
        conv = os.path.join(self.raw, "bench_conv.json")
        # NHWC ÷ NCHW time on cuda:0 per dtype; the CPU rows: 45 ms ÷ 60 ms
        nhwc = {"f32": 1.2, "tf32": 0.5, "f16": 0.6, "bf16": 0.55}
        speed = {"f32": 1.0, "tf32": 3.0, "f16": 5.0, "bf16": 5.0}  # dtype's speed vs f32, NCHW
        for dt in nhwc:
            for layout, f in (("contiguous", 1.0), ("channels_last", nhwc[dt] * 60 / 45)):
                k = 0.01 * f / speed[dt]
                self.assertTrue(sbtest.add_twins(
                    conv, lambda n, l=layout: "/op:conv2d/" in n and f"/layout:{l}/" in n and "device:cpu" in n,
                    {"device:cpu": "device:cuda:0", "dtype:f32": f"dtype:{dt}", "threads:8": "threads:1"},
                    {"real_time": k, "cpu_time": k},
                    source=sbtest.fixture("machine-a", "bench_conv.json")))

        def engines(doc):  # the cuDNN engine each GPU row ran, in its label
            for e in doc["benchmarks"]:
                if "device:cuda" in e["name"]:
                    e["label"] = "regime:DRAM engine:eng" + ("1_k2=3" if "channels_last" in e["name"] else "0")
        sbtest.edit(conv, engines)
        text = self.render()
        c = claims(text)
        self.assertEqual(c["L5"][1], "cpu f32: holds; cuda:0 f32: does not hold; cuda:0 tf32: holds; "
                                     "cuda:0 f16: holds; cuda:0 bf16: holds")
        self.assertTrue(c["L5"][0].startswith("NHWC speed-up: cpu f32 1.33x; cuda:0 f32 0.83x; cuda:0 tf32 2.00x"),
                        c["L5"][0])
        cl = text.split("### Channels-last on `cuda:0`")[1].split("\n## ")[0]
        self.assertIn("Reading: NHWC runs at 0.83x the NCHW speed in f32, 2.00x the NCHW speed in tf32, "
                      "1.67x the NCHW speed in f16, 1.82x the NCHW speed in bf16", cl)
        prec = text.split("### Precision and quantization on `cuda:0`")[1].split("\n## ")[0]
        rows = [l for l in prec.splitlines() if l.startswith("| ours | conv2d |")]
        self.assertEqual([l.split("|")[6].strip() for l in rows if "| contiguous |" in l],
                         ["f32", "tf32", "f16", "bf16"])
        self.assertIn("| ours | conv2d | contiguous | 32x64x56x56 | 1 | f16 | 120 µs ±3% | 5.00x |", prec)
        self.assertEqual(cl.count("does not"), 0)
        self.assertIn("| engine (NCHW / NHWC) |", cl)
        self.assertIn("| eng0 / eng1_k2=3 |", cl)
        cpu = text.split("### Channels-last on `cpu`")[1].split("\n### ")[0]
        self.assertNotIn("engine", cpu)  # no engine named: no column

    def test_peers_say_when_torch_has_no_fast_bf16_cpu_path(self):
        """A torch bf16 matmul row on a CPU where torch 1.13 runs reference loops for it
        is read with that said beside the Peers table; with oneDNN, nothing is said."""
        mm = os.path.join(self.raw, "bench_matmul.json")
        peer = os.path.join(self.raw, "peer_torch.json")
        ours = "matmul/op:matmul/impl:ours/device:cpu/layout:contiguous/style:out/dtype:f32/" \
               "shape:1024x1024/threads:8"

        mine = lambda n: n.startswith(ours + "/")  # noqa: E731
        self.assertTrue(sbtest.add_twins(peer, mine, {"dtype:f32": "dtype:bf16", "impl:ours": "impl:torch"}, source=mm))
        self.assertTrue(sbtest.add_twins(mm, mine, {"dtype:f32": "dtype:bf16"}))
        for path, verdict in (("reference", True), ("onednn", False)):
            sbtest.edit(peer, lambda d: d["context"].update(sb_torch_bf16_cpu=path))
            text = self.render()
            peers = text[text.index("## Peers"):]
            self.assertEqual("ATen's reference loops" in peers, verdict, path)

    def test_memory_claims_follow_the_allocator_counters(self):
        step4 = "alloc/op:reuse_experiment/impl:torch/device:cuda:0/dtype:f32/" \
                "shape:256x1024x1024/step:4"
        sbtest.set_counter(os.path.join(self.raw, "peer_torch.json"), step4,
                           "reserved_bytes", 3 * 2**30)
        c = claims(self.render())
        self.assertEqual(c["M1"][1], "holds in 3 of 4 cases: step 3 (kept), step 6 (reused), "
                         "step 7 (kept)")
        self.assertEqual(c["M2"][1], "does not hold")
        # without the torch peer file the claims fall back to our own rows
        os.unlink(os.path.join(self.raw, "peer_torch.json"))
        c = claims(self.render())
        self.assertTrue(c["M1"][0].startswith("ours rows on cuda:0"))
        self.assertEqual(c["M1"][1], "holds")
        self.assertTrue(c["S1"][0].startswith("ours rows: "))

    def test_missing_data_says_not_measured(self):
        for f in ("bench_transfer.json", "semantics.json", "bench_quant.json"):
            os.unlink(os.path.join(self.raw, f))
        text = self.render()
        c = claims(text)
        for cid in ("H1", "V1", "V4", "P1", "P2", "P3"):
            self.assertEqual(c[cid], ("not measured", "not measured"))
        self.assertIn("## Host to device\n\nNot measured: no `transfer` rows.", text)
        self.assertIn("## Precision and quantization\n\nNot measured: no `quant` rows.",
                      text)

    def test_works_without_scipy_and_matplotlib(self):
        env = sbtest.hide_module(self.tmp.name, "scipy")
        env["PYTHONPATH"] += os.pathsep + sbtest.hide_module(
            self.tmp.name, "matplotlib")["PYTHONPATH"]
        p = sbtest.run("tables", self.res, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_bad_input_exits_2_and_keeps_tables(self):
        tables = os.path.join(self.res, "TABLES.md")
        with open(tables, "w") as f:
            f.write("previous tables\n")
        cases = (("malformed.json", "malformed JSON at line"),
                 ("truncated.json", "truncated"),
                 ("foreign.json", "not Google Benchmark JSON"),
                 ("badname.json", "layout 'diagonal' is not in the vocabulary"))
        for name, why in cases:
            with self.subTest(name=name):
                dst = os.path.join(self.raw, "zz_" + name)
                os.link(sbtest.fixture("bad", name), dst)
                p = sbtest.run("tables", self.res)
                os.unlink(dst)
                self.assertEqual(p.returncode, 2)
                self.assertIn(dst, p.stderr)
                self.assertIn(why, p.stderr)
                self.assertEqual(p.stderr.count("\n"), 1)  # one message, no traceback
                with open(tables) as f:
                    self.assertEqual(f.read(), "previous tables\n")
        p = sbtest.run("tables", os.path.join(self.tmp.name, "nowhere"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such results folder", p.stderr)


if __name__ == "__main__":
    unittest.main()
