# test_comments.py: scripts/check_comments on a tree of sources with and without
# measurements in their comments, and on this repository.
import os
import unittest

import sbtest

BAD = {
    "lib/a.cpp": "int x;  // KC = 512 ran 1.03x faster\n",
    "lib/b.h": "/* a round trip\n   (~10 µs on an H100) */\nint y;\n",
    "benchmarks/c.cu": "// HBM ~3.35 TB/s nominal\n",
    "benchmarks/d.cpp": "// the kernels reached 78-81% of the copy\n",
    "lib/meson.build": "x = 1  # +3-7% over the loop\n",
    "include/e.h": "// 63 µs of a 2.77 ms layer\n",
}
CLEAN = {
    "lib/f.cpp": 'const char* s = "took 5 ms, 3 GB/s";  // a string, not a comment\n'
                 "// Note [X]: blocks of 16 rows, 64-byte lines, 4 KiB pages (docs/notes/x.md)\n"
                 "int z = 2;  // 2x the size of a tile, 100 planes\n",
    "lib/meson.build": "y = '# not a comment 5 ms'  # KC from cpu_tuning()\n",
    "scripts/g.py": "# 5 ms here is outside the checked folders\n",
}


class CommentsTest(unittest.TestCase):
    def test_every_kind_of_measurement_is_found_with_its_line(self):
        root = sbtest.source_tree(self, BAD)
        p = sbtest.run("check_comments", root)
        self.assertEqual(p.returncode, 1, p.stdout)
        for where in ("lib/a.cpp:1: a comment carries a speed-up", "lib/b.h:2: a comment carries a time",
                      "benchmarks/c.cu:1: a comment carries a rate", "benchmarks/d.cpp:1: a comment carries a measured share",
                      "lib/meson.build:1: a comment carries a measured share", "include/e.h:1: a comment carries a time"):
            self.assertIn(where, p.stdout)
        self.assertIn("6 comment line(s) carry measurements", p.stderr)

    def test_strings_sizes_and_other_folders_pass(self):
        p = sbtest.run("check_comments", sbtest.source_tree(self, CLEAN))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_this_repository_is_clean(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        p = sbtest.run("check_comments", root)
        self.assertEqual(p.returncode, 0, p.stdout)


if __name__ == "__main__":
    unittest.main()
