# test_collect.py: scripts/collect (gathering, machine.json, the swap that leaves old
# results untouched on any failure) and scripts/plot, on the fixture JSON.
import importlib.util
import json
import os
import shutil
import tempfile
import unittest

import sbtest
from stridebench import results as sb

SLUG = "xeon-8c-rtx4090"
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None


class CollectTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.json_dir = os.path.join(self.tmp.name, "bench-json")
        shutil.copytree(sbtest.fixture("machine-a"), self.json_dir)
        self.results = os.path.join(self.tmp.name, "results")
        self.dest = os.path.join(self.results, SLUG)

    def collect(self, *extra, env=None):
        return sbtest.run("collect", "--json-dir", self.json_dir, "--results",
                          self.results, *extra, env=env)

    def test_builds_the_machine_folder(self):
        p = self.collect("--no-plots")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"collect: replaced {self.dest}", p.stdout)
        self.assertIn("bench_elementwise.json: 12 runs", p.stdout)
        self.assertEqual(os.listdir(self.results), [SLUG])  # no temp folder left
        self.assertEqual(sorted(os.listdir(self.dest)), ["TABLES.md", "machine.json", "raw"])
        # every file's JSON, compacted (Note [Compact raw JSON]): the same document, one
        # line per benchmark entry, smaller than the indented original
        raw, src = sbtest.snapshot(os.path.join(self.dest, "raw")), sbtest.snapshot(self.json_dir)
        self.assertEqual(sorted(raw), sorted(src))
        for name, text in raw.items():
            doc = json.loads(src[name])
            self.assertEqual(json.loads(text), doc, name)
            self.assertEqual(text.decode("utf-8"), sb.compact_json(doc), name)
            if doc.get("benchmarks"):
                self.assertEqual(text.count(b"\n"), len(doc) + len(doc["benchmarks"]) + 3, name)
                self.assertLess(len(text), len(src[name]), name)
        with open(os.path.join(self.dest, "machine.json")) as f:
            m = json.load(f)
        self.assertEqual(m["sb_machine"], SLUG)
        self.assertEqual(m["sb_cpu_model"], "Intel Xeon Fake 8C")
        self.assertEqual(m["sb_torch_version"], "2.3.0")  # only in the peer file
        self.assertEqual(m["gbench"]["num_cpus"], 16)
        self.assertEqual(len(m["gbench"]["caches"]), 4)
        self.assertEqual(m["files"]["bench_matmul.json"]["sb_family"], "matmul")
        self.assertNotIn("sb_family", m)  # differs between files
        # TABLES.md is what scripts/tables makes of the folder
        with open(os.path.join(self.dest, "TABLES.md"), encoding="utf-8") as f:
            collected = f.read()
        self.assertIn("transposed add runs at 0.62x the contiguous rate", collected)
        self.assertEqual(sbtest.run("tables", self.dest).returncode, 0)
        with open(os.path.join(self.dest, "TABLES.md"), encoding="utf-8") as f:
            self.assertEqual(f.read(), collected)

    def gpu_only_file(self, name, message="no CUDA device"):
        # what bench_<family>_cuda writes on a machine without a GPU: every run, every
        # repetition, skipped with an error
        with open(sbtest.fixture("machine-a", "bench_copy.json")) as f:
            doc = json.load(f)
        run = "copy/op:contiguous/impl:ours/device:cuda:0/layout:transposed/style:copy/" \
              "dtype:f32/shape:4096x4096/threads:1/repeats:5/manual_time"
        doc["benchmarks"] = [{"name": run, "run_name": run, "run_type": "iteration",
                              "repetitions": 5, "repetition_index": i, "error_occurred": True,
                              "error_message": message} for i in range(5)]
        with open(os.path.join(self.json_dir, name), "w") as f:
            json.dump(doc, f)

    def test_gpu_binaries_without_a_gpu_are_one_line(self):
        self.gpu_only_file("copy_cuda.json")
        p = self.collect("--no-plots")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("copy_cuda.json: 1 GPU run, no CUDA device", p.stdout)
        self.assertNotIn("copy_cuda.json", os.listdir(os.path.join(self.dest, "raw")))
        with open(os.path.join(self.dest, "TABLES.md"), encoding="utf-8") as f:
            self.assertNotIn("no CUDA device", f.read())
        # any other error is still listed, once per run (not per repetition)
        self.gpu_only_file("copy_cuda.json", message="cudaErrorLaunchFailure")
        p = self.collect("--no-plots")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("cudaErrorLaunchFailure"), 1)
        self.assertIn("copy_cuda.json", os.listdir(os.path.join(self.dest, "raw")))
        with open(os.path.join(self.dest, "TABLES.md"), encoding="utf-8") as f:
            self.assertEqual(f.read().count("cudaErrorLaunchFailure"), 1)

    def test_replaces_the_old_folder(self):
        os.makedirs(self.dest)
        with open(os.path.join(self.dest, "stale.txt"), "w") as f:
            f.write("old run\n")
        other = os.path.join(self.results, "other-machine")
        os.makedirs(other)
        p = self.collect("--no-plots")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dest, "stale.txt")))
        self.assertTrue(os.path.isdir(other))  # other machines are left alone
        self.assertEqual(sorted(os.listdir(self.results)), ["other-machine", SLUG])

    def test_a_rerun_keeps_the_hand_written_notes(self):
        """NOTES.md is written by hand (README, What a run produces): a re-run replaces
        the measured files and keeps it, word for word."""
        self.assertEqual(self.collect("--no-plots").returncode, 0)
        notes = os.path.join(self.dest, "NOTES.md")
        with open(notes, "w", encoding="utf-8") as f:
            f.write("# What this machine measured\n\nby hand\n")
        p = self.collect("--no-plots")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(notes, encoding="utf-8") as f:
            self.assertEqual(f.read(), "# What this machine measured\n\nby hand\n")

    def assert_fails_and_keeps(self, why, code=2, env=None, extra=("--no-plots",)):
        before = sbtest.snapshot(self.results)
        p = self.collect(*extra, env=env)
        self.assertEqual(p.returncode, code, p.stdout + p.stderr)
        self.assertIn(why, p.stderr)
        self.assertEqual(sbtest.snapshot(self.results), before)
        self.assertEqual(sorted(os.listdir(self.results)), [SLUG])  # no temp folder

    def test_failure_leaves_old_results_untouched(self):
        self.assertEqual(self.collect("--no-plots").returncode, 0)
        cases = [("truncated.json", "truncated"), ("malformed.json", "malformed JSON"),
                 ("foreign.json", "not Google Benchmark JSON"),
                 ("badname.json", "layout 'diagonal' is not in the vocabulary")]
        for name, why in cases:
            with self.subTest(name=name):
                dst = os.path.join(self.json_dir, "zz_" + name)
                shutil.copy(sbtest.fixture("bad", name), dst)
                self.assert_fails_and_keeps(why)
                self.assertIn(dst, self.collect("--no-plots").stderr)
                os.unlink(dst)
        with self.subTest("another machine"):
            dst = os.path.join(self.json_dir, "zz_other.json")
            shutil.copy(sbtest.fixture("machine-b", "bench_matmul.json"), dst)
            self.assert_fails_and_keeps("sb_machine 'epyc-64c' differs")
            os.unlink(dst)
        with self.subTest("no sb_machine"):
            sbtest.edit(os.path.join(self.json_dir, "bench_conv.json"),
                        lambda d: d["context"].pop("sb_machine"))
            self.assert_fails_and_keeps("bench_conv.json: no sb_machine")
        with self.subTest("empty json dir"):
            shutil.rmtree(self.json_dir)
            os.makedirs(self.json_dir)
            self.assert_fails_and_keeps("no Google Benchmark *.json files")
        with self.subTest("missing json dir"):
            os.rmdir(self.json_dir)
            self.assert_fails_and_keeps("no such directory")

    def test_late_failure_leaves_old_results_untouched(self):
        # a matplotlib that breaks while plotting: the new folder is half built
        self.assertEqual(self.collect("--no-plots").returncode, 0)
        env = sbtest.hide_module(self.tmp.name, "matplotlib", "RuntimeError")
        self.assert_fails_and_keeps("RuntimeError", code=1, env=env, extra=())

    def test_plots_or_a_message(self):
        env = sbtest.hide_module(self.tmp.name, "matplotlib")
        p = self.collect(env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("matplotlib is not installed; no plots", p.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.dest, "plots")))
        p = sbtest.run("plot", self.dest, env=env)
        self.assertEqual((p.returncode, p.stdout.startswith("plot: matplotlib is not "
                                                            "installed")), (0, True))
        if not HAVE_MPL:
            self.skipTest("matplotlib not installed")
        p = self.collect()
        self.assertEqual(p.returncode, 0, p.stderr)
        plots = sorted(os.listdir(os.path.join(self.dest, "plots")))
        # per device and family a layout and a style plot where the family has such pairs,
        # one roofline per device
        self.assertEqual(plots, ["layout_cpu_conv.png", "layout_cpu_copy.png",
                                 "layout_cpu_elementwise.png", "layout_cpu_matmul.png",
                                 "layout_cpu_reduce.png", "layout_cuda0_matmul.png",
                                 "roofline_cpu.png", "roofline_cuda0.png",
                                 "style_cpu_elementwise.png", "style_cpu_matmul.png"])
        for f in plots:
            with open(os.path.join(self.dest, "plots", f), "rb") as fh:
                self.assertEqual(fh.read(8), b"\x89PNG\r\n\x1a\n")
        p = sbtest.run("plot", self.dest)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("plot: wrote"), 10)


if __name__ == "__main__":
    unittest.main()
