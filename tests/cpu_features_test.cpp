// cpu_features_test.cpp — what the CPU is and the tuning chosen from it (Note [Tuning by
// microarchitecture] in cpu_features.h). The GEMM under forced block sizes is tested in
// matmul_test.cpp, the transposes' bands in copy_test.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/test_hooks.h"
#include "stridebench/cpu_features.h"
#include "stridebench/error.h"

namespace sb {
namespace {

TEST(CpuArch, KnownFamiliesAndModels) {
  struct Case {
    CpuVendor v;
    int family, model;
    CpuArch want;
  };
  const Case cases[] = {
      {CpuVendor::AMD, 25, 1, CpuArch::Zen3},      // EPYC 7003 (Milan): amd-epyc-f25m1
      {CpuVendor::AMD, 25, 0x21, CpuArch::Zen3},   // Ryzen 5000 (Vermeer)
      {CpuVendor::AMD, 25, 17, CpuArch::Zen4},     // EPYC 9004 (Genoa): amd-epyc-f25m17
      {CpuVendor::AMD, 25, 0x61, CpuArch::Zen4},   // Ryzen 7000 (Raphael)
      {CpuVendor::AMD, 25, 0xA0, CpuArch::Zen4},   // EPYC 97x4 (Bergamo)
      {CpuVendor::AMD, 26, 2, CpuArch::Zen5},      // EPYC 9005 (Turin): the family-26 VM
      {CpuVendor::AMD, 23, 1, CpuArch::Zen},       // EPYC 7001 (Naples)
      {CpuVendor::AMD, 23, 0x31, CpuArch::Zen2},   // EPYC 7002 (Rome)
      {CpuVendor::Intel, 6, 0x55, CpuArch::SkylakeX},
      {CpuVendor::Intel, 6, 0x6A, CpuArch::IceLakeX},
      {CpuVendor::Intel, 6, 143, CpuArch::SapphireRapids},
      {CpuVendor::Intel, 6, 207, CpuArch::SapphireRapids},  // Emerald Rapids: the H100 host
      {CpuVendor::Intel, 6, 0xAD, CpuArch::GraniteRapids},
      {CpuVendor::Intel, 6, 0x97, CpuArch::Other},  // Alder Lake: not a design we tune
      {CpuVendor::AMD, 25, -1, CpuArch::Zen3},
      {CpuVendor::Other, 25, 17, CpuArch::Other},   // the family numbers are the vendor's
      {CpuVendor::Intel, 25, 17, CpuArch::Other},
  };
  for (const Case& c : cases)
    EXPECT_EQ(arch_of(c.v, c.family, c.model), c.want)
        << "family " << c.family << " model " << c.model << ": got " << cpu_arch_name(arch_of(c.v, c.family, c.model));
}

// cpu_id() against the kernel's own decoding of cpuid (/proc/cpuinfo), where there is one.
TEST(CpuArch, IdMatchesProcCpuinfo) {
#if !defined(__x86_64__) && !defined(__i386__)
  // cpu_id decodes cpuid, an x86 instruction: elsewhere family and model are -1 whatever
  // the kernel prints (under qemu-user, the host's x86 /proc/cpuinfo)
  EXPECT_EQ(cpu_id().family, -1);
  EXPECT_EQ(cpu_id().arch, CpuArch::Other);
  GTEST_SKIP() << "cpu_id reads cpuid on x86 only";
#endif
  std::ifstream f("/proc/cpuinfo");
  int family = -1, model = -1;
  for (std::string line; std::getline(f, line) && (family < 0 || model < 0);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key == "cpu family") family = std::atoi(line.c_str() + colon + 1);
    if (key == "model") model = std::atoi(line.c_str() + colon + 1);
  }
  if (family < 0 || model < 0) GTEST_SKIP() << "no cpu family/model in /proc/cpuinfo";
  const CpuId& id = cpu_id();
  EXPECT_EQ(id.family, family);
  EXPECT_EQ(id.model, model);
  EXPECT_EQ(id.arch, arch_of(id.vendor, family, model));
  EXPECT_EQ(cpu_tuning().arch, id.arch);
}

CpuId id_of(CpuVendor v, int family, int model) { return {v, family, model, arch_of(v, family, model)}; }

TEST(CpuTuning, RowsPerDesign) {
  const CacheSizes caches{32 << 10, 1 << 20, 32 << 20, 3};
  const CpuTuning zen4 = tuning_for(id_of(CpuVendor::AMD, 25, 17), caches);
  EXPECT_EQ(zen4.gemm_kc, 512);
  EXPECT_EQ(zen4.transpose_band_rows, 16);
  EXPECT_TRUE(zen4.transpose_blocks);
  EXPECT_EQ(zen4.group_bytes, 512 << 10);
  EXPECT_EQ(zen4.group_min, 1);
  EXPECT_EQ(zen4.basis, "measured on zen4");
  const CpuTuning spr = tuning_for(id_of(CpuVendor::Intel, 6, 143), caches);
  EXPECT_EQ(spr.gemm_kc, 256);
  EXPECT_EQ(spr.transpose_band_rows, 32);
  EXPECT_FALSE(spr.transpose_blocks);
  EXPECT_EQ(spr.group_bytes, 128 << 10);
  EXPECT_EQ(spr.group_min, 2);
  EXPECT_EQ(spr.stage_chunk_strips, 16);  // Note [Chunked staging]: a float32 line a row there,
  EXPECT_EQ(zen4.stage_chunk_strips, 8);  // half a line on Zen 4
  EXPECT_EQ(spr.basis, "measured on sapphire-rapids");
  // Zen 5: Zen 4's blocks with the wide tile (Note [Wide tile])
  const CpuTuning zen5 = tuning_for(id_of(CpuVendor::AMD, 26, 2), caches);
  EXPECT_EQ(zen5.arch, CpuArch::Zen5);
  EXPECT_EQ(zen5.gemm_tile_cols, 32);
  EXPECT_EQ(zen4.gemm_tile_cols, 16);
  EXPECT_EQ(spr.gemm_tile_cols, 32);  // measured on the Sapphire Rapids-class VM (docs/notes/gemm.md)
  EXPECT_EQ(spr.gemm_amx_kc, 256);     // Note [bfloat16 GEMM in AMX tiles]
  EXPECT_EQ(spr.gemm_amx_mc, 32);
  EXPECT_TRUE(spr.bf16_dot_runs);  // the long bf16 sums by dot products up to four L2s there,
  EXPECT_EQ(spr.bf16_dot_runs_max, 4 << 20);  // widened beyond (docs/notes/copy-reduce.md)
  EXPECT_TRUE(zen4.bf16_dot_runs);
  EXPECT_EQ(zen4.bf16_dot_runs_max, 0);
  EXPECT_TRUE(zen5.bf16_dot_runs);
  EXPECT_EQ(zen5.bf16_dot_runs_max, 0);
  EXPECT_TRUE(zen5.zmm16);  // Note [zmm 2-byte tiles]: measured on Zen 5 and Zen 4
  EXPECT_TRUE(zen4.zmm16);
  EXPECT_TRUE(spr.zmm16);  // measured on the Sapphire Rapids-class VM (docs/notes/copy-reduce.md),
  EXPECT_EQ(spr.zmm16_lines_min, 64);  // but its streaming runs staged, from source rows of 64 on
  EXPECT_EQ(zen4.zmm16_lines_min, 16);
  EXPECT_EQ(zen5.zmm16_lines_min, 64);
  EXPECT_TRUE(spr.zmm16_stage);  // Note [Staged 2-byte tile runs]: measured there and on Zen 5
  EXPECT_TRUE(zen5.zmm16_stage);
  EXPECT_TRUE(spr.var_rows_zmm);  // Note [Short var rows in zmm]: faster there and on Zen 5
  EXPECT_TRUE(zen5.var_rows_zmm);
  EXPECT_FALSE(zen4.var_rows_zmm);
  EXPECT_FALSE(zen4.zmm16_stage);
  EXPECT_EQ(spr.bands16_min_bytes, int64_t{48} << 20);  // Note [Transpose bands]: 2-byte NCHW -> NHWC plain below
  EXPECT_TRUE(spr.prefetch16);  // Note [bfloat16 zmm rows prefetch]: faster there, slower on Zen 5
  EXPECT_FALSE(zen4.prefetch16);
  EXPECT_FALSE(zen5.prefetch16);
  EXPECT_TRUE(spr.prefetch16_rows);  // Note [16-bit rows prefetch the next group]: faster on both
  EXPECT_TRUE(zen5.prefetch16_rows);
  EXPECT_FALSE(zen4.prefetch16_rows);
  EXPECT_TRUE(zen4.pool_rows_zmm);  // Note [Pooling rows in zmm]: faster on Zen 4, slower on Zen 5
  EXPECT_FALSE(zen5.pool_rows_zmm);
  EXPECT_TRUE(spr.pool_rows_zmm);
  EXPECT_TRUE(zen5.sum_runs_zmm);  // Note [float32 sums in zmm]: measured on Zen 5 only
  EXPECT_FALSE(zen4.sum_runs_zmm);
  EXPECT_FALSE(spr.sum_runs_zmm);
  EXPECT_TRUE(zen5.rows_in_order);  // Note [Short rows in address order]: measured on Zen 5 and Sapphire Rapids
  EXPECT_FALSE(zen4.rows_in_order);
  EXPECT_TRUE(spr.rows_in_order);
  EXPECT_TRUE(zen5.buf_columns_in_order);  // Note [Narrow columns in registers]: slower on Sapphire Rapids
  EXPECT_FALSE(zen4.buf_columns_in_order);
  EXPECT_FALSE(spr.buf_columns_in_order);
  EXPECT_EQ(spr.band_read_bytes, 32 * 1024);  // Note [Contiguous bands read in order]: measured there only
  EXPECT_EQ(zen4.band_read_bytes, 0);
  EXPECT_EQ(zen5.band_read_bytes, 0);
  EXPECT_EQ(zen4.bands16_min_bytes, 0);
  EXPECT_EQ(zen5.bands16_min_bytes, 0);
  EXPECT_TRUE(spr.tiled_partial_nt);  // Note [Streaming elementwise outputs]: measured there only
  EXPECT_FALSE(zen4.tiled_partial_nt);
  EXPECT_FALSE(zen5.tiled_partial_nt);
  EXPECT_TRUE(spr.aliased_transpose_nt);  // Note [Aliased transposes stream]: measured there only
  EXPECT_FALSE(zen4.aliased_transpose_nt);
  EXPECT_FALSE(zen5.aliased_transpose_nt);
  EXPECT_TRUE(zen5.zmm16_fill);  // buffers filled through them: Zen 5 and Sapphire Rapids
  EXPECT_FALSE(zen4.zmm16_fill);
  EXPECT_TRUE(spr.zmm16_fill);
  // Note [Dense copies in the last-level cache]: Zen 4's and Zen 5's own measurements
  // (half the LLC, at most half of one CCD's 32 MiB), not their row's: the designs that
  // borrow the row keep the streaming threshold
  EXPECT_EQ(zen4.copy_nt_bytes, 16 << 20);
  EXPECT_EQ(zen5.copy_nt_bytes, 16 << 20);
  EXPECT_EQ(spr.copy_nt_bytes, 0);
  const CacheSizes vm_caches{48 << 10, 1 << 20, int64_t{508} << 20, 2};  // the family-26 VM's report
  EXPECT_EQ(tuning_for(id_of(CpuVendor::AMD, 26, 2), vm_caches).copy_nt_bytes, 16 << 20);
  EXPECT_EQ(tuning_for(id_of(CpuVendor::AMD, 26, 2), CacheSizes{48 << 10, 1 << 20, 16 << 20, 2}).copy_nt_bytes,
            8 << 20);
  // Note [Grain in bytes]: measured on Zen 4 (32768, in elements) and Zen 5 (65536, in bytes)
  EXPECT_EQ(zen4.grain16, 32768);
  EXPECT_EQ(zen5.grain16, 65536);
  EXPECT_EQ(spr.grain16, 32768);
  EXPECT_EQ(zen4.grain_bytes, 131072);  // PyTorch's grain of 4-byte elements
  EXPECT_EQ(zen5.grain_bytes, 262144);
  EXPECT_EQ(spr.grain_bytes, 131072);
  CpuTuning zen4_row = zen4;
  zen4_row.copy_nt_bytes = 0;
  CpuTuning zen5_as_zen4 = zen5;
  zen5_as_zen4.gemm_tile_cols = 16;
  zen5_as_zen4.zmm16_fill = false;
  zen5_as_zen4.grain16 = 32768;
  zen5_as_zen4.grain_bytes = 131072;
  zen5_as_zen4.zmm16_stage = false;
  zen5_as_zen4.zmm16_lines_min = 16;
  zen5_as_zen4.copy_nt_bytes = 0;
  zen5_as_zen4.prefetch16_rows = false;
  zen5_as_zen4.pool_rows_zmm = true;
  zen5_as_zen4.sum_runs_zmm = false;
  zen5_as_zen4.rows_in_order = false;
  zen5_as_zen4.buf_columns_in_order = false;
  zen5_as_zen4.var_rows_zmm = false;
  EXPECT_EQ(describe_tuning(zen5_as_zen4), describe_tuning(zen4_row));
  EXPECT_NE(zen5.basis.find("measured on zen5"), std::string::npos) << zen5.basis;
  // a design nobody measured takes its nearest measured row and says so
  const CpuTuning zen2 = tuning_for(id_of(CpuVendor::AMD, 23, 0x31), caches);
  EXPECT_EQ(zen2.arch, CpuArch::Zen2);
  EXPECT_EQ(describe_tuning(zen2), describe_tuning(zen4_row));
  EXPECT_NE(zen2.basis.find("not measured on zen2"), std::string::npos) << zen2.basis;
  const CpuTuning adl = tuning_for(id_of(CpuVendor::Intel, 6, 0x97), caches);
  EXPECT_EQ(describe_tuning(adl), describe_tuning(spr));
  EXPECT_NE(adl.basis.find("unknown design"), std::string::npos) << adl.basis;
  // the defaults, measured nowhere, are the same for every design's row
  EXPECT_EQ(zen4.gemm_mc, 144);
  EXPECT_EQ(zen4.gemm_nc, 1024);
  EXPECT_EQ(spr.gemm_mc, 144);
  EXPECT_EQ(spr.gemm_nc, 1024);
}

// An unknown vendor's core: blocks sized from its caches, never above the defaults.
TEST(CpuTuning, UnknownDesignSizedFromCaches) {
  const CpuId other = id_of(CpuVendor::Other, 8, 0);
  const CpuTuning big = tuning_for(other, {64 << 10, 2 << 20, 64 << 20, 3});
  EXPECT_EQ(big.gemm_kc, 256);
  EXPECT_EQ(big.gemm_mc, 144);
  EXPECT_EQ(big.gemm_nc, 1024);
  EXPECT_NE(big.basis.find("caches"), std::string::npos);
  // 24 KiB L1d: KC 128 (a 128 x 16 float32 B micro-panel is 8 KiB); 64 KiB L2: MC = 32 KiB
  // / (128 * 4 bytes) = 64 rows; 256 KiB LLC: NC = 128 KiB / 512 bytes = 256 columns
  const CpuTuning small = tuning_for(other, {24 << 10, 64 << 10, 256 << 10, 3});
  EXPECT_EQ(small.gemm_kc, 128);
  EXPECT_EQ(small.gemm_mc, 64);
  EXPECT_EQ(small.gemm_nc, 256);
  const CpuTuning unknown = tuning_for(other, {0, 0, 0, 3});  // nothing read: the defaults
  EXPECT_EQ(unknown.gemm_kc, 256);
  EXPECT_EQ(unknown.gemm_mc, 144);
  EXPECT_EQ(unknown.gemm_nc, 1024);
}

TEST(CpuTuning, SpecRoundTripsAndRefusesBadInput) {
  CpuTuning t = tuning_for(id_of(CpuVendor::AMD, 25, 17), {});
  std::string err;
  ASSERT_TRUE(apply_tuning_spec("kc=384,mc=96,nc=2048,tile=32,bands=32,blocks=0,zmm16=0,zmm16fill=1,zmm16lines=256,zmm16stage=1,bands16min=50331648,aliasnt=1,bandread=16384,tilent=1,group=131072,group_min=2,copynt=8388608,grain16=4096,grainbytes=65536,amx=0,amxkc=512,amxmc=64,dotruns=0,dotrunsmax=8388608,pf16=1,pf16rows=1,varzmm=1,pool512=0,sumzmm=1,rowsinorder=1,bufcols=1,chunk=12", &t, &err)) << err;
  EXPECT_EQ(describe_tuning(t), "kc=384,mc=96,nc=2048,tile=32,bands=32,blocks=0,zmm16=0,zmm16fill=1,zmm16lines=256,zmm16stage=1,bands16min=50331648,aliasnt=1,bandread=16384,tilent=1,group=131072,group_min=2,copynt=8388608,grain16=4096,grainbytes=65536,amx=0,amxkc=512,amxmc=64,dotruns=0,dotrunsmax=8388608,pf16=1,pf16rows=1,varzmm=1,pool512=0,sumzmm=1,rowsinorder=1,bufcols=1,chunk=12");
  CpuTuning u = tuning_for(id_of(CpuVendor::Intel, 6, 143), {});
  ASSERT_TRUE(apply_tuning_spec(describe_tuning(t).c_str(), &u, &err)) << err;
  EXPECT_EQ(describe_tuning(u), describe_tuning(t));
  ASSERT_TRUE(apply_tuning_spec("", &u, &err));  // nothing to change
  ASSERT_TRUE(apply_tuning_spec("kc=200,", &u, &err));
  EXPECT_EQ(u.gemm_kc, 200);
  const std::string before = describe_tuning(u);
  for (const char* bad : {"kc=4", "kc=abc", "kc=", "kc", "mc=0", "bands=24", "blocks=2", "group=10",
                          "group_min=17", "nc=-5", "kc=300,bands=8", "tile=24", "tile=0", "tiles=16", "zmm16=2", "zmm16=", "zmm16fill=-1", "zmm16fil=1", "zmm16lines=8", "zmm16lines=", "zmm16stage=2", "zmm16stage=", "bands16min=-1", "bands16min=", "bands16min=1x", "bands16=0", "bandread=-1", "bandread=", "bandread=2147483648", "grain16=0", "grain16=x", "grainbytes=0", "grainbytes=", "grainbytes=-4", "amx=2", "amx=", "amxkc=48", "amxkc=16", "amxmc=40", "amxmc=0", "dotruns=2", "dotrunsmax=-1", "dotrunsmax=", "pf16=2", "pf16=", "pf16rows=2", "pf16rows=", "varzmm=2", "varzmm=", "pool512=2", "pool512=", "sumzmm=2", "sumzmm=", "rowsinorder=2", "rowsinorder=", "bufcols=2", "bufcols=", "aliasnt=2", "aliasnt=", "tilent=2", "tilent=", "chunk=0", "chunk=", "chunk=4097",
                          "copynt=-1", "copynt=1x", "copynt="}) {
    err.clear();
    EXPECT_FALSE(apply_tuning_spec(bad, &u, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
    EXPECT_EQ(describe_tuning(u), before) << bad << ": changed the tuning";
  }
  apply_tuning_spec("tiles=16", &u, &err);
  EXPECT_NE(err.find("unknown key 'tiles'"), std::string::npos) << err;
  apply_tuning_spec("tile=24", &u, &err);
  EXPECT_NE(err.find("tile=24"), std::string::npos) << err;
  apply_tuning_spec("bands=24", &u, &err);
  EXPECT_NE(err.find("bands=24"), std::string::npos) << err;
}

// Note [bfloat16 sums by dot products]: the long runs by dot products where the tuning
// takes them, up to its byte limit (none: 0); never without AVX512_BF16.
TEST(CpuTuning, DotRunsUpToTheirLimit) {
  struct Restore {
    ~Restore() { set_cpu_tuning(nullptr); }
  } restore;
  CpuTuning t = tuning_for(id_of(CpuVendor::Intel, 6, 143), {48 << 10, 2 << 20, 480 << 20, 3});
  ASSERT_EQ(t.bf16_dot_runs_max, 8 << 20);
  set_cpu_tuning(&t);
  const bool hw = use_avx512_bf16();
  EXPECT_EQ(use_bf16_dot_runs(1), hw);
  EXPECT_EQ(use_bf16_dot_runs(8 << 20), hw);
  EXPECT_FALSE(use_bf16_dot_runs((8 << 20) + 1));
  t.bf16_dot_runs_max = 0;
  set_cpu_tuning(&t);
  EXPECT_EQ(use_bf16_dot_runs(int64_t{1} << 40), hw);
  t.bf16_dot_runs = false;
  set_cpu_tuning(&t);
  EXPECT_FALSE(use_bf16_dot_runs(1));
}

// SB_TUNING is read once per process, so each value runs in a child: this binary again,
// filtered to the test below, which checks what the parent asked for.
int run_child(const std::string& spec, const std::string& expect) {
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return -1;
  self[len] = '\0';
  const std::string cmd = "SB_TUNING='" + spec + "' SB_TUNING_EXPECT='" + expect + "' '" + self +
                          "' --gtest_filter=CpuTuning.EnvironmentChild > /dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(CpuTuning, EnvironmentOverrides) {
  EXPECT_EQ(run_child("kc=384,bands=32", "kc=384,bands=32"), 0);
  EXPECT_EQ(run_child("kc=3", "error"), 0);
  EXPECT_EQ(run_child("kc=384", "kc=512"), 1) << "the child must fail when the value differs";
}

TEST(CpuTuning, EnvironmentChild) {
  const char* expect = std::getenv("SB_TUNING_EXPECT");
  if (!expect) GTEST_SKIP() << "run by CpuTuning.EnvironmentOverrides";
  const std::string spec = std::getenv("SB_TUNING") ? std::getenv("SB_TUNING") : "";
  if (std::string(expect) == "error") {
    for (int i = 0; i < 2; ++i) {  // a malformed value fails every call, not only the first
      try {
        (void)cpu_tuning();
        ADD_FAILURE() << "no error for SB_TUNING=" << spec;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("SB_TUNING='" + spec + "'"), std::string::npos) << e.what();
      }
    }
    return;
  }
  CpuTuning want = tuning_for(cpu_id(), cpu_caches());
  std::string err;
  ASSERT_TRUE(apply_tuning_spec(expect, &want, &err)) << err;
  EXPECT_EQ(describe_tuning(cpu_tuning()), describe_tuning(want));
  EXPECT_NE(cpu_tuning().basis.find("SB_TUNING=" + spec), std::string::npos) << cpu_tuning().basis;
}

TEST(CpuTuning, TestHookSwapsAndRestores) {
  const std::string mine = describe_tuning(cpu_tuning());
  CpuTuning forced = cpu_tuning();
  forced.gemm_kc = 40;
  set_cpu_tuning(&forced);
  EXPECT_EQ(cpu_tuning().gemm_kc, 40);
  set_cpu_tuning(nullptr);
  EXPECT_EQ(describe_tuning(cpu_tuning()), mine);
}

TEST(CpuFeatures, Fma512RateIsProbedWhereTheLevelExists) {
  const double r = cpu_fma512_rate();
  EXPECT_EQ(r, cpu_fma512_rate()) << "probed once";
  if (compiled_simd_level() != SimdLevel::AVX512) {
    EXPECT_EQ(r, 0);
    EXPECT_STREQ(fma512_rate_name(r), "none");
    return;
  }
  // a 512-bit FMA does between one and two 256-bit FMAs' work per unit time on every
  // core with AVX-512; far outside that, the probe measured something else
  EXPECT_GT(r, 0.5) << r;
  EXPECT_LT(r, 2.6) << r;
  EXPECT_STRNE(fma512_rate_name(r), "none");
}

TEST(CpuFeatures, LevelNameListsNoSubsetOfKernels) {
  EXPECT_STREQ(simd_level_name(SimdLevel::AVX512), "avx512+avx2+fma+f16c");
  EXPECT_STREQ(simd_level_name(SimdLevel::AVX2), "avx2+fma+f16c");
  EXPECT_STREQ(simd_level_name(SimdLevel::Scalar), "scalar");
}

}  // namespace
}  // namespace sb
