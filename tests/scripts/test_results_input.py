# test_results_input.py: every way results.py refuses its inputs (Google Benchmark JSON,
# raw/semantics.json, raw/recheck.json, machine.json, a results folder), each an
# InputError naming the file and what is wrong; and what it accepts in their place
# (aggregates only, a re-check measured either way round).
import json
import os
import tempfile
import unittest

import sbtest
from stridebench import results

RUN = "elementwise/op:add/impl:ours/device:cpu/layout:contiguous/style:out/dtype:f32/shape:4096x4096/threads:8/real_time"
RUN2 = RUN.replace("layout:contiguous", "layout:transposed")


def entry(**over):
    e = dict(name=RUN, run_name=RUN, run_type="iteration", repetitions=1, repetition_index=0, iterations=10,
             real_time=2.0, cpu_time=2.0, time_unit="ms")
    e.update(over)
    return e


class InputTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def write(self, name, content):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else json.dumps(content).encode())
        return path

    def refused(self, fn, path, why):
        with self.assertRaises(results.InputError) as cm:
            fn(path)
        self.assertIn(path, str(cm.exception))
        self.assertIn(why, str(cm.exception))

    def test_google_benchmark_files(self):
        doc = lambda *es: {"context": {}, "benchmarks": list(es)}  # noqa: E731
        cases = [
            ("missing.json", None, "no such file"),
            ("latin1.json", b'{"context": {}, "benchmarks": ["\xe9"]}', "not UTF-8 text (byte 32)"),
            ("blank.json", b"  \n", "empty file"),
            ("noname.json", doc({"real_time": 1}), "benchmarks[0]: not a benchmark entry (no name)"),
            ("kind.json", doc(entry(run_type="summary")), "run_type 'summary' is neither 'iteration' nor 'aggregate'"),
            ("unit.json", doc(entry(time_unit="h")), "time_unit 'h' is not ns/us/ms/s"),
            ("zero.json", doc(entry(real_time=0)), "real_time missing or not a positive number"),
            ("bool.json", doc(entry(real_time=True)), "real_time missing or not a positive number"),
            ("twice.json", doc(entry(), entry(name=RUN.replace("/real_time", "/real_time/x"), run_name=None)),
             "both read as"),
            ("nothing.json", doc(), "contains no benchmark runs"),
        ]
        for name, content, why in cases:
            with self.subTest(name=name):
                path = os.path.join(self.dir, name) if content is None else self.write(name, content)
                self.refused(results.load_gbench, path, why)

    def test_aggregates_alone_and_skipped_runs(self):
        # only aggregates (benchmark_report_aggregates_only): the median is the sample;
        # an aggregate without run_name is named by its name less the aggregate's suffix
        path = self.write("aggs.json", {"context": {}, "benchmarks": [
            entry(name=RUN + "_median", run_name=None, run_type="aggregate", aggregate_name="median", real_time=3.0),
            entry(name=RUN + "_stddev", run_name=None, run_type="aggregate", aggregate_name="stddev", real_time=0.1),
            entry(name=RUN2, run_name=RUN2, error_occurred=True, error_message="no CUDA device")]})
        _, runs, skipped = results.load_gbench(path)
        self.assertEqual([r.name for r in runs], [results.canonical(*results.parse_name(RUN))])
        self.assertEqual(runs[0].median, 3.0e6)
        self.assertTrue(runs[0].from_aggregate)
        self.assertEqual(skipped, [RUN2 + ": no CUDA device"])

    def test_side_files_and_folders(self):
        self.refused(results.load_semantics, self.write("sem.json", {"V1": "yes"}), 'expected an object like {"V1": true')
        self.refused(results.load_semantics, self.write("sem2.json", {"X1": True}), 'expected an object like')
        self.refused(results.load_recheck, self.write("re.json", {"cases": []}),
                     "not a recheck file: expected an object with a 'context' object and a 'cases' list")
        self.refused(results.load_recheck, self.write("re2.json", {"context": {}, "cases": [{"a": RUN}]}),
                     "not a recheck file: case 0 needs run names 'a' and 'b'")
        self.refused(results.load_results, os.path.join(self.dir, "absent"), "no such results folder or JSON file")
        os.makedirs(os.path.join(self.dir, "empty", "raw"))
        self.refused(results.load_results, os.path.join(self.dir, "empty"), "no Google Benchmark *.json files")
        res = sbtest.results_dir(self.dir)
        machine = os.path.join(res, "machine.json")
        with open(machine, "w", encoding="utf-8") as f:
            json.dump([1, 2], f)
        with self.assertRaises(results.InputError) as cm:
            results.load_results(res)
        self.assertIn(machine + ": expected a JSON object", str(cm.exception))

    def test_a_recheck_either_way_round(self):
        """time_ratio(a, b) is b ÷ a: from a case that measured b against a, its median; from
        one that measured a against b, the inverse; else the first pass's medians."""
        path = self.write("two.json", {"context": {}, "benchmarks": [entry(), entry(name=RUN2, run_name=RUN2,
                                                                                    real_time=3.0)]})
        rs = results.load_results(path)
        a, b = (rs.runs[results.canonical(*results.parse_name(n))] for n in (RUN, RUN2))
        self.assertAlmostEqual(rs.time_ratio(a, b), 1.5)
        case = {"a": RUN2, "b": RUN, "first_pass": 0.66, "rounds": [], "ratio": {"median": 0.8, "min": 0.7, "max": 0.9}}
        rs.set_recheck({"context": {}, "cases": [case]})
        self.assertAlmostEqual(rs.time_ratio(a, b), 1 / 0.8)
        self.assertAlmostEqual(rs.time_ratio(b, a), 0.8)


if __name__ == "__main__":
    unittest.main()
