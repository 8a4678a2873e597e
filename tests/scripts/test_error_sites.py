# test_error_sites.py: scripts/check_errors --log on a tree of sources and a log of raised
# checks: which SB_CHECKs it counts (multi-line ones, the branches of builds without CUDA)
# and which it leaves out (comments, macro bodies, CUDA-only branches and files).
import os
import unittest

import sbtest

A_CPP = """void f(int x) {
  SB_CHECK(x > 0, "f: x ", x);
  SB_CHECK(x < 10,
           "f: too big");
  SB_CHECK(x != 5, "f: five");
#ifdef SB_WITH_CUDA
  SB_CHECK(x != 6, "f: a CUDA build's");
#else
  SB_CHECK(x != 7, "f: a build without CUDA");
#endif
#ifndef SB_WITH_CUDA
  SB_CHECK(x != 8, "f: without CUDA again");
#else
  SB_CHECK(x != 9, "f: CUDA again");
#endif
  // SB_CHECK(x != 10, "a comment");
  int y = 0;  // SB_CHECK(y, "after code")
}
#define CHECKED(c) \\
  SB_CHECK(c, "in a macro")
"""
FILES = {
    "lib/a.cpp": A_CPP,
    "lib/cuda/b.cpp": 'void g() { SB_CHECK(false, "CUDA source"); }\n',
    "lib/conv/conv_cudnn.cpp": 'void h() { SB_CHECK(false, "cuDNN source"); }\n',
    "include/c.h": 'inline void k(int x) { SB_CHECK(x, "k"); }\n',
    "scripts/d.cpp": 'void m() { SB_CHECK(false, "outside lib and include"); }\n',
}


class ErrorSitesTest(unittest.TestCase):
    def log(self, root, lines):
        path = os.path.join(root, "throws.log")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    def test_counted_and_left_out(self):
        root = sbtest.source_tree(self, FILES)
        # __FILE__ as a build directory beside or inside the tree writes it; a multi-line
        # check may be reported at any of its lines
        log = self.log(root, ["../lib/a.cpp:2", "/x/build/../lib/a.cpp:4", "../include/c.h:1", "garbage"])
        p = sbtest.run("check_errors", "--root", root, "--log", log)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("3 of 6 checks raised by the tests", p.stdout)
        never = sorted(line.split(": never raised")[0] for line in p.stdout.splitlines() if "never raised" in line)
        self.assertEqual(never, ["lib/a.cpp:12", "lib/a.cpp:5", "lib/a.cpp:9"])

    def test_every_check_raised_passes(self):
        root = sbtest.source_tree(self, FILES)
        log = self.log(root, [f"../lib/a.cpp:{n}" for n in (2, 3, 5, 9, 12)] + ["../include/c.h:1"])
        p = sbtest.run("check_errors", "--root", root, "--log", log)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("6 of 6 checks raised by the tests", p.stdout)


if __name__ == "__main__":
    unittest.main()
