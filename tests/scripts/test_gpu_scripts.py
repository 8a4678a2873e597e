# test_gpu_scripts.py: a rehearsal of the GPU run on a machine without a GPU
# (scripts/gpu_prepare.sh, then the carried gpu_run.sh with SB_GPU_REHEARSAL=1): the
# exit codes, one summary line per step, the packing (at most 8 files come back), the
# time budget, that every carried binary finds its non-CUDA libraries in the carry, and
# the carry's size. Needs a CUDA build (SB_BUILD_DIR, set by meson); skips without one.
import os
import shutil
import subprocess
import tempfile
import unittest

from tests.scripts.sbtest import ROOT

BUILD = os.environ.get("SB_BUILD_DIR", "")
HAVE_CUDA_BUILD = bool(BUILD) and os.path.exists(os.path.join(BUILD, "benchmarks", "bench_baseline_cuda"))
# the C runtime and CUDA's own libraries (cuDNN among them) come from the device image,
# not the carry
SYSTEM = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "libgcc_s.so",
          "libstdc++.so", "libcudart.so", "libcublas.so", "libcublasLt.so", "libcuda.so", "libcudnn")


def read(path):
    with open(path) as f:
        return f.read()


@unittest.skipUnless(HAVE_CUDA_BUILD, "no CUDA build (SB_BUILD_DIR with benchmarks/bench_baseline_cuda)")
class GpuRehearsal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.carry = os.path.join(cls.tmp, "devcarry")
        cls.prep = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_prepare.sh"), BUILD, cls.carry],
                                  capture_output=True, text=True, timeout=300)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_gpu(self, out, **env):
        full = dict(os.environ, OUT=out, SB_GPU_REHEARSAL="1", SB_GPU_ROOT=ROOT, **env)
        return subprocess.run(["bash", os.path.join(self.carry, "gpu_run.sh")], capture_output=True, text=True,
                              env=full, timeout=300)

    def test_prepare_carries_binaries_and_libraries_in_a_payload_that_fits_a_call(self):
        self.assertEqual(self.prep.returncode, 0, self.prep.stderr)
        # gpu_run.sh and the payload; the other tests' runs may have unpacked bin/ and lib/ beside them
        self.assertLessEqual({"gpu_run.sh", "payload.tar.xz"}, set(os.listdir(self.carry)))
        carried = os.path.getsize(os.path.join(self.carry, "payload.tar.xz"))
        tree = subprocess.run("git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s --",
                              shell=True, cwd=ROOT, capture_output=True, text=True).stdout.split()
        self.assertLess(carried + sum(int(n) for n in tree), 62 << 20)  # a device call carries 64 MiB
        subprocess.run(["tar", "-xJf", os.path.join(self.carry, "payload.tar.xz"), "-C", self.carry], check=True)
        bins = os.listdir(os.path.join(self.carry, "bin"))
        for b in ("copy_test", "elementwise_test", "reduce_test", "matmul_test", "conv_test", "quant_test", "cuda_allocator_test",
                  "differential_test", "torch_parity_dump", "bench_baseline_cuda", "bench_transfer", "bench_quant_cuda"):
            self.assertIn(b, bins)
        lib = os.path.join(self.carry, "lib")
        for b in bins:  # with only the carry on the path, every non-system library resolves into it
            ldd = subprocess.run(["ldd", os.path.join(self.carry, "bin", b)], capture_output=True, text=True,
                                 env=dict(os.environ, LD_LIBRARY_PATH=lib)).stdout
            for line in ldd.splitlines():
                name = line.split()[0]
                if "=>" not in line or name.startswith(SYSTEM):
                    continue
                self.assertIn(lib, line, f"{b}: {line.strip()}")

    def test_rehearsal_runs_every_step_and_packs(self):
        out = os.path.join(self.tmp, "out-all")
        r = self.run_gpu(out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        summary = read(os.path.join(out, "summary.txt"))
        for line in ("test copy_test: rc=0", "test conv_test: rc=0", "test quant_test: rc=0", "test cuda_allocator_test: rc=0",
                     "test differential_test: rc=0", "bench bench_baseline_cuda: rc=0",
                     "bench bench_transfer: rc=0", "peers: rc=0", "gpu_run: done"):
            self.assertIn(line, summary)
        # the baseline runs first, whatever SB_GPU_BENCH names
        benches = [l for l in summary.splitlines() if l.startswith("bench ")]
        self.assertTrue(benches[0].startswith("bench bench_baseline_cuda"), benches)
        files = os.listdir(out)
        self.assertLessEqual(len(files), 8, files)
        self.assertTrue(all(f == "summary.txt" or f.endswith(".tar.gz") for f in files), files)
        for step in ("tests", "bench", "peers"):
            self.assertIn(f"{step}.tar.gz", files)
        # binaries that link cuDNN find it on the machine and say which one (gpu_run.sh)
        linked = subprocess.run(["ldd", os.path.join(self.carry, "bin", "conv_test")], capture_output=True,
                                text=True).stdout
        if "libcudnn" in linked:
            self.assertRegex(summary, r"(?m)^cudnn: /.*libcudnn\.so")

    def test_baseline_joins_any_bench_selection(self):
        out = os.path.join(self.tmp, "out-sel")
        r = self.run_gpu(out, SB_GPU_STEPS="bench", SB_GPU_BENCH="bench_reduce_cuda bench_baseline_cuda")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        benches = [l.split(":")[0] for l in read(os.path.join(out, "summary.txt")).splitlines() if l.startswith("bench ")]
        self.assertEqual(benches, ["bench bench_baseline_cuda", "bench bench_reduce_cuda"])

    def test_an_exhausted_budget_stops_steps_but_still_reports(self):
        out = os.path.join(self.tmp, "out-budget")
        r = self.run_gpu(out, SB_GPU_STEPS="tests bench", SB_GPU_BUDGET="5")
        self.assertNotEqual(r.returncode, 0)
        summary = read(os.path.join(out, "summary.txt"))
        self.assertIn("rc=124 (timed out)", summary)
        self.assertIn("gpu_run: done", summary)

    def test_recheck_step_is_packed_on_its_own(self):
        out = os.path.join(self.tmp, "out-recheck")
        r = self.run_gpu(out, SB_GPU_STEPS="recheck")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("recheck: rc=0 (rehearsal", read(os.path.join(out, "summary.txt")))
        self.assertIn("recheck.tar.gz", os.listdir(out))

    def test_cputests_step_runs_the_cpu_cases_into_the_tests_pack(self):
        out = os.path.join(self.tmp, "out-cpu")
        r = self.run_gpu(out, SB_GPU_STEPS="cputests", SB_GPU_CPU_TESTS="quant_test cuda_stream_test")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        summary = read(os.path.join(out, "summary.txt"))
        self.assertRegex(summary, r"cpu test quant_test: rc=0 \[  PASSED  \] [1-9]")
        self.assertIn("cpu test cuda_stream_test: rc=0", summary)
        self.assertEqual(sorted(os.listdir(out)), ["summary.txt", "tests.tar.gz"])  # one file, as tests'
        names = subprocess.run(["tar", "-tzf", os.path.join(out, "tests.tar.gz")], capture_output=True,
                               text=True).stdout.split()
        self.assertLessEqual({"cpu-lscpu.txt", "cpu-quant_test.log", "cpu-quant_test.xml"}, set(names))
        # a spent budget names the binaries it did not run and fails the call
        out2 = os.path.join(self.tmp, "out-cpu-spent")
        r = self.run_gpu(out2, SB_GPU_STEPS="cputests", SB_GPU_CPU_TESTS="quant_test", SB_GPU_CPU_BUDGET="0")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cpu test quant_test: not run (SB_GPU_CPU_BUDGET spent)", read(os.path.join(out2, "summary.txt")))

    def test_parity_step_checks_against_pytorch_or_says_it_skipped(self):
        # with the python3 first on PATH: the image's has PyTorch; here it may not
        out = os.path.join(self.tmp, "out-parity")
        r = self.run_gpu(out, SB_GPU_STEPS="parity")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        summary = read(os.path.join(out, "summary.txt"))
        self.assertRegex(summary, r"parity: (rc=0 0 cases differ; torch_parity \[default\]: [1-9]|skipped \(torch_parity: skipped)")
        self.assertEqual(sorted(os.listdir(out)), ["summary.txt", "tests.tar.gz"])
        names = subprocess.run(["tar", "-tzf", os.path.join(out, "tests.tar.gz")], capture_output=True,
                               text=True).stdout.split()
        self.assertIn("torch_parity.log", names)
        # a python3 with PyTorch runs it (Debian's, where installed and not first on PATH)
        if "parity: skipped" in summary and \
                subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0:
            out2 = os.path.join(self.tmp, "out-parity-torch")
            r = self.run_gpu(out2, SB_GPU_STEPS="parity", PATH="/usr/bin" + os.pathsep + os.environ["PATH"])
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertRegex(read(os.path.join(out2, "summary.txt")),
                             r"parity: rc=0 0 cases differ; torch_parity \[default\]: [1-9][0-9]* cases")

    def test_profile_step_checks_its_entries(self):
        out = os.path.join(self.tmp, "out-profile")
        r = self.run_gpu(out, SB_GPU_STEPS="profile",
                         SB_GPU_PROFILE="bench_reduce_cuda|reduce/.*dim:outer|reduce_column;bench_nothing|x|y;bench_copy_cuda|copy/")
        self.assertNotEqual(r.returncode, 0)  # the second and third entries are malformed
        summary = read(os.path.join(out, "summary.txt"))
        self.assertIn("profile 1 (bench_reduce_cuda, reduce_column): rehearsal, not run", summary)
        self.assertIn("profile 2: 'bench_nothing|x|y' is not binary|benchmark filter|kernel regex", summary)
        self.assertIn("profile 3: 'bench_copy_cuda|copy/' is not", summary)
        out2 = os.path.join(self.tmp, "out-profile-none")
        r = self.run_gpu(out2, SB_GPU_STEPS="profile")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("profile: SB_GPU_PROFILE names no row", read(os.path.join(out2, "summary.txt")))

    def test_unknown_cpu_test_binary_is_named(self):
        out = os.path.join(self.tmp, "out-cpu-unknown")
        r = self.run_gpu(out, SB_GPU_STEPS="cputests", SB_GPU_CPU_TESTS="reduce")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cpu test reduce: not in .devcarry/bin", read(os.path.join(out, "summary.txt")))

    def test_payload_unpacks_through_python_where_the_image_has_no_xz(self):
        carry = os.path.join(self.tmp, "carry-noxz")
        os.makedirs(carry)
        for f in ("gpu_run.sh", "payload.tar.xz"):
            shutil.copy(os.path.join(self.carry, f), carry)
        stub = os.path.join(self.tmp, "stub-noxz")  # an xz that fails, first on PATH
        os.makedirs(stub)
        with open(os.path.join(stub, "xz"), "w") as f:
            f.write("#!/bin/sh\nexit 127\n")
        os.chmod(os.path.join(stub, "xz"), 0o755)
        out = os.path.join(self.tmp, "out-noxz")
        env = dict(os.environ, OUT=out, SB_GPU_REHEARSAL="1", SB_GPU_ROOT=ROOT, SB_GPU_STEPS="cputests",
                   SB_GPU_CPU_TESTS="quant_test", PATH=stub + os.pathsep + os.environ["PATH"])
        r = subprocess.run(["bash", os.path.join(carry, "gpu_run.sh")], capture_output=True, text=True, env=env,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("quant_test", os.listdir(os.path.join(carry, "bin")))
        self.assertRegex(read(os.path.join(out, "summary.txt")), r"cpu test quant_test: rc=0 \[  PASSED  \] [1-9]")

    def test_missing_cuda_library_fails_in_the_first_seconds(self):
        out = os.path.join(self.tmp, "out-missing")
        r = self.run_gpu(out, SB_GPU_CUDA_LIBS="libcudart.so.13 libcublas.so.99")
        self.assertEqual(r.returncode, 2, r.stdout)
        summary = read(os.path.join(out, "summary.txt"))
        self.assertIn("not found on this machine: libcublas.so.99", summary)
        self.assertNotIn("test copy_test", summary)  # nothing ran

    def test_ab_step_alternates_old_and_new_binaries(self):
        old = os.path.join(self.tmp, "oldbin")
        os.makedirs(old)
        shutil.copy(os.path.join(BUILD, "benchmarks", "bench_reduce_cuda"), old)
        carry = os.path.join(self.tmp, "devcarry-ab")
        p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_prepare.sh"), BUILD, carry], capture_output=True,
                           text=True, timeout=300, env=dict(os.environ, SB_GPU_OLD=old))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("carry old: bench_reduce_cuda", p.stdout)
        out = os.path.join(self.tmp, "out-ab")
        r = subprocess.run(["bash", os.path.join(carry, "gpu_run.sh")], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OUT=out, SB_GPU_REHEARSAL="1", SB_GPU_ROOT=ROOT, SB_GPU_STEPS="ab",
                                    SB_GPU_AB_ROUNDS="2", SB_GPU_PACK="0"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ab bench_reduce_cuda: 2 rounds", read(os.path.join(out, "summary.txt")))
        self.assertEqual(sorted(os.listdir(os.path.join(out, "ab"))),
                         sorted(f"bench_reduce_cuda.{side}.{n}.list" for n in (1, 2) for side in ("new", "old")))
        # without an old build the step says so and fails
        out2 = os.path.join(self.tmp, "out-ab2")
        r = self.run_gpu(out2, SB_GPU_STEPS="ab")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ab: no .devcarry/old", read(os.path.join(out2, "summary.txt")))

    def test_variants_step_alternates_each_variant_with_this_build(self):
        var = os.path.join(self.tmp, "varbin")
        os.makedirs(var)
        for b in ("benchmarks/bench_reduce_cuda", "tests/quant_test"):
            shutil.copy(os.path.join(BUILD, b), var)
        carry = os.path.join(self.tmp, "devcarry-var")
        prep = lambda v: subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_prepare.sh"), BUILD, carry],
                                        capture_output=True, text=True, timeout=300,
                                        env=dict(os.environ, SB_GPU_VARIANTS=v))
        p = prep(f"B2={var}")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("carry variant B2: bench_reduce_cuda quant_test", p.stdout)
        out = os.path.join(self.tmp, "out-var")
        r = subprocess.run(["bash", os.path.join(carry, "gpu_run.sh")], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OUT=out, SB_GPU_REHEARSAL="1", SB_GPU_ROOT=ROOT,
                                    SB_GPU_STEPS="variants", SB_GPU_AB_ROUNDS="2", SB_GPU_PACK="0"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        summary = read(os.path.join(out, "summary.txt"))
        self.assertIn("variant B2 test quant_test: rc=0", summary)
        self.assertIn("variant B2 bench_reduce_cuda: 2 rounds", summary)
        self.assertEqual(sorted(f for f in os.listdir(os.path.join(out, "variants", "B2")) if f.endswith(".list")),
                         sorted(f"bench_reduce_cuda.{side}.{n}.list" for n in (1, 2) for side in ("new", "old")))
        # an entry that is not NAME=<dir> stops the packing
        p = prep(var)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("is not NAME=<dir of binaries>", p.stderr)


if __name__ == "__main__":
    unittest.main()


class GpuVariantPatches(unittest.TestCase):
    """The variants waiting for a device (scripts/variants/*.patch, docs/GPU.md section 5)
    apply to HEAD: a change to main that breaks one fails here, not in the device call."""

    def test_every_variant_applies_to_head(self):
        vdir = os.path.join(ROOT, "scripts", "variants")
        patches = sorted(f for f in os.listdir(vdir) if f.endswith(".patch")) if os.path.isdir(vdir) else []
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        subprocess.run(["git", "-C", ROOT, "read-tree", "HEAD"], env=env, check=True)
        for f in patches:
            p = subprocess.run(["git", "-C", ROOT, "apply", "--cached", "--check", os.path.join(vdir, f)],
                               capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, 0, f + ": " + p.stderr)
        with open(os.path.join(ROOT, "docs", "GPU.md")) as g:
            gpu = g.read()
        for f in patches:  # each waits in section 5's call
            self.assertIn("scripts/variants/" + f, gpu, f + " is not in docs/GPU.md's call")


class GpuVariantInput(unittest.TestCase):
    """scripts/gpu_variant.sh refuses bad input with one message and exit 2, before it
    creates a worktree or a folder (building a variant needs a CUDA build and minutes:
    docs/GPU.md gives the run)."""

    def run_variant(self, *args):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        env = dict(os.environ, VARIANTS=os.path.join(tmp, "v"), BUILD=BUILD or os.path.join(tmp, "nobuild"))
        p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_variant.sh"), *args],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertFalse(os.path.exists(os.path.join(tmp, "v")), p.stderr)
        return p

    def test_bad_input_creates_nothing(self):
        for args, says in ((("B", "HEAD"), "usage"), (("B C", "HEAD", "x"), "NAME"),
                           (("B", "no-such-revision", "x"), "REV 'no-such-revision'")):
            p = self.run_variant(*args)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(says, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        bad = os.path.join(tempfile.mkdtemp(), "bad.patch")
        self.addCleanup(shutil.rmtree, os.path.dirname(bad), ignore_errors=True)
        with open(bad, "w") as f:
            f.write("--- a/lib/no_such_file.cu\n+++ b/lib/no_such_file.cu\n@@ -1 +1 @@\n-x\n+y\n")
        for args, says in ((("B", "no_such.patch", "x"), "PATCH 'no_such.patch' is not a file"),
                           (("B", bad, "x"), "does not apply to HEAD")):
            p = self.run_variant(*args)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(says, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        p = self.run_variant("B", "HEAD", "tests/no_such_test")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertTrue("TARGET 'tests/no_such_test'" in p.stderr or "not a configured build folder" in p.stderr,
                        p.stderr)
        worktrees = subprocess.run(["git", "-C", ROOT, "worktree", "list"], capture_output=True, text=True).stdout
        self.assertNotIn("sb-variants", worktrees)
