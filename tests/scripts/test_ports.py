# test_ports.py: every x86-only header (<immintrin.h>, <x86intrin.h>, <cpuid.h>) in the
# C++ sources is included behind the build's AVX2 level or an x86 test, so a build for
# another CPU compiles (Note [Builds for another CPU], scripts/check_ports). With these
# guards, the portable x86 build of `scripts/run test` (-Dsimd=none) fails on any
# intrinsic used outside them; check_ports builds for aarch64 itself.
import os
import re
import tempfile
import unittest

import sbtest

DIRS = ("lib", "include", "benchmarks", "tests", "cases")
X86_HEADER = re.compile(r"#\s*include\s*<(immintrin|x86intrin|cpuid)\.h>")
GUARDS = ("#ifdef SB_HAVE_AVX2", "#if defined(__x86_64__) || defined(__i386__)")


def unguarded(root):
    """path:line of every x86-only include whose line before is not one of GUARDS."""
    out = []
    for top in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".cuh", ".cu", ".inc")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    lines = f.read().split("\n")
                for i, line in enumerate(lines):
                    if X86_HEADER.match(line.strip()) and (i == 0 or lines[i - 1].strip() not in GUARDS):
                        out.append(f"{os.path.relpath(path, root)}:{i + 1}")
    return out


class X86HeadersGuarded(unittest.TestCase):
    def test_every_x86_header_is_guarded(self):
        self.assertEqual(unguarded(sbtest.ROOT), [], "include these behind #ifdef SB_HAVE_AVX2 "
                         "(or an x86 test): a build for another CPU has no such header")

    def test_an_unguarded_include_is_found(self):
        tmp = tempfile.mkdtemp()
        os.makedirs(os.path.join(tmp, "lib", "core"))
        with open(os.path.join(tmp, "lib", "core", "a.cpp"), "w") as f:
            f.write("// a kernel\n#include <immintrin.h>\n#ifdef SB_HAVE_AVX2\n#include <immintrin.h>\n#endif\n")
        self.assertEqual(unguarded(tmp), [os.path.join("lib", "core", "a.cpp") + ":2"])


if __name__ == "__main__":
    unittest.main()
