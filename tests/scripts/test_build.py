# test_build.py: a CUDA object of the build records the headers it includes, so that an
# edited CUDA header rebuilds what includes it. Meson before 1.4 gives nvcc no
# dependency flags; scripts/run then configures the build with scripts/nvcc_depfile as
# the CUDA compiler (README, "Plain Meson works too"). Skips without a CUDA object, and
# for a build of such a Meson configured by hand without that script.
import os
import subprocess
import unittest

BUILD = os.environ.get("SB_BUILD_DIR", "")
OBJ = os.path.join("lib", "libsb_cuda.a.p", "copy_copy.cu.o")


def meson_version():
    out = subprocess.run(["meson", "--version"], capture_output=True, text=True).stdout.strip()
    return tuple(int(x) for x in out.split(".")[:2] if x.isdigit())


class CudaHeaderDependencies(unittest.TestCase):
    def test_cuda_objects_record_their_headers(self):
        if not BUILD or not os.path.exists(os.path.join(BUILD, OBJ)):
            self.skipTest("no CUDA object in SB_BUILD_DIR")
        if meson_version() < (1, 4) and not os.path.exists(os.path.join(BUILD, "nvcc_depfile.ini")):
            self.skipTest("meson before 1.4, configured without scripts/nvcc_depfile (README)")
        deps = subprocess.run(["ninja", "-C", BUILD, "-t", "deps", OBJ], capture_output=True, text=True).stdout
        for header in ("kernel_util.cuh", "cuda_backend.h", "stridebench/tensor.h"):
            self.assertIn(header, deps, f"{OBJ} does not record {header}: an edit to it would not rebuild the object")


if __name__ == "__main__":
    unittest.main()
