# test_recheck.py: scripts/recheck (which rows it picks, the alternating rounds, the
# ratios it writes) with stand-in programs for our bench binary and the peer runner,
# and the tables' use of raw/recheck.json.
import json
import os
import shutil
import stat
import sys
import tempfile
import unittest

import sbtest

SLUG = "fake-2c"
CTX = {"sb_machine": SLUG, "sb_cpu_model": "Fake", "sb_cores": "2", "sb_threads": "1,2",
       "sb_simd": "avx2", "sb_caches": "L1d:32768", "sb_compiler": "gcc", "sb_flags": "-O3",
       "sb_openmp": "", "sb_git_revision": "abc", "sb_date": "2026-01-01", "sb_matrix": "quick"}


def case(op, impl, style="out", threads=1, layout="contiguous"):
    return (f"elementwise/op:{op}/impl:{impl}/device:cpu/layout:{layout}/style:{style}"
            f"/dtype:f32/shape:1x16x64x64/threads:{threads}")


def gbench(family, times_ns, suffix="/min_time:0.020/repeats:3/real_time"):
    """Google Benchmark JSON: 3 repetitions per run around the given median."""
    bs = []
    for name, t in times_ns.items():
        for f in (0.98, 1.0, 1.03):
            bs.append({"name": name + suffix, "run_name": name + suffix, "run_type": "iteration",
                       "repetitions": 3, "iterations": 10, "real_time": t * f, "cpu_time": t * f,
                       "time_unit": "ns", "bytes": 786432.0})
    return {"context": dict(CTX, sb_family=family), "benchmarks": bs}


# Stand-in for bench_elementwise and for peers.py --serve: prints nothing (the peer: "done"
# per request), logs each call (a peer request), and writes Google Benchmark JSON for
# every canned run its filter selects; the n-th call of a program gets the n-th time of
# each run (so each round's times are known).
FAKE = r'''#!{python}
import json, os, re, sys
kind, canned, log = {kind!r}, json.load(open({canned!r})), {log!r}
args = sys.argv[1:]


def call(filt, out, suffix, matched_with_suffix):
    calls = sum(1 for line in open(log) if line.startswith(kind + " ")) if os.path.exists(log) else 0
    picked = sorted(n for n in canned if re.search(filt, n + suffix if matched_with_suffix else n))
    with open(log, "a") as f:
        f.write(kind + " " + json.dumps(picked) + "\n")
    if os.environ.get("FAKE_FAIL_" + kind.upper()) == str(calls):
        sys.exit(1)
    if os.environ.get("FAKE_KILL_PARENT") == kind:  # recheck itself killed mid-round
        os.kill(os.getppid(), 9)
    bs = [dict(name=n + suffix, run_name=n + suffix, run_type="iteration", repetitions=1,
               iterations=10, real_time=canned[n][calls], cpu_time=canned[n][calls], time_unit="ns")
          for n in picked]
    ctx = {ctx!r}
    ctx["sb_family"] = "elementwise" if kind.startswith("ours") else "peers_torch"
    json.dump({{"context": ctx, "benchmarks": bs}}, open(out, "w"))


if kind.startswith("ours"):  # a bench binary (kinds "ours*" count their calls apart)
    filt = next(a.split("=", 1)[1] for a in args if a.startswith("--benchmark_filter="))
    out = next(a.split("=", 1)[1] for a in args if a.startswith("--benchmark_out="))
    call(filt, out, "/min_time:0.020/repeats:3/real_time", True)
else:  # peers.py --serve: one request per line, "done" after each (Note [Peer runner serving the re-check])
    assert "--serve" in args
    with open(log + ".argv", "a") as f:
        f.write(json.dumps(args) + "\n")
    lib = args[args.index("--libs") + 1]
    for line in sys.stdin:
        req = json.loads(line)
        with open(log + ".requests", "a") as f:
            f.write(line)
        call(req["filter"], os.path.join(req["out_dir"], "peers_%s.json" % lib), "/real_time", False)
        print("done", flush=True)
'''


class RecheckTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.json_dir = os.path.join(self.tmp, "bench-json")
        self.bench_dir = os.path.join(self.tmp, "benchmarks")
        os.makedirs(self.json_dir)
        os.makedirs(self.bench_dir)
        self.log = os.path.join(self.tmp, "calls.log")
        # first pass: peer ÷ ours = 1.10 (ours ahead, within the default 1.25x), 0.85 and 0.4
        # (the peer ahead: picked however far), 2.5 (ours far ahead: not picked)
        self.first = {"add": (1000, 1100), "mul": (1000, 850), "relu": (1000, 2500),
                      "loop": (1000, 400)}
        ours = {case(op, "ours"): t[0] for op, t in self.first.items()}
        peer = {case(op, "torch"): t[1] for op, t in self.first.items()}
        peer["peers/op:overhead/impl:torch/device:cpu/style:out/dtype:f32/shape:1/threads:1"] = 1000
        self.write("elementwise.json", gbench("elementwise", ours))
        self.write("peers_torch.json", gbench("peers_torch", peer, suffix="/real_time"))
        self.write("semantics.json", {"V1": True})
        # per-round times (3 rounds): add ratios 1.10, 0.75, 1.20 -> median 1.10;
        # mul ratios 0.90, 1.05, 0.95 -> median 0.95; loop 1.0
        self.canned_ours = {case("add", "ours"): [100, 120, 100, 100], case("mul", "ours"): [100] * 8,
                            case("relu", "ours"): [1] * 8, case("loop", "ours"): [1] * 8}
        self.canned_peer = {case("add", "torch"): [110, 90, 120], case("mul", "torch"): [90, 105, 95],
                            case("relu", "torch"): [1, 1, 1], case("loop", "torch"): [1, 1, 1]}
        self.fake("ours", self.canned_ours, os.path.join(self.bench_dir, "bench_elementwise"))
        self.peers = self.fake("peer", self.canned_peer, os.path.join(self.tmp, "peers.py"))

    def write(self, name, doc):
        with open(os.path.join(self.json_dir, name), "w") as f:
            json.dump(doc, f)

    def fake(self, kind, canned, path):
        cpath = path + ".canned.json"
        with open(cpath, "w") as f:
            json.dump(canned, f)
        with open(path, "w") as f:
            f.write(FAKE.format(python=sys.executable, kind=kind, canned=cpath, log=self.log, ctx=CTX))
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        return path

    def recheck(self, *extra, env=None):
        return sbtest.run("recheck", "--json-dir", self.json_dir, "--bench-dir", self.bench_dir,
                          "--peers-script", self.peers, *extra, env=env)

    def result(self):
        with open(os.path.join(self.json_dir, "recheck.json")) as f:
            return json.load(f)

    def calls(self):
        with open(self.log) as f:
            return [(line.split(" ", 1)[0], json.loads(line.split(" ", 1)[1])) for line in f]

    def tables(self):
        """collect on the JSON dir (no plots) -> the text of its TABLES.md."""
        results = os.path.join(self.tmp, "results")
        p = sbtest.run("collect", "--json-dir", self.json_dir, "--results", results, "--no-plots")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(results, SLUG, "TABLES.md"), encoding="utf-8") as f:
            return f.read()

    def test_picks_every_peer_ahead_and_the_near_rows_and_alternates_the_programs(self):
        p = self.recheck("--rounds", "3")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.result()
        self.assertEqual(doc["context"]["rounds"], 3)
        self.assertEqual((doc["context"]["min_rounds"], doc["context"]["max_rounds"]), (3, 3))
        self.assertEqual(doc["context"]["selection"], "picks")
        got = {c["b"]: c for c in doc["cases"]}
        # 0.85x and 0.4x: the peer ahead; 1.10x: ours ahead by less than 1.25x; 2.5x and
        # the overhead row: no
        self.assertEqual(sorted(got), sorted([case("add", "torch"), case("mul", "torch"), case("loop", "torch")]))
        self.assertAlmostEqual(got[case("loop", "torch")]["ratio"]["median"], 1.0)
        add, mul = got[case("add", "torch")], got[case("mul", "torch")]
        self.assertEqual(add["a"], case("add", "ours"))
        self.assertAlmostEqual(add["first_pass"], 1.1)
        self.assertAlmostEqual(mul["first_pass"], 0.85)
        self.assertAlmostEqual(add["ratio"]["median"], 1.1)
        self.assertAlmostEqual(add["ratio"]["min"], 0.75)
        self.assertAlmostEqual(add["ratio"]["max"], 1.2)
        self.assertAlmostEqual(mul["ratio"]["median"], 0.95)
        self.assertEqual([r["first"] for r in add["rounds"]], ["a", "b", "a"])
        self.assertEqual([(r["a_ns"], r["b_ns"]) for r in add["rounds"]], [(100, 110), (120, 90), (100, 120)])
        # each program ran once per round, on exactly the picked runs, alternating
        calls = self.calls()
        self.assertEqual([k for k, _ in calls], ["ours", "peer", "peer", "ours", "ours", "peer"])
        self.assertEqual(calls[0][1], sorted([case("add", "ours"), case("mul", "ours"), case("loop", "ours")]))
        self.assertEqual(calls[1][1], sorted([case("add", "torch"), case("mul", "torch"), case("loop", "torch")]))

    def test_the_peer_runner_reads_the_first_pass_listing_or_lists_beside_the_binaries(self):
        """The peer runner reads our cases from JSON_DIR/ours_list.cases, where the peers'
        first pass of `ninja benchmark` keeps the listing; a JSON dir without one (a
        committed results folder) is left as it was: the listing goes into BENCH_DIR."""
        def ours_list_arg():
            with open(self.log + ".argv") as f:
                argvs = [json.loads(line) for line in f]
            os.remove(self.log + ".argv")
            self.assertEqual(len(argvs), 1)
            return argvs[0][argvs[0].index("--ours-list") + 1]
        before = sorted(os.listdir(self.json_dir))
        p = self.recheck("--rounds", "1", "--out", os.path.join(self.tmp, "out.json"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(ours_list_arg(), os.path.join(self.bench_dir, "ours_list.cases"))
        self.assertEqual(sorted(os.listdir(self.json_dir)), before)
        with open(os.path.join(self.json_dir, "ours_list.cases"), "w") as f:
            f.write("{}")
        p = self.recheck("--rounds", "1", "--out", os.path.join(self.tmp, "out.json"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(ours_list_arg(), os.path.join(self.json_dir, "ours_list.cases"))

    def test_band_and_max_cases(self):
        # the peer-ahead rows always (closest first), then ours-ahead rows within the band
        # widened by both rows' spreads (±2.5% each here): 1.10 <= 1.05 x 1.05, > 1.02 x 1.05
        p = self.recheck("--rounds", "1", "--band", "1.05")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([c["b"] for c in self.result()["cases"]],
                         [case("mul", "torch"), case("loop", "torch"), case("add", "torch")])
        p = self.recheck("--rounds", "1", "--band", "1.02")
        self.assertEqual([c["b"] for c in self.result()["cases"]], [case("mul", "torch"), case("loop", "torch")])
        # --max-cases caps the ours-ahead rows only: 1.10 is closer than 2.5
        p = self.recheck("--rounds", "1", "--band", "3", "--max-cases", "1")
        self.assertEqual([c["b"] for c in self.result()["cases"]],
                         [case("mul", "torch"), case("loop", "torch"), case("add", "torch")])
        p = self.recheck("--rounds", "1", "--band", "3", "--max-cases", "0")
        self.assertEqual([c["b"] for c in self.result()["cases"]], [case("mul", "torch"), case("loop", "torch")])

    def test_allocator_rows_are_peer_rows_too(self):
        # the Summary's peer line counts the alloc family's peer rows, so the re-check
        # takes them as any other: torch's plain CPU allocator 0.8x ours, its cudaMalloc
        # rows (a child without its cache, asked for with "nocache") 0.5x
        cpu = "alloc/op:alloc_free/impl:{}/device:cpu/threads:1/alloc:system/size:4096"
        gpu = "alloc/op:alloc_free/impl:{}/device:cuda:0/alloc:cudamalloc/size:1073741824"
        self.write("alloc.json", gbench("alloc", {cpu.format("ours"): 1000, gpu.format("ours"): 1000}))
        sbtest.edit(os.path.join(self.json_dir, "peers_torch.json"), lambda d: d["benchmarks"].extend(
            gbench("peers_torch", {cpu.format("torch"): 800, gpu.format("torch"): 500},
                   suffix="/real_time")["benchmarks"]))
        self.fake("ours", {cpu.format("ours"): [100] * 4, gpu.format("ours"): [100] * 4},
                  os.path.join(self.bench_dir, "bench_alloc"))
        self.canned_peer.update({cpu.format("torch"): [80] * 2, gpu.format("torch"): [50] * 2})
        self.peers = self.fake("peer", self.canned_peer, self.peers)
        p = self.recheck("--rounds", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        got = {c["b"]: c["ratio"]["median"] for c in self.result()["cases"]}
        self.assertAlmostEqual(got[cpu.format("torch")], 0.8)
        self.assertAlmostEqual(got[gpu.format("torch")], 0.5)
        with open(self.log + ".requests") as f:
            reqs = [json.loads(line) for line in f]
        self.assertEqual(len(reqs), 2)  # one per round, every peer row in it
        self.assertTrue(all(r.get("nocache") for r in reqs))

    def test_runs_go_back_to_the_binary_that_wrote_them(self):
        # e.g. GPU rows of family elementwise come from bench_elementwise_cuda
        sbtest.edit(os.path.join(self.json_dir, "elementwise.json"),
                    lambda d: d["context"].update(executable="/elsewhere/bench_elementwise_cuda"))
        os.rename(os.path.join(self.bench_dir, "bench_elementwise"),
                  os.path.join(self.bench_dir, "bench_elementwise_cuda"))
        p = self.recheck("--rounds", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ours bench_elementwise_cuda (3 runs)", p.stderr)
        self.assertTrue(all(c.get("ratio") for c in self.result()["cases"]))

    def test_nothing_close_writes_an_empty_file(self):
        # no peer ahead (only the 1.10x and 2.5x rows), nothing within 1.01x
        sbtest.edit(os.path.join(self.json_dir, "peers_torch.json"), lambda d: d.update(benchmarks=[
            b for b in d["benchmarks"] if "op:add/" in b["name"] or "op:relu/" in b["name"]]))
        p = self.recheck("--band", "1.01")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("nothing to re-check", p.stderr)
        self.assertEqual(self.result()["cases"], [])
        self.assertFalse(os.path.exists(self.log))  # no program ran

    def test_pairs_given_by_hand(self):
        p = self.recheck("--rounds", "2", "--pair", case("add", "ours"), case("mul", "ours"))
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.result()
        self.assertEqual(doc["context"]["selection"], "pairs")
        [c] = doc["cases"]
        self.assertEqual((c["a"], c["b"]), (case("add", "ours"), case("mul", "ours")))
        self.assertEqual(c["pick"], "pair")
        # one program measures both sides, in two invocations per round whose order
        # alternates: round 1 a (call 0: add 100) then b (call 1: mul 100), round 2 b
        # (call 2: mul 100) then a (call 3: add 100)
        self.assertEqual([r["first"] for r in c["rounds"]], ["a", "b"])
        self.assertEqual([(r["a_ns"], r["b_ns"]) for r in c["rounds"]], [(100, 100), (100, 100)])
        self.assertEqual(self.calls(), [("ours", [case("add", "ours")]), ("ours", [case("mul", "ours")]),
                                        ("ours", [case("mul", "ours")]), ("ours", [case("add", "ours")])])

    def add_layout_rows(self, times, canned, style="out"):
        """Our add in more layouts (and a style): first-pass medians and per-call canned times."""
        sbtest.edit(os.path.join(self.json_dir, "elementwise.json"), lambda d: d["benchmarks"].extend(
            gbench("elementwise", {case("add", "ours", style, layout=l): t for l, t in times.items()})["benchmarks"]))
        self.canned_ours.update({case("add", "ours", style, layout=l): v for l, v in canned.items()})
        self.fake("ours", self.canned_ours, os.path.join(self.bench_dir, "bench_elementwise"))

    def test_layout_rows_furthest_from_contiguous_are_rechecked_against_their_twin(self):
        # first pass ÷ contiguous (1000): transposed 3.3x, channels_last 0.8x, sliced 1.2x,
        # expanded 1.0x; the 2 furthest either way (|log|): transposed, channels_last.
        # Our invocations: the a side (the twin, also the add peer case's ours) and the b
        # side (the layout rows) run separately, alternating: round 1 a (call 0) b (1),
        # round 2 b (2) a (3), round 3 a (4) b (5); the n-th call gets the n-th canned time
        # (0: a call that must not measure that run).
        self.canned_ours[case("add", "ours")] = [100, 0, 0, 110, 120, 0]
        self.add_layout_rows({"transposed": 3300, "channels_last": 800, "sliced": 1200, "expanded": 1000},
                             {"transposed": [0, 150, 160, 0, 0, 170], "channels_last": [0, 90, 80, 0, 0, 100],
                              "sliced": [1] * 6, "expanded": [1] * 6})
        # in place, a style of its own: its transposed row (1.1x, nearer 1 than the out=
        # rows above) is picked too, against the in-place twin
        self.add_layout_rows({"contiguous": 1000, "transposed": 1100},
                             {"contiguous": [500, 0, 0, 500, 500, 0], "transposed": [0, 550, 550, 0, 0, 550]},
                             style="inplace")
        p = self.recheck("--rounds", "3", "--band", "1.12", "--layout-per-style", "2", "--no-style")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.result()
        self.assertEqual(doc["context"]["layout_per_style"], 2)
        got = {c["b"]: c for c in doc["cases"]}
        tr, cl = case("add", "ours", layout="transposed"), case("add", "ours", layout="channels_last")
        tri = case("add", "ours", "inplace", layout="transposed")
        peer = [case(op, "torch") for op in ("add", "mul", "loop")]
        self.assertEqual(sorted(got), sorted(peer + [tr, cl, tri]))
        self.assertEqual(got[tri]["a"], case("add", "ours", "inplace"))
        self.assertAlmostEqual(got[tri]["ratio"]["median"], 1.1)
        self.assertEqual(got[case("add", "torch")]["pick"], "peer")
        t = got[tr]
        self.assertEqual((t["pick"], t["a"]), ("layout", case("add", "ours")))
        self.assertAlmostEqual(t["first_pass"], 3.3)
        self.assertEqual([r["first"] for r in t["rounds"]], ["a", "b", "a"])
        self.assertEqual([(r["a_ns"], r["b_ns"]) for r in t["rounds"]], [(100, 150), (110, 160), (120, 170)])
        self.assertAlmostEqual(t["ratio"]["median"], 160 / 110)
        self.assertAlmostEqual(got[cl]["ratio"]["min"], 80 / 110)
        ours = [names for kind, names in self.calls() if kind == "ours"]
        a = sorted([case("add", "ours"), case("add", "ours", "inplace"), case("mul", "ours"), case("loop", "ours")])
        b = sorted([cl, tr, tri])
        self.assertEqual(ours, [a, b, b, a, a, b])
        # --layout-per-style 0: the peer picks alone
        os.unlink(self.log)  # the fake counts calls from its log
        p = self.recheck("--rounds", "1", "--band", "1.12", "--layout-per-style", "0", "--no-style")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(c["b"] for c in self.result()["cases"]), sorted(peer))

    def test_the_summarys_costliest_layout_is_rechecked_too(self):
        # add out=: channels_last 0.3x (the furthest from contiguous by |log|, so the
        # per-style pick of 1 takes it) and transposed 2.0x (the costliest, which the
        # Summary quotes): both are re-checked against the contiguous twin
        self.canned_ours[case("add", "ours")] = [100, 0]
        self.add_layout_rows({"channels_last": 300, "transposed": 2000},
                             {"channels_last": [0, 30], "transposed": [0, 200]})
        p = self.recheck("--rounds", "1", "--band", "1.01", "--layout-per-style", "1", "--no-style")
        self.assertEqual(p.returncode, 0, p.stderr)
        got = {c["b"]: c for c in self.result()["cases"] if c["pick"] == "layout"}
        self.assertEqual(sorted(got), sorted([case("add", "ours", layout="channels_last"),
                                              case("add", "ours", layout="transposed")]))
        self.assertAlmostEqual(got[case("add", "ours", layout="transposed")]["ratio"]["median"], 2.0)

    def transposed_then_sliced(self, first, twin, transposed, sliced, band):
        """Our add out= transposed and sliced (first-pass times `first`) against the
        contiguous twin, 3 rounds: the transposed row among the picks (our calls 0-5: a b,
        b a, a b), the sliced one in a follow-up (calls 6-11, the same order); `twin`, the
        twin's times in those 6 calls where it runs, then 100; the layout rows' times
        where theirs run. -> the finished recheck."""
        self.canned_ours[case("add", "ours")] = [twin[0], 0, 0, twin[1], twin[2], 0, 100, 0, 0, 100, 100, 0]
        self.add_layout_rows({"transposed": first[0], "sliced": first[1]},
                             {"transposed": [0, transposed[0], transposed[1], 0, 0, transposed[2]] + [0] * 6,
                              "sliced": [0] * 6 + [0, sliced[0], sliced[1], 0, 0, sliced[2]]})
        p = self.recheck("--rounds", "3", "--band", band, "--layout-per-style", "1", "--no-style")
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def test_tables_use_the_interleaved_layout_ratio(self):
        self.transposed_then_sliced((3300, 1500), (100, 110, 120), (150, 160, 170), (130, 130, 130), "1.12")
        text = self.tables()
        # transposed: first pass 3.30x, interleaved 160/110 = 1.45x; then the sliced row
        # (first pass 1.50x, now the costliest) in a follow-up: 1.30x; transposed stays
        # the slowest layout of add
        self.assertIn("transposed add runs at 0.69x the contiguous rate (1.45x its time interleaved; "
                      "first pass 3.30x)", text)
        rows = [line for line in text.splitlines() if line.startswith("| add | transposed |")]
        self.assertEqual(len(rows), 1)
        self.assertIn("| 3.30x | 1.45x [1.42x–1.50x] | 0.69x |", rows[0])
        self.assertIn("| pick |", text)
        self.assertIn("| layout | " + case("add", "ours") + " | " + case("add", "ours", layout="transposed"), text)
        # claim L3 (within ±10%) counts the interleaved ratios: 1.45x and 1.30x
        l3 = next(line for line in text.splitlines() if line.startswith("| L3 |"))
        self.assertIn("| transposed 1.45x, sliced 1.30x | does not hold |", l3)

    def test_a_refuted_costliest_layout_brings_the_next_into_the_recheck(self):
        # Note [Re-check follow-ups]: transposed 3.3x in the first pass, 1.1x alternating;
        # the Summary then quotes sliced (2.0x first pass), re-checked in follow-up 1 at
        # 1.6x, which stays the costliest: no second follow-up
        p = self.transposed_then_sliced((3300, 2000), (100, 100, 100), (110, 110, 110), (160, 160, 160), "1.01")
        got = {c["b"]: c for c in self.result()["cases"] if c["pick"] == "layout"}
        tr, sl = case("add", "ours", layout="transposed"), case("add", "ours", layout="sliced")
        self.assertEqual(sorted(got), sorted([tr, sl]))
        self.assertNotIn("follow_up", got[tr])
        self.assertEqual(got[sl]["follow_up"], 1)
        self.assertEqual((got[sl]["a"], len(got[sl]["rounds"])), (case("add", "ours"), 3))
        self.assertAlmostEqual(got[sl]["ratio"]["median"], 1.6)
        self.assertIn("follow-up 1", p.stderr)
        self.assertNotIn("follow-up 2", p.stderr)
        text = self.tables()
        # the Summary's costliest layout of elementwise: sliced at its interleaved ratio,
        # not marked as unchecked
        row = next(line for line in text.splitlines() if line.startswith("| elementwise |"))
        self.assertIn("add sliced", row)
        self.assertIn("0.62x", row)
        self.assertNotIn("not re-checked", row)

    TWIN = "elementwise/op:add/impl:ours/device:cpu/layout:{}/style:out/dtype:{}/shape:4096x4096/threads:8"

    def _bf16_add_twins(self):
        """The JSON dir holds the fixture machine's baseline and elementwise rows, with
        bf16 twins of our f32 add out= rows (TWIN), half the bytes: the contiguous one
        in half the time, the transposed one in 0.8x. Returns the elementwise file."""
        for f in os.listdir(self.json_dir):
            os.unlink(os.path.join(self.json_dir, f))
        for f in ("bench_baseline.json", "bench_elementwise.json"):
            shutil.copy(sbtest.fixture("machine-a", f), os.path.join(self.json_dir, f))
        ew = os.path.join(self.json_dir, "bench_elementwise.json")
        for layout, t in (("contiguous", 0.5), ("transposed", 0.8)):
            self.assertTrue(sbtest.add_twins(
                ew, lambda n, l=layout: n.startswith(self.TWIN.format(l, "f32") + "/"),
                {"dtype:f32": "dtype:bf16"}, {"real_time": t, "cpu_time": t, "bytes": 0.5}))
        return ew

    def test_16_bit_rows_behind_their_float32_twin_are_rechecked_against_it(self):
        """The fixture machine's baseline and elementwise rows with bf16 twins of our f32
        adds (half the bytes): the contiguous one in half the time (level in % of
        ceiling: not picked), the transposed one in 0.8x (21 points behind: picked,
        against its f32 twin, in two invocations of the one binary a round)."""
        self._bf16_add_twins()
        a, b = self.TWIN.format("transposed", "f32"), self.TWIN.format("transposed", "bf16")
        # calls 0-5: round 1 a b, round 2 b a, round 3 a b
        self.fake("ours", {a: [100, 0, 0, 100, 110, 0], b: [0, 48, 50, 0, 0, 60]},
                  os.path.join(self.bench_dir, "bench_elementwise"))
        p = self.recheck("--rounds", "3", "--layout-per-style", "0", "--no-style")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.result()
        self.assertTrue(doc["context"]["precision"])
        [c] = doc["cases"]
        self.assertEqual((c["pick"], c["a"], c["b"]), ("precision", a, b))
        self.assertAlmostEqual(c["first_pass"], 0.8)
        self.assertEqual([(r["a_ns"], r["b_ns"], r["first"]) for r in c["rounds"]],
                         [(100, 48, "a"), (100, 50, "b"), (110, 60, "a")])
        self.assertAlmostEqual(c["ratio"]["median"], 0.5)
        self.assertEqual(self.calls(), [("ours", [a]), ("ours", [b]), ("ours", [b]), ("ours", [a]),
                                        ("ours", [a]), ("ours", [b])])
        # --no-precision: nothing to re-check
        os.unlink(self.log)
        p = self.recheck("--rounds", "3", "--layout-per-style", "0", "--no-style", "--no-precision")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.result()["cases"], [])
        self.assertFalse(self.result()["context"]["precision"])

    def test_noisy_16_bit_pairs_are_rechecked_and_precision_cases_stop_when_decided(self):
        """The bf16 twins of test_16_bit_rows_behind...: the contiguous one level with its
        f32 twin in % of ceiling but its last repetition 3x the others (a first-pass
        spread over ±10%): picked too, and settled on its noise. The transposed one,
        21 points behind, reads 0.80, 0.72 and 0.90 its twin's time: too noisy to stop
        on the standard error, but the 95% interval stays behind the ratio at which it
        would be 5 points behind (28 / 52 = 0.54), so it stops "decided" after the
        minimum, as a peer case clear of the 5% line does."""
        ew = self._bf16_add_twins()
        noisy = self.TWIN.format("contiguous", "bf16")
        sbtest.stall_last(ew, noisy)
        ca, cb = self.TWIN.format("contiguous", "f32"), noisy
        ta, tb = self.TWIN.format("transposed", "f32"), self.TWIN.format("transposed", "bf16")
        # per call of the binary: round 1 a b, round 2 b a, round 3 a b (both f32 rows in
        # the a invocation, both bf16 rows in the b one)
        self.fake("ours", {ca: [100, 0, 0, 100, 100, 0], cb: [0, 50, 50, 0, 0, 50],
                           ta: [100, 0, 0, 100, 100, 0], tb: [0, 80, 72, 0, 0, 90]},
                  os.path.join(self.bench_dir, "bench_elementwise"))
        p = self.recheck("--min-rounds", "3", "--max-rounds", "5", "--budget", "0", "--layout-per-style", "0",
                         "--no-style")
        self.assertEqual(p.returncode, 0, p.stderr)
        got = {(c["a"], c["b"]): c for c in self.result()["cases"]}
        self.assertEqual({k: (c["pick"], c["settled"], len(c["rounds"])) for k, c in got.items()},
                         {(ca, cb): ("precision", "noise", 3), (ta, tb): ("precision", "decided", 3)})
        self.assertGreater(got[(ta, tb)]["se"], 0.02)
        from stridebench import tables  # the Interleaved re-check section's account of the stop
        self.assertIn("for a precision pair, the ratios 5 points behind and ahead of its float32 twin",
                      tables._rounds_text(self.result()["context"]))

    def _peak_rows(self):
        """The JSON dir holds the fixture machine's baseline and matmul rows -> {out= row
        of ours: (its peak run, first-pass % of it)} (common.peak_pairs), the RunSet."""
        for f in os.listdir(self.json_dir):
            os.unlink(os.path.join(self.json_dir, f))
        for f in ("bench_baseline.json", "bench_matmul.json"):
            shutil.copy(sbtest.fixture("machine-a", f), os.path.join(self.json_dir, f))
        from stridebench import common, recheck
        rs = recheck.load_dir(self.json_dir)
        return {r.name: (peak, p) for dev in ("cpu", "cuda:0") for peak, r, p in common.peak_pairs(rs, dev)}, rs

    def test_gemm_and_conv_rows_are_rechecked_against_their_peak(self):
        """Every out= matmul row of ours (the fixture's three CPU ones and two GPU ones)
        is a peak case against its fma_peak or gemm_peak row, the two programs
        alternating; the Roofline table gives its % of the same round's peak (the first
        pass's % scaled by the first pass's ratio over the round's), and the Summary's
        compute line quotes those, lowest first."""
        rows, rs = self._peak_rows()
        self.assertEqual(len(rows), 5)
        self.assertEqual({rs.runs[n]["style"] for n in rows}, {"out"})
        peaks = {peak.name for peak, _ in rows.values()}
        slow = next(n for n in rows if "/layout:sliced/" in n)
        # rounds: the peaks at their first-pass time; each row at 1.0x, 1.1x and 1.2x its
        # first-pass time (the sliced one 1.5x, 1.6x and 1.7x)
        f = lambda n: (1.5, 1.6, 1.7) if n == slow else (1.0, 1.1, 1.2)
        self.fake("ours_base", {n: [rs.runs[n].median] * 3 for n in peaks},
                  os.path.join(self.bench_dir, "bench_baseline"))
        self.fake("ours_mm", {n: [rs.runs[n].median * x for x in f(n)] for n in rows},
                  os.path.join(self.bench_dir, "bench_matmul"))
        p = self.recheck("--rounds", "3", "--layout-per-style", "0", "--no-style", "--no-precision")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.result()
        self.assertTrue(doc["context"]["peak"])
        got = {c["b"]: c for c in doc["cases"] if c["pick"] == "peak"}
        self.assertEqual(set(got), set(rows))
        for n, c in got.items():
            self.assertEqual(c["a"], rows[n][0].name)
            self.assertAlmostEqual(c["ratio"]["median"], rs.runs[n].median / rows[n][0].median * f(n)[1])
        # the two programs alternate which runs first
        self.assertEqual([r["first"] for r in got[slow]["rounds"]], ["a", "b", "a"])
        results = os.path.join(self.tmp, "results")
        p = sbtest.run("collect", "--json-dir", self.json_dir, "--results", results, "--no-plots")
        self.assertEqual(p.returncode, 0, p.stderr)
        [slug] = os.listdir(results)
        with open(os.path.join(results, slug, "TABLES.md"), encoding="utf-8") as fh:
            text = fh.read()
        pct = rows[slow][1]
        want = f"{pct / 1.6:.0f}% [{pct / 1.7:.0f}%–{pct / 1.5:.0f}%]"
        row = next(line for line in text.splitlines()
                   if line.startswith("| op:matmul/impl:ours/layout:sliced/style:out/dtype:f32"))
        self.assertTrue(row.rstrip(" |").endswith(want), row)
        line = next(line for line in text.splitlines() if line.startswith("GEMM and conv against the compute peak"))
        self.assertIn("`cpu`: 3 out= matmul and conv2d rows of ours, 3 of them alternated with their compute peak, "
                      "read a median", line)
        self.assertIn(f"of the same round's peak; lowest: matmul sliced f32 1024x1024 8 threads, {want}; 3 below 85%",
                      line)

    def test_peak_cases_stop_once_the_85_percent_line_is_decided_and_no_peak_skips_them(self):
        """Rows at 1.0x, 1.3x, 0.9x, 1.0x, 1.0x their first-pass time, round by round: too
        noisy to stop on the standard error. The fixture's CPU rows (27-43% of their
        peak in the first pass) stay below 85% over the whole 95% interval after three
        rounds and stop "decided", as a peer case clear of the 5% line does; its GPU
        rows (80-81%) straddle the line and run to the maximum. --no-peak leaves the
        pairs out."""
        rows, rs = self._peak_rows()
        peaks = {peak.name for peak, _ in rows.values()}
        self.fake("ours_base", {n: [rs.runs[n].median] * 5 for n in peaks},
                  os.path.join(self.bench_dir, "bench_baseline"))
        self.fake("ours_mm", {n: [rs.runs[n].median * x for x in (1.0, 1.3, 0.9, 1.0, 1.0)] for n in rows},
                  os.path.join(self.bench_dir, "bench_matmul"))
        p = self.recheck("--min-rounds", "3", "--max-rounds", "5", "--budget", "0", "--layout-per-style", "0",
                         "--no-style", "--no-precision")
        self.assertEqual(p.returncode, 0, p.stderr)
        got = {c["b"]: (c["settled"], len(c["rounds"])) for c in self.result()["cases"]}
        self.assertEqual(got, {n: ("decided", 3) if "/device:cpu/" in n else ("max rounds", 5) for n in rows})
        self.assertEqual(sorted(round(p) for _, p in rows.values()), [27, 41, 43, 80, 81])
        from stridebench import tables  # the Interleaved re-check section's account of the stop
        self.assertIn("for a peak pair, the ratio at which the row reads 85% of its peak",
                      tables._rounds_text(self.result()["context"]))
        os.unlink(self.log)
        p = self.recheck("--rounds", "1", "--layout-per-style", "0", "--no-style", "--no-precision", "--no-peak")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.result()["cases"], [])
        self.assertFalse(self.result()["context"]["peak"])

    def test_bad_input_changes_nothing(self):
        old = {"context": {}, "cases": []}
        self.write("recheck.json", old)
        for args in (["--pair", case("add", "ours"), case("add", "numpy")],  # no such run
                     ["--pair", "nonsense", case("add", "ours")],
                     ["--band", "0.5"], ["--rounds", "0"]):
            p = self.recheck(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn("recheck: error:", p.stderr)
            self.assertEqual(self.result(), old)
        self.assertFalse(os.path.exists(self.log))
        shutil.rmtree(self.json_dir)
        p = self.recheck()
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such directory", p.stderr)

    def test_a_failed_round_is_an_error_and_keeps_the_rounds_before_it(self):
        self.write("recheck.json", {"context": {"stale": True}, "cases": []})
        p = self.recheck("--rounds", "3", env={"FAKE_FAIL_PEER": "1"})  # the peer's 2nd call fails
        self.assertEqual(p.returncode, 1)
        self.assertIn("round 2 failed", p.stderr)
        doc = self.result()
        self.assertNotIn("stale", doc["context"])
        add = {c["b"]: c for c in doc["cases"]}[case("add", "torch")]
        self.assertEqual(len(add["rounds"]), 1)
        self.assertAlmostEqual(add["ratio"]["median"], 1.1)

    def test_killed_half_way_leaves_no_stale_file(self):
        self.write("recheck.json", {"context": {"stale": True}, "cases": []})
        p = self.recheck("--rounds", "2", env={"FAKE_KILL_PARENT": "peer"})
        self.assertEqual(p.returncode, -9)
        self.assertFalse(os.path.exists(os.path.join(self.json_dir, "recheck.json")))

    def test_tables_show_the_interleaved_ratio(self):
        self.assertEqual(self.recheck("--rounds", "3").returncode, 0)
        results = os.path.join(self.tmp, "results")
        p = sbtest.run("collect", "--json-dir", self.json_dir, "--results", results, "--no-plots")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("3 re-checked case(s)", p.stdout)
        dest = os.path.join(results, SLUG)
        self.assertTrue(os.path.exists(os.path.join(dest, "raw", "recheck.json")))
        with open(os.path.join(dest, "TABLES.md"), encoding="utf-8") as f:
            text = f.read()
        rows = {line.split(" | ")[1]: line for line in text.splitlines()
                if line.startswith("| torch | elementwise/")}
        add = rows[case("add", "torch").replace("/impl:torch", "").replace("/device:cpu", "")]
        # ratios 1.10, 0.75, 1.20 in its 3 rounds: a standard error of its log ratio far
        # above 2%, so it never settled and the table says so
        self.assertIn("| 1.10x | 1.10x [0.75x–1.20x] (noisy) |", add)
        loop = rows[case("loop", "torch").replace("/impl:torch", "").replace("/device:cpu", "")]
        self.assertIn("| 0.40x | 1.00x [1.00x] |", loop)  # every round 1.0: settled, no mark
        relu = rows[case("relu", "torch").replace("/impl:torch", "").replace("/device:cpu", "")]
        self.assertIn("| 2.50x | — |", relu)
        self.assertIn("re-checked alternating with ours, the 3 cases where the peer was ahead or ours ahead "
                      "by less than 1.25x read 0.95x–1.10x (faster in 1)", text)
        self.assertIn("## Interleaved re-check", text)
        self.assertIn("in 3 rounds", text)

    def test_stops_each_case_on_its_noise(self):
        # Note [Re-check stops on noise], per round (ours 100 or 1 every round):
        #   loop 1.0 every round: its standard error is 0 after the 3rd round -> "noise"
        #   mul 0.5, 0.4, 0.6: far from the 5% line, the 95% interval clears it -> "decided"
        #   add 1.10, 0.75, 1.20, 0.90, 1.10: neither -> runs to --max-rounds
        self.canned_ours[case("add", "ours")] = [100] * 5
        self.canned_peer[case("add", "torch")] = [110, 75, 120, 90, 110]
        self.canned_peer[case("mul", "torch")] = [50, 40, 60]
        self.fake("ours", self.canned_ours, os.path.join(self.bench_dir, "bench_elementwise"))
        self.fake("peer", self.canned_peer, self.peers)
        p = self.recheck("--min-rounds", "3", "--max-rounds", "5", "--budget", "0")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.result()
        got = {c["b"]: c for c in doc["cases"]}
        self.assertEqual({k: (c["settled"], len(c["rounds"])) for k, c in got.items()},
                         {case("loop", "torch"): ("noise", 3), case("mul", "torch"): ("decided", 3),
                          case("add", "torch"): ("max rounds", 5)})
        self.assertEqual(got[case("loop", "torch")]["se"], 0)
        self.assertEqual((doc["context"]["stopped"], doc["context"]["min_rounds"], doc["context"]["max_rounds"]),
                         ("max rounds", 3, 5))
        # rounds 4 and 5 run only the open case, still alternating which side goes first
        calls = self.calls()
        self.assertEqual([k for k, _ in calls], ["ours", "peer", "peer", "ours", "ours", "peer", "peer", "ours",
                                                 "ours", "peer"])
        self.assertEqual(calls[6][1], [case("add", "torch")])
        self.assertEqual(calls[7][1], [case("add", "ours")])
        self.assertEqual([r["first"] for r in got[case("add", "torch")]["rounds"]], ["a", "b", "a", "b", "a"])
        # every side measured one repetition of the matrix's window, the same on both
        with open(self.log) as f:
            self.assertEqual(len(f.readlines()), 10)
        text = self.tables()
        self.assertIn("in 3 to 5 rounds, each case until the standard error of its log ratio was 2% or less", text)
        self.assertIn("| max rounds |", text)
        self.assertIn("| decided |", text)
        # the Summary quotes the re-checked ratio of the one row still ahead (mul, 0.50x)
        self.assertIn("torch on `cpu`: faster than ours on 1 of 4 cases (by 5% or more, re-checked "
                      "alternating); most on", text)
        self.assertIn("0.50x our time [0.40x–0.60x].", text)

    def test_the_budget_stops_new_rounds_once_every_case_has_its_minimum(self):
        self.canned_peer[case("add", "torch")] = [110, 75, 120, 90, 110]
        self.fake("peer", self.canned_peer, self.peers)
        p = self.recheck("--min-rounds", "2", "--max-rounds", "5", "--budget", "0.000001")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.result()
        self.assertEqual(doc["context"]["stopped"], "budget")
        self.assertEqual({len(c["rounds"]) for c in doc["cases"]}, {2})
        self.assertIn("budget", {c["settled"] for c in doc["cases"]})

    def test_the_costliest_style_is_rechecked_against_the_fastest(self):
        # our add in place at 1.5x its out= time in the first pass; alternating 1.2x
        sbtest.edit(os.path.join(self.json_dir, "elementwise.json"), lambda d: d["benchmarks"].extend(
            gbench("elementwise", {case("add", "ours", "inplace"): 1500})["benchmarks"]))
        self.canned_ours[case("add", "ours")] = [100, 0]
        self.canned_ours[case("add", "ours", "inplace")] = [0, 120]
        self.fake("ours", self.canned_ours, os.path.join(self.bench_dir, "bench_elementwise"))
        p = self.recheck("--rounds", "1", "--band", "1.01", "--layout-per-style", "0")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.result()
        self.assertTrue(doc["context"]["style"])
        [st] = [c for c in doc["cases"] if c["pick"] == "style"]
        self.assertEqual((st["a"], st["b"]), (case("add", "ours"), case("add", "ours", "inplace")))
        self.assertAlmostEqual(st["first_pass"], 1.5)
        self.assertAlmostEqual(st["ratio"]["median"], 1.2)
        text = self.tables()
        # the Summary's costliest style takes the interleaved ratio; one round cannot settle
        row = next(line for line in text.splitlines() if line.startswith("| elementwise |"))
        self.assertIn("1.20x the out time (noisy: re-check unsettled)", row)
        self.assertIn("costliest style of ours against the fastest style of its case (pick: style", text)

    def test_tables_reject_a_bad_recheck_file(self):
        self.assertEqual(self.recheck("--rounds", "1").returncode, 0)
        results = os.path.join(self.tmp, "results")
        self.assertEqual(sbtest.run("collect", "--json-dir", self.json_dir, "--results", results,
                                    "--no-plots").returncode, 0)
        dest = os.path.join(results, SLUG)
        before = sbtest.snapshot(dest)
        for bad in ({"cases": []}, {"context": {}, "cases": [{"a": "x", "b": case("add", "torch"), "rounds": []}]},
                    {"context": {}, "cases": [{"a": case("add", "ours"), "b": case("add", "torch"),
                                               "rounds": [{"a_ns": 0, "b_ns": 1}]}]},
                    {"context": {}, "cases": [{"a": case("add", "ours"), "b": case("add", "torch"),
                                               "rounds": [{"a_ns": 1, "b_ns": 1}]}]}):
            with open(os.path.join(dest, "raw", "recheck.json"), "w") as f:
                json.dump(bad, f)
            p = sbtest.run("tables", dest)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn("not a recheck file", p.stderr)
            self.assertEqual(sbtest.snapshot(dest)["TABLES.md"], before["TABLES.md"])


if __name__ == "__main__":
    unittest.main()
