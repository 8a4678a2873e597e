# test_compare.py: scripts/compare: the Mann-Whitney U p-value (scipy's, on known
# values; one message without scipy), ratios and geometric means on
# the machine-a / machine-b fixtures, -o, and bad or disjoint input.
import json
import os
import tempfile
import unittest

import sbtest

from stridebench import compare  # noqa: E402

# (x, y, U of x, two-sided p) from scipy.stats.mannwhitneyu(x, y) (scipy 1.10, auto)
KNOWN = [
    ([1, 2, 3], [4, 5, 6], 0.0, 0.1),                                       # exact
    ([1.0, 2.0, 3.0, 4.0, 5.0], [3.5, 6, 7, 8, 9], 2.0, 0.031746031746031744),
    ([0.98, 1.0, 1.04], [0.49, 0.5, 0.52], 9.0, 0.1),
    ([1, 2, 2, 3, 4, 5, 6, 7, 8, 9], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14], 12.5,
     0.005058770636928006),                                                 # ties
    (list(range(20)), [v + 7.5 for v in range(20)], 78.0, 0.0010140986852160438),
    ([1, 1, 1, 1], [1, 1, 1, 1], 8.0, 1.0),
]
ADD_T = "op:add/impl:ours/device:cpu/layout:transposed/style:out/dtype:f32/shape:4096x4096/threads:8"


def row(text, name):
    """The cells of the table row for run `name`."""
    for line in text.splitlines():
        if line.startswith(f"| {name} |"):
            return [c.strip() for c in line.strip("|").split(" | ")]
    raise AssertionError(f"no row {name}")


class MannWhitneyTest(unittest.TestCase):
    def test_known_values(self):
        for x, y, u, p in KNOWN:
            with self.subTest(x=x, y=y):
                got_u, got_p = compare.mann_whitney_u(x, y)
                self.assertEqual(got_u, u)
                self.assertAlmostEqual(got_p, p, delta=1e-12 + 1e-9 * p)

    def test_symmetric_and_too_few_samples(self):
        self.assertAlmostEqual(compare.mann_whitney_u([4, 5, 6], [1, 2, 3])[1], 0.1)
        self.assertEqual(compare.mann_whitney_u([1.0], [2.0, 3.0]), (None, None))

    def test_without_scipy_one_message_and_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = sbtest.results_dir(tmp, "machine-a", "a")
            b = sbtest.results_dir(tmp, "machine-b", "b")
            p = sbtest.run("compare", a, b, env=sbtest.hide_module(tmp, "scipy"))
            self.assertEqual(p.returncode, 2)
            self.assertEqual(p.stdout, "")
            self.assertIn("scipy is not installed", p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.a = sbtest.results_dir(self.tmp.name, "machine-a", "a")
        self.b = sbtest.results_dir(self.tmp.name, "machine-b", "b")

    def test_ratios_p_values_and_ceilings(self):
        p = sbtest.run("compare", self.a, self.b)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout
        self.assertIn("`xeon-8c-rtx4090`", out)
        self.assertIn("`epyc-64c`", out)
        self.assertIn("28 runs in both; 56 only in A, 0 only in B.", out)
        # B runs its 8 CPU baseline rows and elementwise at half A's time, its 2 GPU
        # baseline rows at the same time, matmul at 1.25x (make_fixtures.py)
        self.assertEqual(row(out, "baseline")[1:], ["10", f"{0.5 ** (8 / 10):.2f}x", "8", "0"])
        self.assertEqual(row(out, "elementwise")[1:], ["12", "0.50x", "12", "0"])
        self.assertEqual(row(out, "matmul")[1:], ["6", "1.25x", "0", "6"])
        allr = (0.5 ** 20 * 1.25 ** 6) ** (1 / 28)
        self.assertEqual(row(out, "**all**")[2], f"{allr:.2f}x")
        # transposed add: 17.7 ms vs 8.87 ms; 3 samples each, fully separated: p = 0.1;
        # B's baseline is twice as fast too, so both sit at 57% of their own ceiling
        self.assertEqual(row(out, ADD_T)[1:], ["17.7 ms ±3%", "8.87 ms ±3%", "0.50x", "0.1",
                                               "57%", "57%"])

    def test_builds_that_differ_are_named(self):
        """A run of another compiler or SIMD level, or with SB_TUNING, is named above the
        ratios; machines that differ only by design (their tunings) are not."""
        p = sbtest.run("compare", self.a, self.b)
        self.assertIn("- Built and run alike: compiler, flags, SIMD level, CPU allocator, huge pages, "
                      "git revision.", p.stdout)

        def rebuild(doc):
            doc["context"].update(sb_compiler="clang 14.0.6", sb_simd="scalar", sb_tuning="kc=384",
                                  sb_tuning_basis="SB_TUNING=kc=384")
        for f in os.listdir(os.path.join(self.b, "raw")):
            sbtest.edit(os.path.join(self.b, "raw", f), rebuild)
        p = sbtest.run("compare", self.a, self.b)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("- Built or run differently: compiler `gcc 12.2.0` (A), `clang 14.0.6` (B); SIMD "
                      "`avx2` (A), `scalar` (B); tuning `?` (A), `kc=384` (B), set by SB_TUNING. The ratios "
                      "include their effect, not the machines' alone.", p.stdout)

        def design(doc):  # the tuning of another design, not an override
            doc["context"].update(sb_compiler="gcc 12.2.0", sb_simd="avx2", sb_tuning_basis="zen4 row")
        for f in os.listdir(os.path.join(self.b, "raw")):
            sbtest.edit(os.path.join(self.b, "raw", f), design)
        self.assertIn("- Built and run alike:", sbtest.run("compare", self.a, self.b).stdout)

    def test_single_files_and_output_file(self):
        out = os.path.join(self.tmp.name, "cmp.md")
        p = sbtest.run("compare", sbtest.fixture("machine-a", "bench_elementwise.json"),
                       sbtest.fixture("machine-b", "bench_elementwise.json"), "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out, encoding="utf-8") as f:
            self.assertEqual(f.read(), p.stdout)
        self.assertEqual(row(p.stdout, ADD_T)[3], "0.50x")
        self.assertEqual(row(p.stdout, ADD_T)[5:], ["—", "—"])  # no baseline file given

    def test_same_results_give_ratio_one(self):
        p = sbtest.run("compare", self.a, self.a)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(row(p.stdout, ADD_T)[3:5], ["1.00x", "1"])
        self.assertEqual(row(p.stdout, "**all**")[2], "1.00x")

    def test_many_machines_side_by_side(self):
        """Three folders: per headline row each machine's time and % of its own ceiling,
        and a PNG with --plot; two folders keep the significance test unless --cross."""
        c = sbtest.results_dir(self.tmp.name, "machine-a", "c")
        for f in os.listdir(os.path.join(c, "raw")):
            if f.endswith(".json") and f != "semantics.json":
                sbtest.edit(os.path.join(c, "raw", f),
                            lambda d: d["context"].update(sb_machine="third-machine-4c"))
        sbtest.scale_time(os.path.join(c, "raw", "bench_elementwise.json"), "elementwise/" + ADD_T, 2.0)
        out, png = os.path.join(self.tmp.name, "x.md"), os.path.join(self.tmp.name, "x.png")
        p = sbtest.run("compare", self.a, self.b, c, "-o", out, "--plot", png)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("# stridebench across machines", p.stdout)
        header = next(l for l in p.stdout.splitlines() if l.startswith("| row |"))
        for slug in ("xeon-8c-rtx4090", "epyc-64c", "third-machine-4c"):
            self.assertIn(f"{slug} time", header)
            self.assertIn(f"{slug} % ceiling", header)
        name = ("elementwise/" + ADD_T).replace("/impl:ours", "")
        r = row(p.stdout, name)
        a_ns, c_ns = r[1], r[5]
        self.assertNotEqual(a_ns, c_ns)  # the third machine's add took twice as long
        self.assertTrue(r[2].endswith("%") and r[6].endswith("%"))
        with open(out) as f:
            self.assertEqual(f.read(), p.stdout)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        two = sbtest.run("compare", self.a, self.b, "--cross")
        self.assertIn("# stridebench across machines", two.stdout)
        self.assertNotIn("p-value", two.stdout)

    def keep_device(self, d, gpu, machine=None):
        """Keeps only the runs of one device kind (CUDA rows when gpu) in folder d."""
        for f in os.listdir(os.path.join(d, "raw")):
            if not f.endswith(".json") or f == "semantics.json":
                continue

            def fn(doc):
                doc["benchmarks"] = [e for e in doc["benchmarks"]
                                     if ("device:cuda" in e.get("run_name", e["name"])) == gpu]
                if machine:
                    doc["context"]["sb_machine"] = machine
            path = os.path.join(d, "raw", f)
            sbtest.edit(path, fn)
            with open(path) as fh:
                if not json.load(fh)["benchmarks"]:
                    os.remove(path)  # a file with no run left is bad input

    def test_gpu_machines_on_their_own_rows(self):
        """Issue #49: two CPU-only folders and one GPU-only folder: the CPU rows set the two
        side by side; the lone GPU machine gets a table (and a plot panel) of its own rows,
        each against its own ceiling, instead of no bar at all."""
        self.keep_device(self.a, gpu=False)
        self.keep_device(self.b, gpu=False)
        g = sbtest.results_dir(self.tmp.name, "machine-a", "g")
        self.keep_device(g, gpu=True, machine="gpu-only-h100")
        png = os.path.join(self.tmp.name, "x.png")
        p = sbtest.run("compare", self.a, self.b, g, "--plot", png)
        self.assertEqual(p.returncode, 0, p.stderr)
        cpu, gpu = p.stdout.split("## CPU rows")[1].split("## GPU rows")
        self.assertIn("xeon-8c-rtx4090 time", cpu)
        self.assertIn("epyc-64c time", cpu)
        self.assertNotIn("gpu-only-h100", cpu)
        self.assertNotIn("device:cuda", cpu)
        self.assertIn("Only gpu-only-h100 measured GPU rows", gpu)
        header = next(l for l in gpu.splitlines() if l.startswith("| row |"))
        self.assertEqual(header, "| row | gpu-only-h100 time | gpu-only-h100 % ceiling |")
        r = row(gpu, "baseline/op:gemm_peak/device:cuda:0/dtype:f32/shape:8192x8192")
        self.assertTrue(r[2].endswith("GFLOP/s"), r)  # a peak's rate is its FLOP rate
        self.assertTrue(any(l.startswith("| matmul/") and l.rstrip(" |").endswith("%") for l in gpu.splitlines()))
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_disjoint_and_bad_input(self):
        out = os.path.join(self.tmp.name, "cmp.md")
        with open(out, "w") as f:
            f.write("previous\n")
        cases = ((sbtest.fixture("bad", "disjoint.json"), "no benchmark run in common"),
                 (sbtest.fixture("bad", "truncated.json"), "truncated"),
                 (sbtest.fixture("bad", "malformed.json"), "malformed JSON"),
                 (sbtest.fixture("bad", "foreign.json"), "not Google Benchmark JSON"),
                 (sbtest.fixture("bad", "badname.json"), "not in the vocabulary"),
                 (os.path.join(self.tmp.name, "missing.json"), "no such"))
        for path, why in cases:
            with self.subTest(path=path):
                p = sbtest.run("compare", self.a, path, "-o", out)
                self.assertEqual(p.returncode, 2)
                self.assertIn(path, p.stderr)
                self.assertIn(why, p.stderr)
                self.assertEqual(p.stdout, "")
                with open(out) as f:
                    self.assertEqual(f.read(), "previous\n")


if __name__ == "__main__":
    unittest.main()
