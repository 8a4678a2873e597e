# test_abtest.py: scripts/abtest (old and new binaries alternating) with stand-in
# programs for two builds' bench binaries: the order of the runs, the per-round ratios,
# which rows it says moved, and its exits on bad input.
import json
import os
import stat
import sys
import tempfile
import unittest

import sbtest

from stridebench import abtest

# Stand-in bench_<family>: logs "<side> <family>" and writes Google Benchmark JSON with
# three repetitions around the n-th canned time of each run its filter selects.
FAKE = r'''#!{python}
import json, os, re, sys
side, canned, log = {side!r}, json.load(open({canned!r})), {log!r}
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
assert args["benchmark_enable_random_interleaving"] == "true"
calls = sum(1 for line in open(log) if line.startswith(side + " ")) if os.path.exists(log) else 0
with open(log, "a") as f:
    f.write(side + " " + {family!r} + "\n")
if os.environ.get("FAKE_FAIL") == side:
    sys.exit(3)
bs = []
for n, times in canned.items():
    if re.search(args["benchmark_filter"], n):
        for k, f in enumerate((0.9, 1.0, 1.2)[:int(args["benchmark_repetitions"])]):
            bs.append(dict(name=n, run_name=n, run_type="iteration", repetitions=3, repetition_index=k,
                           iterations=10, real_time=times[calls % len(times)] * f, cpu_time=1, time_unit="ns"))
        bs.append(dict(name=n + "_median", run_name=n, run_type="aggregate", aggregate_name="median",
                       real_time=-1, cpu_time=-1, time_unit="ns"))
json.dump({{"context": {{}}, "benchmarks": bs}}, open(args["benchmark_out"], "w"))
'''


class AbtestTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.log = os.path.join(self.tmp, "calls.log")
        # 3 rounds. slow: new ÷ old = 1.5, 1.4, 1.6 (moved); same: 1.1, 0.9, 1.0 (crosses 1);
        # fast: 0.5 every round; gone: only in the old build
        self.old = self.build("old", "conv", {"conv/slow": [100, 100, 100], "conv/same": [100, 100, 100],
                                              "conv/fast": [100, 100, 100], "conv/gone": [5, 5, 5]})
        self.build("new", "conv", {"conv/slow": [150, 140, 160], "conv/same": [110, 90, 100],
                                   "conv/fast": [50, 50, 50]})
        self.new = os.path.join(self.tmp, "new")

    def build(self, side, family, canned):
        d = os.path.join(self.tmp, side)
        os.makedirs(d, exist_ok=True)
        cpath = os.path.join(d, f"{family}.canned.json")
        with open(cpath, "w") as f:
            json.dump(canned, f)
        exe = os.path.join(d, f"bench_{family}")
        with open(exe, "w") as f:
            f.write(FAKE.format(python=sys.executable, side=side, canned=cpath, log=self.log, family=family))
        os.chmod(exe, os.stat(exe).st_mode | stat.S_IXUSR)
        return d

    def test_ratios_order_and_verdicts(self):
        ratios, only = abtest.measure(self.old, self.new, ["conv"], ".", 3, 3, progress=lambda m: None)
        with open(self.log) as f:
            order = [line.split()[0] for line in f]
        self.assertEqual(order, ["old", "new", "new", "old", "old", "new"])  # alternating which goes first
        self.assertEqual(only, {"old": {"conv/gone"}, "new": set()})
        self.assertEqual([round(x, 6) for x in ratios["conv/slow"]], [1.5, 1.4, 1.6])
        rows, summary = abtest.summarize(ratios, 0.05)
        by = {r[0]: r for r in rows}
        self.assertAlmostEqual(by["conv/slow"][1], 1.5)
        self.assertEqual(by["conv/slow"][4], "slower")
        self.assertEqual(by["conv/same"][4], "")  # its range 0.9-1.1 crosses 1
        self.assertEqual(by["conv/fast"][4], "faster")
        self.assertEqual(summary["slower"], ["conv/slow"])
        self.assertEqual(summary["faster"], ["conv/fast"])
        self.assertAlmostEqual(summary["median"], 1.0)

    def test_command_line(self):
        out_json = os.path.join(self.tmp, "ab.json")
        p = sbtest.run("abtest", self.old, self.new, "--families", "conv", "--filter", "slow|same",
                       "--json", out_json)
        self.assertEqual(p.returncode, 0, p.stderr)
        text = p.stdout
        self.assertIn("**2 rows: median 1.250", text)
        self.assertIn("| `conv/slow` | 1.500 | 1.400-1.600 | slower |", text)
        self.assertNotIn("conv/fast", text)
        with open(out_json) as f:
            self.assertEqual(sorted(json.load(f)["ratios"]), ["conv/same", "conv/slow"])

    def test_bad_input_and_failures(self):
        p = sbtest.run("abtest", self.old, self.new, "--families", "reduce")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no executable", p.stderr)
        self.assertIn("bench_reduce", p.stderr)
        p = sbtest.run("abtest", self.old, self.new, "--families", "conv", "--filter", "nothing")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no row ran in both builds", p.stderr)
        out_json = os.path.join(self.tmp, "never.json")
        p = sbtest.run("abtest", self.old, self.new, "--families", "conv", "--json", out_json,
                       env={"FAKE_FAIL": "new"})
        self.assertEqual(p.returncode, 1)
        self.assertIn("bench_conv exited 3", p.stderr)
        self.assertFalse(os.path.exists(out_json))


    def test_from_json_as_the_gpu_ab_step_writes_it(self):
        d = os.path.join(self.tmp, "ab")
        os.makedirs(d)
        for rnd, (old_t, new_t) in enumerate([(100, 150), (100, 140), (100, 160)], start=1):
            for side, t in (("old", old_t), ("new", new_t)):
                bs = [dict(name="r/x/manual_time", run_name="r/x/manual_time", run_type="iteration",
                           real_time=t * f, time_unit="ns") for f in (0.9, 1.0, 1.2)]
                bs.append(dict(name="r/x/manual_time_median", run_name="r/x/manual_time", run_type="aggregate",
                               aggregate_name="median", real_time=-1, time_unit="ns"))
                with open(os.path.join(d, f"bench_reduce_cuda.{side}.{rnd}.json"), "w") as f:
                    json.dump({"context": {}, "benchmarks": bs}, f)
        p = sbtest.run("abtest", "--from-json", d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("bench_reduce_cuda), 3 rounds alternating", p.stdout)
        self.assertIn("| `r/x` | 1.500 | 1.400-1.600 | slower |", p.stdout)
        os.remove(os.path.join(d, "bench_reduce_cuda.new.2.json"))
        p = sbtest.run("abtest", "--from-json", d)
        self.assertEqual(p.returncode, 2)
        self.assertIn("round 2 lacks its new run", p.stderr)
        p = sbtest.run("abtest", "--from-json", d, "--families", "conv")
        self.assertEqual(p.returncode, 2)
        # a binary whose filter matched no run writes an empty file: it adds no row
        with open(os.path.join(d, "bench_reduce_cuda.new.2.json"), "w") as f:
            json.dump({"context": {}, "benchmarks": []}, f)
        for side in ("old", "new"):
            for rnd in (1, 2, 3):
                open(os.path.join(d, f"bench_copy_cuda.{side}.{rnd}.json"), "w").close()
        p = sbtest.run("abtest", "--from-json", d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("(bench_copy_cuda, bench_reduce_cuda)", p.stdout)
        self.assertIn("| `r/x` | 1.550 | 1.500-1.600 | slower |", p.stdout)

if __name__ == "__main__":
    unittest.main()
