// copy_test.cpp — the strided copy (lib/copy/) against element-by-element
// reference reads and against copy_generic, for every layout pair and dtype pair: the
// fast paths (memcpy, rows, tiled transpose/permute, NCHW<->NHWC, strided, convert,
// fill) on shapes large enough to take them (checked through last_copy_path()), sizes
// not a multiple of 8, misaligned offsets, 1 and 2 threads, AVX2 and scalar, regular
// and non-temporal stores (forced at small sizes through set_nt_threshold_bytes).
#include "copy/copy.h"
#include "core/test_hooks.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "core/convert.h"
#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "cases/copy.h"
#include "test_util.h"

#ifdef SB_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

using test::all_close;
using test::Layout;

TEST(Copy, EveryLayoutPairMatchesReference) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int nd = 1 + static_cast<int>(rng() % 4);
    const Shape sz = test::random_shape(rng, nd, 9);
    const Tensor src_vals = rand(sz, rng(), DType::Float64);
    const std::vector<double> vals = src_vals.to_vector();
    for (Layout ls : test::all_layouts()) {
      const std::vector<double> ref = test::layout_values(vals, sz, ls);
      for (Layout ld : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::ChannelsLast, Layout::Offset}) {
        Tensor src = test::with_layout(src_vals, ls);
        Tensor dst = test::with_layout(zeros(sz, DType::Float64), ld);
        test::poison(dst);
        dst.copy_(src);
        ASSERT_TRUE(test::all_close(dst, ref, 0, 0)) << test::layout_name(ls) << " -> " << test::layout_name(ld);
      }
    }
  }
}

TEST(Copy, DtypeConversionsMatchReference) {
  const std::vector<double> vals = {-3.75, -1.5, -0.25, 0.0, 0.5, 1.0, 2.25, 7.0, 100.5, -100.5};
  const Tensor src64 = from_vector(vals);
  for (DType to : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int32,
                   DType::Int64}) {
    Tensor out = empty({static_cast<int64_t>(vals.size())}, to);
    test::poison(out);
    out.copy_(src64);
    std::vector<double> ref;
    for (double v : vals) ref.push_back(is_floating(to) ? v : static_cast<double>(static_cast<int64_t>(v)));
    EXPECT_TRUE(test::all_close(out, ref, 0, 0)) << dtype_name(to);
    // and back to float64 through a transposed-like strided view
    Tensor back = empty({static_cast<int64_t>(vals.size())}, DType::Float64);
    test::poison(back);
    back.copy_(out);
    EXPECT_TRUE(test::all_close(back, ref, 0, 0)) << dtype_name(to) << " -> float64";
  }
}

TEST(Copy, HalfRoundsToNearestEven) {
  // 2049 lies halfway between the halves 2048 and 2050: round to even (2048)
  EXPECT_EQ(static_cast<float>(Half(2049.0f)), 2048.0f);
  EXPECT_EQ(static_cast<float>(Half(2051.0f)), 2052.0f);
  EXPECT_EQ(static_cast<float>(Half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(5.960464477539063e-08f)), 5.960464477539063e-08f);  // smallest subnormal
  EXPECT_EQ(static_cast<float>(Half(2.98023223876953125e-08f)), 0.0f);  // half of it ties to even 0
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::nanf("")))));
  for (int bits = 0; bits < 0x7c00; ++bits) {  // every finite half survives a round trip
    Half h;
    h.bits = static_cast<uint16_t>(bits);
    ASSERT_EQ(Half(static_cast<float>(h)).bits, h.bits) << bits;
  }
}

TEST(Copy, BroadcastSourceFillsDestination) {
  Tensor row = from_vector<float>({1, 2, 3});
  Tensor dst = empty({4, 3});
  test::poison(dst);
  dst.copy_(row);
  std::vector<double> ref;
  for (int i = 0; i < 4; ++i) ref.insert(ref.end(), {1, 2, 3});
  EXPECT_TRUE(test::all_close(dst, ref, 0, 0));
}

// ---------------------------------------------------------------- fast paths

struct Scope {  // restores threads, SIMD level, the streaming threshold and the band shape
  int threads = get_num_threads();
  SimdLevel level = simd_level();
  ~Scope() {
    set_num_threads(threads);
    set_simd_level(level);
    set_nt_threshold_bytes(-1);
    set_transpose_bands(0, true);
  }
};

// Values of dtype dt exactly representable in every dtype we test (small integers and
// halves), independent in every dim (the Expanded layout holds test::layout_values).
Tensor exact_values(const Shape& sz, uint64_t seed, DType dt) {
  std::vector<double> v = rand(sz, seed, DType::Float64).to_vector();
  for (double& e : v) e = std::floor(e * 200.0) * 0.5 - 50.0;
  if (dt == DType::Int8 || dt == DType::Int32 || dt == DType::Int64)
    for (double& e : v) e = std::floor(e);
  return from_vector(v, sz).to(dt);
}

// Runs f(cpu_tuning()) under Zen 4's tuning row, Sapphire Rapids' and this machine's own
// (Note [Tuning by microarchitecture]), whatever this CPU is; the machine's own after.
template <typename F>
void under_each_tuning(const F& f) {
  const CpuTuning zen4 = tuning_for({CpuVendor::AMD, 25, 17, CpuArch::Zen4}, cpu_caches());
  const CpuTuning spr = tuning_for({CpuVendor::Intel, 6, 143, CpuArch::SapphireRapids}, cpu_caches());
  const CpuTuning zen5 = tuning_for({CpuVendor::AMD, 26, 2, CpuArch::Zen5}, cpu_caches());
  struct Restore {
    ~Restore() { set_cpu_tuning(nullptr); }
  } restore;
  for (const CpuTuning* t : {&zen4, &spr, &zen5, static_cast<const CpuTuning*>(nullptr)}) {
    set_cpu_tuning(t);
    f(cpu_tuning());
  }
}

// Every storage element outside the view still holds the poison.
::testing::AssertionResult untouched_outside(const Tensor& view) {
  const int64_t esz = static_cast<int64_t>(view.element_size());
  const int64_t n = static_cast<int64_t>(view.storage()->nbytes()) / esz;
  std::vector<char> in(n, 0);
  if (view.numel() > 0) {
    Shape idx(view.dim(), 0);
    int64_t off = view.storage_offset();
    for (int64_t i = 0; i < view.numel(); ++i) {
      in[off] = 1;
      for (int64_t d = view.dim() - 1; d >= 0; --d) {  // odometer
        if (++idx[d] < view.sizes()[d]) {
          off += view.strides()[d];
          break;
        }
        off -= (view.sizes()[d] - 1) * view.strides()[d];
        idx[d] = 0;
      }
    }
  }
  Tensor ref = empty({1}, view.dtype());
  test::poison(ref);
  const char* base = static_cast<const char*>(view.storage()->data());
  for (int64_t i = 0; i < n; ++i)
    if (!in[i] && std::memcmp(base + i * esz, ref.data_ptr(), esz) != 0)
      return ::testing::AssertionFailure() << "storage element " << i << " outside the view was written ("
                                           << view.str() << ")";
  return ::testing::AssertionSuccess();
}

// Note [Vector conversions]: float32 <-> float16 / bfloat16 runs of every length around
// the vector widths, from every offset in a poisoned buffer, streamed and not, at every
// SIMD level and thread count, against the scalar values (bfloat16: round_to_bf16);
// the buffer around the run is left as it was.
TEST(Copy, VectorConversionsEveryLengthAndOffset) {
  Scope scope;
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> u(-3, 3);
  for (DType half : {DType::Float16, DType::BFloat16})
    for (bool narrow : {true, false})
      for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 100, 4099, 70001})
        for (int64_t off : {0, 1, 3})
          for (const test::Modes& m : test::all_kernel_modes())
            for (int64_t nt : {int64_t{-1}, int64_t{0}}) {
              test::ModeGuard g(m);
              set_nt_threshold_bytes(nt);
              std::vector<double> v(static_cast<size_t>(n));
              for (double& x : v) x = u(rng) * std::pow(2.0, static_cast<double>(rng() % 40) - 20);
              v[0] = NAN;
              const DType from = narrow ? DType::Float32 : half, to = narrow ? half : DType::Float32;
              const Tensor src = test::host_tensor(v, {n}, from);
              std::vector<double> ref = test::stored(v, {n}, from);
              if (to != DType::Float32) ref = test::stored(ref, {n}, to);
              Tensor buf = empty({n + 5}, to);
              test::poison(buf);
              Tensor dst = buf.narrow(0, off, n);
              dst.copy_(src);
              ASSERT_EQ(last_copy_path(), CopyPath::Convert);
              ASSERT_TRUE(test::all_close(dst, ref, 0, 0))
                  << dtype_name(from) << " -> " << dtype_name(to) << " n " << n << " offset " << off << " nt " << nt
                  << " " << simd_level_name(m.simd) << ", " << m.threads << " threads";
              ASSERT_TRUE(untouched_outside(dst)) << dtype_name(to) << " n " << n << " offset " << off;
            }
}

// src -> dst (poisoned, layout ld) through copy_kernel, checked against the values,
// against copy_generic, and for writes outside dst.
::testing::AssertionResult check_copy(const Tensor& vals, Layout ls, Layout ld, const std::vector<double>& ref) {
  const Tensor src = test::with_layout(vals, ls);
  Tensor dst = test::with_layout(zeros(vals.sizes(), vals.dtype()), ld);
  Tensor gen = test::with_layout(zeros(vals.sizes(), vals.dtype()), ld);
  test::poison(dst);
  test::poison(gen);
  dst.copy_(src);
  copy_generic(gen, src);
  auto r = test::all_close(dst, ref, 0, 0);
  if (!r) return r << " (" << layout_name(ls) << " -> " << layout_name(ld) << ", path " << copy_path_name(last_copy_path())
                   << ")";
  r = test::all_close(gen, ref, 0, 0);
  if (!r) return r << " copy_generic";
  r = untouched_outside(dst);
  if (!r) return r << " (" << layout_name(ls) << " -> " << layout_name(ld) << ")";
  return ::testing::AssertionSuccess();
}

TEST(CopyFast, EveryLayoutPairDtypeThreadsSimdAndStreaming) {
  Scope scope;
  std::mt19937_64 rng(21);
  const std::vector<Layout> srcs = {Layout::Contiguous, Layout::Transposed,   Layout::Sliced,     Layout::Expanded,
                                Layout::ChannelsLast, Layout::Offset, Layout::ColumnMajor};
  const std::vector<Layout> dsts = {Layout::Contiguous, Layout::Transposed, Layout::Sliced,
                                Layout::ChannelsLast, Layout::Offset,   Layout::ColumnMajor};
  for (int trial = 0; trial < 24; ++trial) {
    const int nd = 1 + trial % 4;
    const int64_t max_size = nd == 1 ? 3000 : nd == 2 ? 150 : nd == 3 ? 24 : 13;
    const Shape sz = test::random_shape(rng, nd, max_size);
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8}) {
      const Tensor vals = exact_values(sz, rng(), dt);
      const std::vector<double> ref = vals.to_vector(), ref_expanded = test::layout_values(ref, sz, Layout::Expanded);
      for (int threads : {1, 2})
        for (SimdLevel level : {SimdLevel::AVX2, SimdLevel::Scalar})
          for (int64_t nt : {int64_t{-1}, int64_t{0}}) {
            set_num_threads(threads);
            set_simd_level(level);
            set_nt_threshold_bytes(nt);
            for (Layout ls : srcs)
              for (Layout ld : dsts)
                ASSERT_TRUE(check_copy(vals, ls, ld, ls == Layout::Expanded ? ref_expanded : ref))
                    << "sizes " << ::testing::PrintToString(sz) << " " << dtype_name(dt) << " threads " << threads
                    << " " << simd_level_name(simd_level()) << " nt threshold " << nt;
          }
    }
  }
}

// Each fast path, on shapes chosen to take it, with ragged sizes and offsets.
TEST(CopyFast, EachPathIsTakenAndCorrect) {
  Scope scope;
  struct Case {
    const char* what;
    std::function<Tensor(const Tensor&)> src;  // a view of the values buffer
    std::function<Tensor(const Shape&, DType)> dst;
    CopyPath path;
    bool bands = false;  // 4-byte streaming tiles go out as bands or pipelined blocks (Note [Transpose bands])
    bool bands16 = false;   // and 2-byte ones as 32-row bands (dst rows < 4 KiB apart)
    bool blocks16 = false;  // or as pipelined blocks, when those are taken (dst rows >= 4 KiB apart)
  };
  auto contiguous_dst = [](const Shape& s, DType dt) { return empty(s, dt); };
  auto offset_dst = [](const Shape& s, DType dt) {  // misaligned by 3 elements
    const int64_t n = checked_numel(s, "test");
    return empty({n + 3}, dt).as_strided(s, contiguous_strides(s), 3);
  };
  auto cl_dst = [](const Shape& s, DType dt) { return empty(s, dt, Device::cpu(), MemoryFormat::ChannelsLast); };
  auto padded_dst = [](const Shape& s, DType dt) {  // rows padded to a multiple of 64 bytes, and 64 more
    const int64_t per = 64 / dtype_size(dt);
    return empty({s[0], (s[1] + per - 1) / per * per + per}, dt).narrow(1, 0, s[1]);
  };
  const std::vector<std::pair<Shape, Case>> cases = {
      {{1001, 67}, {"memcpy", [](const Tensor& v) { return v; }, contiguous_dst, CopyPath::Memcpy}},
      {{1001, 67}, {"memcpy misaligned", [](const Tensor& v) { return test::with_layout(v, Layout::Offset); },
                    offset_dst, CopyPath::Memcpy}},
      {{301, 67}, {"rows (outer slice)", [](const Tensor& v) { return v.slice(0, 1, std::nullopt, 2); },
                   contiguous_dst, CopyPath::Rows}},
      {{133, 201}, {"2-D transpose", [](const Tensor& v) { return v.t(); }, contiguous_dst, CopyPath::Tiled}},
      {{133, 201}, {"2-D transpose into misaligned", [](const Tensor& v) { return v.t(); }, offset_dst,
                    CopyPath::Tiled}},
      {{17, 29, 71}, {"3-D permute", [](const Tensor& v) { return v.permute({2, 0, 1}); }, contiguous_dst,
                      CopyPath::Tiled}},
      {{7, 19, 23, 31}, {"4-D permute", [](const Tensor& v) { return v.permute({3, 1, 0, 2}); }, contiguous_dst,
                         CopyPath::Tiled}},
      {{3, 37, 13, 11}, {"NCHW -> NHWC", [](const Tensor& v) { return v; }, cl_dst, CopyPath::Tiled}},
      // bands (32 or 16 x 512 tiles): B ragged (184 = 5 x 32 + 16 + 8 = 11 x 16 + 8 = 5 x 32 + 24), A ragged
      // (1100 = 2 x 512 + 76, 76 = 9 x 8 + 4)
      {{184, 1100}, {"2-D transpose into 64-byte rows", [](const Tensor& v) { return v.t(); }, padded_dst,
                     CopyPath::Tiled, true, true}},
      // pipelined blocks (64 x 1024): B ragged (190 = 2 x 64 + 62, 62 = 7 x 8 + 6), A ragged (2100 = 2 x 1024 +
      // 52, 52 = 6 x 8 + 4), so blocks of every extent follow each other in one thread's pipeline
      {{190, 2100}, {"2-D transpose into 64-byte rows, ragged blocks", [](const Tensor& v) { return v.t(); },
                     padded_dst, CopyPath::Tiled, true, true}},
      // dst rows 4 KiB or more apart in 2-byte elements: blocks (B ragged: 2108 = 16 x 128 + 60, 60 = 7 x 8 +
      // 4; A ragged: 45 = 5 x 8 + 5) or their buffered tiles, not bands
      {{2108, 45}, {"2-D transpose into 64-byte rows 4 KiB apart", [](const Tensor& v) { return v.t(); },
                    padded_dst, CopyPath::Tiled, true, false, true}},
      {{20, 37}, {"2-D transpose into 64-byte rows, 20 columns", [](const Tensor& v) { return v.t(); }, padded_dst,
                  CopyPath::Tiled, true}},
      {{2, 48, 7, 9}, {"NCHW -> NHWC, 48 channels", [](const Tensor& v) { return v; }, cl_dst, CopyPath::Tiled,
                       true}},
      {{64, 203}, {"2-D transpose, 64-element rows", [](const Tensor& v) { return v.t(); }, contiguous_dst,
                   CopyPath::Tiled, true, true}},
      {{3, 32, 13, 11}, {"NCHW -> NHWC, 32 channels", [](const Tensor& v) { return v; }, cl_dst, CopyPath::Tiled,
                         true, true}},
      {{9, 200}, {"2-D transpose, 9 columns (< 16: no bands)", [](const Tensor& v) { return v.t(); },
                  contiguous_dst, CopyPath::Tiled}},
      {{3, 37, 13, 11}, {"NHWC -> NCHW", [](const Tensor& v) { return v.contiguous(MemoryFormat::ChannelsLast); },
                         contiguous_dst, CopyPath::Tiled}},
      {{41, 300}, {"stepped inner slice", [](const Tensor& v) { return v.slice(1, 0, std::nullopt, 2); },
                   contiguous_dst, CopyPath::Strided}},
      {{41, 300}, {"broadcast row", [](const Tensor& v) { return v.narrow(0, 0, 1).expand({41, 300}); },
                   contiguous_dst, CopyPath::Rows}},
      {{41, 300}, {"broadcast column", [](const Tensor& v) { return v.narrow(1, 0, 1).expand({41, 300}); },
                   contiguous_dst, CopyPath::Strided}},
  };
  // the band shapes of Note [Transpose bands] (32 rows A fastest: Intel's now; 32 rows B fastest: the Sapphire
  // Rapids VM's; 16 rows: AMD's) and the pipelined blocks of Note [Pipelined transpose blocks] (AMD's), whatever
  // this CPU is
  struct Bands {
    int rows;
    bool outer;
  };
  uint64_t seed = 500;
  for (const auto& [sz, c] : cases)
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int32})
      for (int threads : {1, 2})
        for (SimdLevel level : {SimdLevel::AVX2, SimdLevel::Scalar})
          for (int64_t nt : {int64_t{-1}, int64_t{0}})
            for (Bands bs : {Bands{32, false}, Bands{32, true}, Bands{16, true}, Bands{64, true}}) {
            if (nt < 0 && (bs.rows != 32 || bs.outer)) continue;  // no streaming: no bands, one pass
            set_num_threads(threads);
            set_simd_level(level);
            set_nt_threshold_bytes(nt);
            set_transpose_bands(bs.rows, bs.outer);
            const Tensor vals = exact_values(sz, ++seed, dt);
            const Tensor src = c.src(vals);
            const std::vector<double> ref = test::naive_values(src);
            Tensor dst = c.dst(src.sizes(), dt);
            test::poison(dst);
            dst.copy_(src);
            const std::string where = std::string(c.what) + " " + dtype_name(dt) + " threads " +
                                      std::to_string(threads) + " " + simd_level_name(simd_level()) +
                                      " nt threshold " + std::to_string(nt) + " bands of " +
                                      std::to_string(bs.rows) + (bs.outer ? " rows, A fastest" : " rows, B fastest");
            EXPECT_EQ(last_copy_path(), c.path) << where << ": took " << copy_path_name(last_copy_path());
            // streaming: byte copies and 2-, 4- and 8-byte tiles (Note [Tiles of 2- and
            // 8-byte elements]), AVX2 only, when forced
            const bool over = static_cast<int64_t>(dst.nbytes()) > nt_threshold_bytes();  // always at 0
            // (not the 2-byte bands where the tuning stores them plainly: Note [Transpose bands])
            const bool plain16 = dtype_size(dt) == 2 && c.bands16 &&
                                 static_cast<int64_t>(dst.nbytes()) < cpu_tuning().bands16_min_bytes;
            const bool nt_expected = over && simd_level() >= SimdLevel::AVX2 && !plain16 &&
                                     (c.path == CopyPath::Memcpy || c.path == CopyPath::Rows ||
                                      (c.path == CopyPath::Tiled && dtype_size(dt) != 1));
            EXPECT_EQ(last_copy_used_nt(), nt_expected) << where;
            // 2-byte elements: 32-row bands, or blocks where set_transpose_bands forces them
            const int rows16 = c.bands16 ? 32 : c.blocks16 && bs.rows == 64 ? 64 : 0;
            const bool bands_expected =
                nt_expected && ((dtype_size(dt) == 4 && c.bands) || (dtype_size(dt) == 2 && rows16 != 0));
            EXPECT_EQ(last_copy_band_rows() != 0, bands_expected) << where;
            if (last_copy_band_rows() != 0) {
              EXPECT_EQ(last_copy_band_rows(), dtype_size(dt) == 2 ? rows16 : bs.rows) << where;
            }
            ASSERT_TRUE(test::all_close(dst, ref, 0, 0)) << where;
            ASSERT_TRUE(untouched_outside(dst)) << where;
            Tensor gen = c.dst(src.sizes(), dt);
            test::poison(gen);
            copy_generic(gen, src);
            ASSERT_TRUE(test::all_close(gen, ref, 0, 0)) << where << " copy_generic";
          }
  // dtype conversion takes the parallel convert path
  Tensor d = empty({50, 70}, DType::Float64);
  d.copy_(exact_values({70, 50}, 1, DType::Float16).t());
  EXPECT_EQ(last_copy_path(), CopyPath::Convert);
  EXPECT_TRUE(test::all_close(d, test::naive_values(exact_values({70, 50}, 1, DType::Float16).t()), 0, 0));
}

TEST(CopyFast, ContiguousAndChannelsLastRoundTrip) {
  Scope scope;
  for (int threads : {1, 2})
    for (SimdLevel level : {SimdLevel::AVX2, SimdLevel::Scalar}) {
      set_num_threads(threads);
      set_simd_level(level);
      const Tensor x = exact_values({4, 21, 9, 13}, 77, DType::Float32);
      const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
      EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
      EXPECT_TRUE(test::all_close(cl, x.to_vector(), 0, 0));
      const Tensor back = cl.contiguous();
      EXPECT_TRUE(back.is_contiguous());
      EXPECT_TRUE(test::all_close(back, x.to_vector(), 0, 0));
      const Tensor tt = x.transpose(1, 3).contiguous();
      EXPECT_EQ(last_copy_path(), CopyPath::Tiled);
      EXPECT_TRUE(test::all_close(tt, test::naive_values(x.transpose(1, 3)), 0, 0));
    }
}

TEST(CopyFast, FillEveryLayoutDtypeAndStreaming) {
  Scope scope;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int32,
                   DType::Int64})
    for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::ChannelsLast, Layout::Offset, Layout::ColumnMajor})
      for (int threads : {1, 2})
        for (SimdLevel level : {SimdLevel::AVX2, SimdLevel::Scalar})
          for (int64_t nt : {int64_t{-1}, int64_t{0}}) {
            set_num_threads(threads);
            set_simd_level(level);
            set_nt_threshold_bytes(nt);
            const Shape sz = {3, 17, 29, 45};  // 66555 elements: parallel, ragged
            Tensor t = test::with_layout(zeros(sz, dt), l);
            test::poison(t);
            const double v = is_floating(dt) ? -2.5 : -7.0;
            t.fill_(v);
            const bool dense = l != Layout::Sliced;
            EXPECT_EQ(last_copy_path(), dense ? CopyPath::Fill : CopyPath::FillStrided) << layout_name(l);
            EXPECT_EQ(last_copy_used_nt(), dense && nt == 0 && simd_level() >= SimdLevel::AVX2);
            ASSERT_TRUE(test::all_close(t, std::vector<double>(t.numel(), v), 0, 0))
                << dtype_name(dt) << " " << layout_name(l) << " threads " << threads << " "
                << simd_level_name(simd_level()) << " nt " << nt;
            ASSERT_TRUE(untouched_outside(t)) << dtype_name(dt) << " " << layout_name(l);
          }
}

// Note [Pipelined transpose blocks]: without a forced shape, the tuning decides
// (cpu_tuning(), Note [Tuning by microarchitecture]): Zen 4's row takes blocks only where
// dst rows are >= 4 KiB apart and source rows >= 1024 elements long, 16-row bands
// elsewhere; Sapphire Rapids' row takes 32-row bands. Both rows run on every machine,
// and the machine's own; either way the result is the reference's.
TEST(CopyFast, TransposeBandsAutomaticChoice) {
  Scope scope;
  set_transpose_bands(0, true);
  set_nt_threshold_bytes(0);
  struct Case {
    int64_t nB, nA, dst_row;  // dst (nA, nB) with rows dst_row floats apart (a view of wider rows)
    int blocks_rows;          // the choice of a tuning that takes blocks and 16-row bands
  };
  const std::vector<Case> cases = {
      {40, 1030, 1024, 64},  // rows 4 KiB apart, 1030-float source rows: blocks
      {40, 1030, 1008, 16},  // rows 4032 bytes apart: bands
      {40, 1000, 1024, 16},  // source rows of 1000 floats: bands
      {72, 1100, 64 * 20, 64},
  };
  uint64_t seed = 900;
  under_each_tuning([&](const CpuTuning& now) {
    for (const Case& c : cases)
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        const Tensor vals = exact_values({c.nB, c.nA}, ++seed, DType::Float32);
        const Tensor src = vals.t();
        Tensor dst = empty({c.nA, c.dst_row}).narrow(1, 0, c.nB);
        test::poison(dst);
        dst.copy_(src);
        const std::string where = describe_tuning(now) + ": " + std::to_string(c.nA) + " x " +
                                  std::to_string(c.nB) + " into rows of " + std::to_string(c.dst_row) +
                                  ", threads " + std::to_string(threads);
        if (simd_level() >= SimdLevel::AVX2) {
          const int want = now.transpose_blocks && c.blocks_rows == 64 ? 64 : now.transpose_band_rows;
          EXPECT_EQ(last_copy_band_rows(), want) << where;
        }
        ASSERT_TRUE(test::all_close(dst, test::naive_values(src), 0, 0)) << where;
        ASSERT_TRUE(untouched_outside(dst)) << where;
      }
  });
}

// The same choice for 2-byte elements: dst rows less than 4 KiB apart take 32-row bands
// where the tuning streams them at the copy's size (bands16_min_bytes), else plain stores; rows further apart take blocks of 128 source rows where the tuning
// takes blocks (source rows of >= 1024 elements), else the streaming zmm tile runs where
// the tuning takes zmm tiles on an AVX-512 CPU (Note [Streaming 2-byte tile runs]: 16
// rows; source rows of 64 elements as in NHWC -> NCHW, and of 1000 with ragged edges
// along both dims; 128: staged, Note [Staged 2-byte tile runs], whose 64-row B tiles
// leave edges of 44 rows here), else the buffered tiles. The first
// case runs three whole blocks one after another in a thread's pipeline (so a whole
// block drains from either buffer), and every ragged edge (an odd number of 8-row groups
// among them).
TEST(CopyFast, TwoByteTransposesBandsAndBlocks) {
  Scope scope;
  set_transpose_bands(0, true);
  set_nt_threshold_bytes(0);
  struct Case {
    int64_t nB, nA, dst_row;  // dst (nA, nB) with rows dst_row elements apart
    bool far;                 // dst rows >= 4 KiB apart
  };
  const std::vector<Case> cases = {
      {300, 3084, 2048, true},   // 3084 = 3 x 1024 + 8 + 4; 300 = 2 x 128 + 5 x 8 + 4
      {300, 2060, 2016, false},  // rows 4032 bytes apart: 300 = 9 x 32 + 8 + 4
      {300, 1000, 2048, true},   // source rows of 1000 elements: no blocks
      {200, 64, 3136, true},     // source rows of 64 elements (NHWC -> NCHW): no blocks
  };
  uint64_t seed = 950;
  under_each_tuning([&](const CpuTuning& now) {
    for (const Case& c : cases)
      for (DType dt : {DType::BFloat16, DType::Float16})
        for (int threads : {1, 2}) {
          set_num_threads(threads);
          const Tensor src = exact_values({c.nB, c.nA}, ++seed, dt).t();
          Tensor dst = empty({c.nA, c.dst_row}, dt).narrow(1, 0, c.nB);
          test::poison(dst);
          dst.copy_(src);
          const std::string where = describe_tuning(now) + ": " + dtype_name(dt) + " " + std::to_string(c.nA) +
                                    " x " + std::to_string(c.nB) + " into rows of " + std::to_string(c.dst_row) +
                                    ", threads " + std::to_string(threads);
          if (simd_level() >= SimdLevel::AVX2) {
            const bool bands16 = static_cast<int64_t>(dst.nbytes()) >= now.bands16_min_bytes;
            const int want = !c.far                                ? (bands16 ? 32 : 0)
                             : now.transpose_blocks && c.nA >= 1024 ? 64
                             : now.zmm16 && c.nA >= now.zmm16_lines_min && use_avx512() ? (now.zmm16_stage ? 128 : 16)
                                                                   : 0;
            EXPECT_EQ(last_copy_band_rows(), want) << where;
            EXPECT_EQ(last_copy_used_nt(), c.far || bands16) << where;  // near rows without bands: plain
          }
          ASSERT_TRUE(test::all_close(dst, test::naive_values(src), 0, 0)) << where;
          ASSERT_TRUE(untouched_outside(dst)) << where;
        }
  });
}

// Note [Transpose bands], 2-byte elements into near dst rows (NCHW -> NHWC of 64 channels:
// 128-byte dst rows), under a tuning whose bands16_min_bytes lies between two copies'
// sizes: the smaller takes the plain-store tiles (no bands, no streaming), the larger and
// one of exactly that size the streaming 32-row bands. Both dtypes, 1 and 2 threads, the
// values exact and the storage around dst untouched.
TEST(CopyFast, TwoByteNearRowsStreamFromTheirSize) {
  Scope scope;
  if (!use_avx2()) GTEST_SKIP() << "no bands below AVX2";
  set_nt_threshold_bytes(0);
  CpuTuning t = cpu_tuning();
  const int64_t small_bytes = 2 * 64 * 9 * 7 * 2, large_bytes = 5 * 64 * 9 * 7 * 2;
  t.bands16_min_bytes = 3 * 64 * 9 * 7 * 2;
  set_cpu_tuning(&t);
  struct Restore {
    ~Restore() { set_cpu_tuning(nullptr); }
  } restore;
  uint64_t seed = 1200;
  for (int64_t n : {int64_t{2}, int64_t{3}, int64_t{5}})
    for (DType dt : {DType::BFloat16, DType::Float16})
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        const Tensor src = exact_values({n, 64, 9, 7}, ++seed, dt);
        Tensor dst = empty({n, 64, 9, 7}, dt, Device::cpu(), MemoryFormat::ChannelsLast);
        test::poison(dst);
        dst.copy_(src);
        const int64_t bytes = static_cast<int64_t>(dst.nbytes());
        const bool want = bytes >= t.bands16_min_bytes;
        const std::string where = std::string(dtype_name(dt)) + " NCHW -> NHWC of " + std::to_string(bytes) +
                                  " bytes, bands from " + std::to_string(t.bands16_min_bytes) + ", threads " +
                                  std::to_string(threads);
        EXPECT_TRUE(bytes == small_bytes || bytes == t.bands16_min_bytes || bytes == large_bytes) << where;
        EXPECT_EQ(last_copy_path(), CopyPath::Tiled) << where;
        EXPECT_EQ(last_copy_band_rows(), want ? 32 : 0) << where;
        EXPECT_EQ(last_copy_used_nt(), want) << where;
        ASSERT_TRUE(test::all_close(dst, test::naive_values(src), 0, 0)) << where;
        ASSERT_TRUE(untouched_outside(dst)) << where;
      }
}

// Note [Contiguous bands read in order]: the transposed copy of a batch of planes whose
// source rows lie end to end (B x R x C, transposed last two dims) through the streaming
// bands, 4- and 2-byte, under a tuning that reads bands of up to 32 KiB in order and one
// that reads none: the bands are read in order exactly where the band is one run within
// the budget (so also for planes that start off a line; not for float32 rows of 300,
// 37.5 KiB a 32-row band, nor for rows sliced out of longer ones), the values exact
// either way, the storage around dst untouched; 1 and 2 threads.
TEST(CopyFast, ContiguousBandsReadInOrder) {
  Scope scope;
  if (!use_avx2()) GTEST_SKIP() << "no bands below AVX2";
  set_nt_threshold_bytes(0);
  set_transpose_bands(32, true);
  struct Case {
    int64_t b, r, c, pad, off;  // planes of r x c, source rows c + pad elements long, off elements into the storage
    bool contiguous;            // within the 32 KiB budget and end to end
  };
  const std::vector<Case> cases = {
      {3, 64, 40, 0, 0, true},     // 32-row bands of 40 elements, two a plane
      {2, 96, 128, 0, 3, true},    // planes off a line by 3 elements
      {2, 64, 300, 0, 0, false},   // float32: 37.5 KiB a band, over the budget (bfloat16: 18.75 KiB, within)
      {2, 64, 40, 8, 0, false},    // rows of 40 out of 48: not one run
  };
  CpuTuning on = cpu_tuning(), off = cpu_tuning();
  on.band_read_bytes = 32 * 1024;
  on.bands16_min_bytes = 0;
  off.band_read_bytes = 0;
  off.bands16_min_bytes = 0;
  struct Restore {
    ~Restore() { set_cpu_tuning(nullptr); }
  } restore;
  uint64_t seed = 1300;
  for (const CpuTuning* t : {&on, &off})
    for (const Case& c : cases)
      for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16})
        for (int threads : {1, 2}) {
          set_cpu_tuning(t);
          set_num_threads(threads);
          const int64_t es = dtype_size(dt), row = c.c + c.pad;
          const Tensor store = exact_values({c.off + c.b * c.r * row}, ++seed, dt);
          const Tensor planes = store.narrow(0, c.off, c.b * c.r * row).view({c.b, c.r, row}).narrow(2, 0, c.c);
          const Tensor src = planes.transpose(1, 2);
          Tensor dst = empty({c.b, c.c, c.r}, dt);
          test::poison(dst);
          dst.copy_(src);
          const bool within = c.contiguous || (c.pad == 0 && 32 * c.c * es <= t->band_read_bytes);
          const bool want = t->band_read_bytes > 0 && within;
          const std::string where = std::string(dtype_name(dt)) + " " + std::to_string(c.b) + " x " +
                                    std::to_string(c.r) + " x " + std::to_string(c.c) + " (rows of " +
                                    std::to_string(row) + ", offset " + std::to_string(c.off) + "), band reads up to " +
                                    std::to_string(t->band_read_bytes) + " bytes, threads " + std::to_string(threads);
          EXPECT_EQ(last_copy_path(), CopyPath::Tiled) << where;
          EXPECT_EQ(last_copy_band_rows(), 32) << where;
          EXPECT_EQ(last_copy_read_bands(), want) << where;
          ASSERT_TRUE(test::all_close(dst, test::naive_values(src), 0, 0)) << where;
          ASSERT_TRUE(untouched_outside(dst)) << where;
        }
}

// Note [Tiles of 2- and 8-byte elements] where 2-byte copies stream into dst rows that
// are not whole lines (3000 bfloat16 = 6000 bytes, as the transposed 3000² of the
// matrix): no bands, runs or blocks, the buffered tiles, filled through the zmm tiles
// where the tuning says so (zmm16_fill) and through the 128-bit rows elsewhere. Ragged
// extents along both dims (A: 16-element tiles and the rest; B: 32-row zmm tiles and
// the rest of a 128-row buffer), a dst row start off a line, 1 and 2 threads, every
// SIMD level; the values exact and the buffer around dst untouched.
TEST(CopyFast, TwoByteBufferedTilesUnderEachTuning) {
  Scope scope;
  set_nt_threshold_bytes(0);
  struct Case {
    int64_t nB, nA, dst_row, pad;  // dst (nA, nB) with rows dst_row elements apart, pad elements in
  };
  const std::vector<Case> cases = {{300, 1000, 3000, 0}, {129, 300, 131, 5}, {45, 37, 3000, 0}, {256, 64, 1000, 1}};
  uint64_t seed = 990;
  under_each_tuning([&](const CpuTuning& now) {
    for (const Case& c : cases)
      for (DType dt : {DType::BFloat16, DType::Float16})
        for (const test::Modes& m : test::all_kernel_modes()) {
          test::ModeGuard g(m);
          const Tensor src = exact_values({c.nB, c.nA}, ++seed, dt).t();
          Tensor buf = empty({c.pad + c.nA * c.dst_row}, dt);
          test::poison(buf);
          Tensor dst = buf.narrow(0, c.pad, c.nA * c.dst_row).view({c.nA, c.dst_row}).narrow(1, 0, c.nB);
          dst.copy_(src);
          const std::string where = describe_tuning(now) + ": " + dtype_name(dt) + " " + std::to_string(c.nA) +
                                    " x " + std::to_string(c.nB) + " into rows of " + std::to_string(c.dst_row) +
                                    " pad " + std::to_string(c.pad) + ", " + simd_level_name(m.simd) + ", " +
                                    std::to_string(m.threads) + " threads";
          EXPECT_EQ(last_copy_band_rows(), 0) << where;
          ASSERT_TRUE(test::all_close(dst, test::naive_values(src), 0, 0)) << where;
          ASSERT_TRUE(untouched_outside(dst)) << where;
        }
  });
}

// A source of exact values with its last two dims transposed, copied into a window of a
// poisoned buffer pad elements in (7 more after it): {src, dst}.
std::pair<Tensor, Tensor> transpose_into_window(const Shape& src_sizes, int64_t pad, DType dt, uint64_t seed) {
  const int64_t nd = static_cast<int64_t>(src_sizes.size());
  const Tensor src = exact_values(src_sizes, seed, dt).transpose(nd - 2, nd - 1);
  Tensor buf = empty({src.numel() + pad + 7}, dt);
  test::poison(buf);
  Tensor dst = buf.narrow(0, pad, src.numel()).view(src.sizes());
  dst.copy_(src);
  return {src, dst};
}

// Note [Direct small tiles] for 2-byte elements, with and without the zmm tiles (Note
// [zmm 2-byte tiles]: Zen 5's tuning takes them on any AVX-512 CPU): L2-resident
// transposes, whole 16 x 32 tiles, ragged edges along both dims, an outer dim, a
// misaligned dst start, and one copy past a 1 MiB L2 that does not stream (the zmm tiles
// take it, source rows of 1100); 1 and 2 threads, every SIMD level; the values exact and
// the buffer around dst untouched.
TEST(CopyFast, TwoByteDirectTilesUnderEachTuning) {
  Scope scope;
  struct Case {
    Shape src_sizes;  // contiguous source, its last two dims transposed into dst
    int64_t pad;      // dst elements before the view
  };
  const std::vector<Case> cases = {{{256, 256}, 0}, {{300, 37}, 0}, {{96, 64}, 1}, {{3, 40, 200}, 0}, {{33, 160}, 3},
                                   {{2, 300, 1100}, 5}};
  uint64_t seed = 970;
  under_each_tuning([&](const CpuTuning& now) {
    for (const Case& c : cases)
      for (DType dt : {DType::BFloat16, DType::Float16})
        for (const test::Modes& m : test::all_kernel_modes()) {
          test::ModeGuard g(m);
          const auto [src, dst] = transpose_into_window(c.src_sizes, c.pad, dt, ++seed);
          const std::string where = describe_tuning(now) + ": " + dtype_name(dt) + " " + test::shape_str(c.src_sizes) +
                                    " pad " + std::to_string(c.pad) + ", " + simd_level_name(m.simd) + ", " +
                                    std::to_string(m.threads) + " threads";
          ASSERT_TRUE(test::all_close(dst, test::naive_values(src), 0, 0)) << where;
          ASSERT_TRUE(untouched_outside(dst)) << where;
        }
  });
}

// Note [Direct small tiles] past the L2: copies above a 1 MiB L2 that do not stream,
// source rows of 128 or more elements (4-byte elements, and 2-byte ones where the zmm
// tiles run), ragged both ways, an outer dim, a misaligned dst start; every SIMD level
// and thread count; the values exact and the buffer around dst untouched.
TEST(CopyFast, DirectTilesPastTheL2) {
  Scope scope;
  struct Case {
    Shape src_sizes;  // contiguous source, its last two dims transposed into dst
    int64_t pad;      // dst elements before the view
  };
  const std::vector<Case> cases = {{{2, 300, 1100}, 5}, {{3, 130, 2000}, 0}};
  uint64_t seed = 990;
  for (const Case& c : cases)
    for (DType dt : {DType::Float32, DType::Int32, DType::BFloat16})
      for (const test::Modes& m : test::all_kernel_modes()) {
        test::ModeGuard g(m);
        const auto [src, dst] = transpose_into_window(c.src_sizes, c.pad, dt, ++seed);
        const std::string where = std::string(dtype_name(dt)) + " " + test::shape_str(c.src_sizes) + " pad " +
                                  std::to_string(c.pad) + ", " + simd_level_name(m.simd) + ", " +
                                  std::to_string(m.threads) + " threads";
        ASSERT_EQ(static_cast<int64_t>(dst.nbytes()) > nt_threshold_bytes(), false) << where;  // plain stores
        EXPECT_EQ(last_copy_path(), CopyPath::Tiled) << where;
        EXPECT_FALSE(last_copy_used_nt()) << where;
        ASSERT_TRUE(test::all_close(dst, test::naive_values(src), 0, 0)) << where;
        ASSERT_TRUE(untouched_outside(dst)) << where;
      }
}

// Note [Aliased transposes stream]: transposes past the L2 (and below the streaming
// threshold) into dst rows a multiple of 2 KiB apart stream where the tuning says so and
// keep plain stores where it does not: 4-byte elements into rows of 2 and 6 KiB, 2-byte
// ones into rows of 4 and 6 KiB, each from an aligned and a misaligned dst start (the
// bands, the blocks or the tile runs; the buffered tiles); beside them rows 80 bytes
// past 2 KiB and a copy within the L2, which never stream. Every SIMD level and thread
// count, the values exact, the storage around dst untouched.
TEST(CopyFast, AliasedTransposesStreamWhereTheTuningSays) {
  Scope scope;
  const int64_t l2 = cpu_caches().l2 > 0 ? cpu_caches().l2 : int64_t{1} << 20;
  struct Case {
    DType dt;
    int64_t cols;  // dst row length in elements (the source's rows: its columns)
    int64_t pad;   // dst elements before the view
    bool past_l2;  // rows enough for 1.25 L2s of output, else half an L2
  };
  std::vector<Case> cases;
  for (int64_t pad : {0, 3}) {
    cases.push_back({DType::Float32, 512, pad, true});
    cases.push_back({DType::Int32, 1536, pad, true});
    cases.push_back({DType::BFloat16, 2048, pad, true});
    cases.push_back({DType::BFloat16, 3072, pad, true});
  }
  cases.push_back({DType::Float32, 532, 0, true});  // rows 2128 bytes apart: not aliased
  cases.push_back({DType::Float32, 512, 0, false});  // within the L2
  uint64_t seed = 1400;
  for (const Case& c : cases) {
    const int64_t es = static_cast<int64_t>(dtype_size(c.dt)), row = c.cols * es;
    const int64_t rows = (c.past_l2 ? l2 + l2 / 4 : l2 / 2) / row + 3;
    const int64_t bytes = rows * row;
    if (bytes >= nt_threshold_bytes()) GTEST_SKIP() << "a streaming threshold of " << nt_threshold_bytes() << " bytes";
    const Tensor src = exact_values({c.cols, rows}, ++seed, c.dt).t();  // dst[r][j] = source (j, r)
    const std::vector<double> want = test::naive_values(src);
    const bool aliased = row % 2048 == 0 && bytes > l2;
    for (bool on : {false, true}) {
      test::TuningScope scope_tuning;
      scope_tuning.tuning().aliased_transpose_nt = on;
      scope_tuning.set();
      for (const test::Modes& m : test::all_kernel_modes()) {
        test::ModeGuard g(m);
        Tensor buf = empty({rows * c.cols + c.pad + 7}, c.dt);
        test::poison(buf);
        Tensor dst = buf.narrow(0, c.pad, rows * c.cols).view({rows, c.cols});
        dst.copy_(src);
        const std::string where = std::string(dtype_name(c.dt)) + " out " + std::to_string(rows) + "x" +
                                  std::to_string(c.cols) + " pad " + std::to_string(c.pad) + ", aliasnt=" +
                                  (on ? "1" : "0") + ", " + simd_level_name(m.simd) + ", " +
                                  std::to_string(m.threads) + " threads";
        EXPECT_EQ(last_copy_path(), CopyPath::Tiled) << where;
        EXPECT_EQ(last_copy_used_nt(), on && aliased && use_avx2()) << where;
        ASSERT_TRUE(test::all_close(dst, want, 0, 0)) << where;
        ASSERT_TRUE(untouched_outside(dst)) << where;
      }
    }
  }
}

TEST(CopyFast, TransposeBandsTakeOnlyTheirThreeShapes) {
  Scope scope;
  EXPECT_THROW(set_transpose_bands(24, true), Error);
  EXPECT_THROW(set_transpose_bands(128, true), Error);
  EXPECT_THROW(set_transpose_bands(-16, false), Error);
  try {
    set_transpose_bands(8, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set_transpose_bands: rows must be 0, 16, 32 or 64, got 8"), std::string::npos)
        << e.what();
  }
}

// Note [Dense copies in the last-level cache]: with a tuning that sets copy_nt_bytes, a
// dense copy (Memcpy and Rows paths) between the streaming threshold and it (1.5 times
// it on 2 threads) keeps plain stores, one above it streams; a transpose above the
// threshold streams as before; a
// threshold a test sets applies to every path. Values exact, the bytes compared.
TEST(CopyFast, DenseCopiesStreamAboveTheTuningsThreshold) {
  Scope scope;
  if (!use_avx2()) GTEST_SKIP() << "no streaming stores below AVX2";
  const int64_t thr = nt_threshold_bytes();
  CpuTuning t = cpu_tuning();
  t.copy_nt_bytes = 2 * thr;
  set_cpu_tuning(&t);
  struct Restore {
    ~Restore() { set_cpu_tuning(nullptr); }
  } restore;
  const auto same_bytes = [](const Tensor& a, const Tensor& b) {
    return std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
  };
  // float32 elements: 1.5x, 2.5x and 4x the streaming threshold, against copy_nt_bytes at
  // 2x: on 2 threads dense copies stream only above 1.5 copy_nt_bytes, 3x the threshold.
  // The sources are made once for both thread counts (uniform values: any bytes do).
  const int64_t mid = 3 * thr / 2 / 4, between = 5 * thr / 2 / 4, high = 4 * thr / 4;
  const int64_t side = 1024;  // a 4 MiB transpose above the threshold streams whatever copy_nt_bytes says
  std::map<int64_t, std::pair<Tensor, Tensor>> sources;  // n: a dense n and a tensor of n / 256 rows of 512
  for (int64_t n : {mid, between, high})
    sources[n] = {rand({n}, 5, DType::Float32), rand({n / 256, 512}, 6, DType::Float32)};
  const Tensor sq = rand({side, side}, 7, DType::Float32);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const std::string at = std::to_string(threads) + " threads";
    for (int64_t n : {mid, between, high}) {
      const bool want = n == high || (n == between && threads == 1);
      const Tensor& src = sources[n].first;
      Tensor dst = empty({n}, DType::Float32);
      dst.copy_(src);
      EXPECT_EQ(last_copy_path(), CopyPath::Memcpy) << at;
      EXPECT_EQ(last_copy_used_nt(), want) << n << " elements, " << at;
      EXPECT_TRUE(same_bytes(dst, src)) << at;
      const Tensor rows = sources[n].second.narrow(1, 0, 256);  // rows: every other 1 KiB row of a tensor twice as large
      Tensor rdst = empty({n / 256, 256}, DType::Float32);
      rdst.copy_(rows);
      EXPECT_EQ(last_copy_path(), CopyPath::Rows) << at;
      EXPECT_EQ(last_copy_used_nt(), want) << n << " elements in rows, " << at;
      EXPECT_TRUE(same_bytes(rdst, rows)) << at;
    }
    if (side * side * 4 > thr) {
      Tensor sqd = empty({side, side}, DType::Float32);
      sqd.copy_(sq.t());
      EXPECT_EQ(last_copy_path(), CopyPath::Tiled) << at;
      EXPECT_TRUE(last_copy_used_nt()) << at;
    }
    set_nt_threshold_bytes(0);  // forced by a test: every path streams
    const Tensor& src = sources[mid].first;
    Tensor dst = empty({mid}, DType::Float32);
    dst.copy_(src);
    EXPECT_TRUE(last_copy_used_nt()) << at;
    EXPECT_TRUE(same_bytes(dst, src)) << at;
    set_nt_threshold_bytes(-1);
  }
}

TEST(CopyFast, StreamingThresholdDefaultIsDetectedAndSettable) {
  Scope scope;
  // Note [Cache sizes]: what this core sees, from sysfs first (cpu_features.h)
  const CacheSizes& c = cpu_caches();
  EXPECT_GT(c.l1d, 0);
  EXPECT_GE(c.l2, c.l1d);
  EXPECT_GE(c.llc, c.l2);
  if (std::FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r")) {
    long kib = 0;  // the kernel's size of this core's L3 instance wins over sysconf's
    char unit = 0;
    const int got = std::fscanf(f, "%ld%c", &kib, &unit);
    std::fclose(f);
    if (got == 2 && unit == 'K') {
      EXPECT_EQ(c.llc, int64_t{kib} << 10);
    }
    if (got == 2 && unit == 'M') {
      EXPECT_EQ(c.llc, int64_t{kib} << 20);
    }
  }
  EXPECT_GT(nt_threshold_bytes(), int64_t{1} << 20);  // some MiB, detected once
  EXPECT_LE(nt_threshold_bytes(), c.llc);
  set_nt_threshold_bytes(12345);
  EXPECT_EQ(nt_threshold_bytes(), 12345);
  set_nt_threshold_bytes(-1);
  EXPECT_GT(nt_threshold_bytes(), int64_t{1} << 20);
}

// ---------------------------------------------------------------- on every device
// (Note [Device-parameterized tests] in test_util.h)

class CopyOnDevice : public ::testing::TestWithParam<Device> {};

TEST_P(CopyOnDevice, RoundTripEveryLayoutAndDtype) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int32,
                   DType::Int64}) {
    for (const Shape& s : test::mixed_shapes(11, 6)) {
      for (Layout l : test::all_layouts()) {
        const std::vector<double> v = test::random_values(s, 3, dt, -100, 100, l == Layout::Expanded);
        Tensor g = test::on_device(dev, v, s, dt, l);
        ASSERT_EQ(g.device(), dev);
        EXPECT_TRUE(all_close(g.to(Device::cpu()), test::stored(v, s, dt), 0, 0))
            << dtype_name(dt) << " " << test::layout_name(l) << " " << test::shape_str(s);
        // Straight from a host tensor in the layout into a poisoned device tensor in another.
        Tensor h = test::with_layout(test::host_tensor(v, s, dt), l);
        Tensor d = test::poisoned_on(dev, s, dt, Layout::Transposed);
        d.copy_(h);
        EXPECT_TRUE(all_close(d, test::stored(v, s, dt), 0, 0)) << "H2D " << test::layout_name(l) << " " << test::shape_str(s);
        Tensor back = test::with_layout(zeros(s, dt), Layout::Sliced);
        back.copy_(g);
        EXPECT_TRUE(all_close(back, test::stored(v, s, dt), 0, 0)) << "D2H " << test::layout_name(l) << " " << test::shape_str(s);
      }
    }
  }
}

TEST_P(CopyOnDevice, ConvertsDtypesOnEveryPath) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const DType all[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int32, DType::Int64};
  for (DType from : all) {
    for (DType to : all) {
      const Shape s = {3, 17, 5};
      const std::vector<double> v = test::random_values(s, 5, DType::Float64, -100, 100, false);
      const Tensor src_cpu = test::host_tensor(v, s, from);
      const std::vector<double> ref = src_cpu.to(to).to_vector();  // the CPU conversion
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced}) {
        Tensor src = test::with_layout(src_cpu.to(dev), l);
        Tensor d2d = test::poisoned_on(dev, s, to, Layout::Contiguous);
        d2d.copy_(src);
        EXPECT_TRUE(all_close(d2d, ref, 0, 0)) << from << " -> " << to << " d2d " << test::layout_name(l);
        Tensor d2h = test::with_layout(zeros(s, to), Layout::Transposed);
        d2h.copy_(src);
        EXPECT_TRUE(all_close(d2h, ref, 0, 0)) << from << " -> " << to << " d2h " << test::layout_name(l);
        Tensor h2d = test::poisoned_on(dev, s, to, l);
        h2d.copy_(test::with_layout(src_cpu, l));
        EXPECT_TRUE(all_close(h2d, ref, 0, 0)) << from << " -> " << to << " h2d " << test::layout_name(l);
      }
    }
  }
}

TEST_P(CopyOnDevice, NchwNhwcAndLastTwoDimsTransposed) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int8}) {
    for (Shape s : {Shape{2, 3, 5, 7}, Shape{1, 64, 32, 32}, Shape{3, 33, 17, 65}, Shape{2, 5, 1, 40}}) {
      const std::vector<double> v = test::random_values(s, 9, dt, -50, 50, false);
      Tensor g = test::host_tensor(v, s, dt).to(dev);
#ifdef SB_WITH_CUDA
      if (dev.is_cuda()) cuda::reset_copy_path_counts();
#endif
      Tensor nhwc = g.contiguous(MemoryFormat::ChannelsLast);
      ASSERT_TRUE(nhwc.is_contiguous(MemoryFormat::ChannelsLast));
      EXPECT_TRUE(all_close(nhwc, test::stored(v, s, dt), 0, 0)) << "NCHW -> NHWC " << test::shape_str(s);
      Tensor nchw = nhwc.contiguous();
      EXPECT_TRUE(all_close(nchw, test::stored(v, s, dt), 0, 0)) << "NHWC -> NCHW " << test::shape_str(s);
      const bool tiled = s[1] >= 4 && s[2] * s[3] >= 4;
#ifdef SB_WITH_CUDA
      if (tiled && dev.is_cuda()) {
        EXPECT_EQ(cuda::copy_path_counts().transpose, 2) << "the tiled CUDA kernel " << test::shape_str(s);
      }
#endif
      (void)tiled;
      // A 2-D transpose of the last two dims.
      Tensor t = g.transpose(2, 3).contiguous();
      std::vector<double> ref(v.size());
      const std::vector<double> sv = test::stored(v, s, dt);
      const Shape ts = {s[0], s[1], s[3], s[2]};
      for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
        const Shape id = test::unravel(i, ts);
        ref[i] = sv[((id[0] * s[1] + id[1]) * s[2] + id[3]) * s[3] + id[2]];
      }
      EXPECT_TRUE(all_close(t, ref, 0, 0)) << "transpose " << test::shape_str(s);
    }
  }
}

TEST_P(CopyOnDevice, FillWritesOnlyTheView) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16, DType::Int32, DType::Float64}) {
    Tensor buf = zeros({6, 9}, dt, dev);
    buf.slice(1, 1, std::nullopt, 2).fill_(3.0);
    std::vector<double> ref(54, 0.0);
    for (int i = 0; i < 6; ++i)
      for (int j = 1; j < 9; j += 2) ref[i * 9 + j] = 3.0;
    EXPECT_TRUE(all_close(buf, ref, 0, 0)) << dt;
    Tensor t = empty({5, 4}, dt, dev).t();
    t.fill_(-2.5);
    EXPECT_TRUE(all_close(t, std::vector<double>(20, is_floating(dt) ? -2.5 : -2.0), 0, 0)) << dt;
  }
}

// The family's case table (Note [Case tables], cases/copy.h): every materialization
// the benchmarks time, at small odd sizes (empty ones included), every dtype, on every
// device: the same values, dense in the case's format, in storage of its own, and the
// source's buffer unchanged.
TEST_P(CopyOnDevice, EveryCaseOfTheTable) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  const std::vector<cases::CopyCase> table =
      cases::copy_cases({1, 7, 33, 0}, {{2, 3, 5, 7}, {1, 9, 2, 4}, {3, 0, 2, 2}}, {2, 5, 3, 6}, {{3, 4, 5}, {1, 8, 0}});
  uint64_t seed = 1;
  for (const cases::CopyCase& c : table) {
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int32,
                     DType::Int64}) {
      const std::string what = std::string(cases::op_name(c.op)) + " " + layout_name(c.layout) + " " +
                               dtype_name(dt) + " " + test::shape_str(c.shape);
      const Tensor x = test::with_placement(
          test::host_tensor(test::random_values(c.shape, seed++, dt, -100, 100), c.shape, dt).to(dev),
          cases::copy_placement(c));
      const std::vector<double> vx = test::naive_values(x);
      auto buffer_bytes = [&] {  // the source's whole buffer, bit for bit
        const Tensor flat = x.as_strided({static_cast<int64_t>(x.storage()->nbytes() / x.element_size())}, {1}, 0);
        const Tensor h = flat.to(Device::cpu()).contiguous();
        const auto* p = static_cast<const unsigned char*>(h.data_ptr());
        return std::vector<unsigned char>(p, p + h.nbytes());
      };
      const std::vector<unsigned char> before = buffer_bytes();
      const Tensor y = cases::copy_call(c, x);
      Shape want = c.shape;
      if (c.op == cases::CopyOp::Permute) want = {c.shape[2], c.shape[0], c.shape[1]};
      ASSERT_EQ(y.sizes(), want) << what;
      EXPECT_EQ(y.device(), dev) << what;
      EXPECT_TRUE(y.is_contiguous(cases::copy_format(c))) << what << ": strides " << test::shape_str(y.strides());
      // PyTorch's rule: contiguous(format) of a tensor already in it returns the tensor
      const Tensor view = c.op == cases::CopyOp::Permute ? x.permute({2, 0, 1}) : x;
      const bool clone = c.op == cases::CopyOp::Contiguous && c.layout == Layout::Contiguous;
      if (x.numel() > 0) {
        EXPECT_EQ(y.shares_storage_with(x), !clone && view.is_contiguous(cases::copy_format(c))) << what;
      }
      std::vector<double> ref = vx;
      if (c.op == cases::CopyOp::Permute) {  // y[k][i][j] = x[i][j][k]
        const int64_t I = c.shape[0], J = c.shape[1], K = c.shape[2];
        for (int64_t i = 0; i < I; ++i)
          for (int64_t j = 0; j < J; ++j)
            for (int64_t k = 0; k < K; ++k) ref[(k * I + i) * J + j] = vx[(i * J + j) * K + k];
      }
      EXPECT_TRUE(all_close(y, ref, 0, 0)) << what;
      EXPECT_EQ(buffer_bytes(), before) << what << ": the source's buffer changed";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, CopyOnDevice, ::testing::ValuesIn(test::test_devices()), test::device_param_name);

#ifdef SB_WITH_CUDA
// ---------------------------------------------------------------- the CUDA backend's own paths

TEST(CudaCopy, PinnedAndAsync) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const Shape s = {257, 31};
  Tensor p = cuda::pinned_empty(s);
  EXPECT_TRUE(cuda::is_pinned(p));
  EXPECT_TRUE(p.device().is_cpu());
  EXPECT_FALSE(cuda::is_pinned(zeros(s)));
  const std::vector<double> v = test::random_values(s, 4, DType::Float32, -1, 1, false);
  p.copy_(test::host_tensor(v, s, DType::Float32));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cuda::reset_copy_path_counts();
  Tensor g = cuda::to_async(p, dev, stream);
  Tensor back = cuda::to_async(g, Device::cpu(), stream);
  EXPECT_EQ(cuda::copy_path_counts().memcpy, 2);
  EXPECT_EQ(cuda::copy_path_counts().staged, 0);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(cuda::is_pinned(back));
  EXPECT_TRUE(all_close(back, test::stored(v, s, DType::Float32), 0, 0));
  // A pageable or strided source falls back to a synchronous copy.
  Tensor t = cuda::to_async(test::host_tensor(v, s, DType::Float32).t(), dev, stream);
  EXPECT_EQ(cuda::copy_path_counts().staged, 1);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(all_close(t.t(), test::stored(v, s, DType::Float32), 0, 0));
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// dbuf ([B, I, dpitch], poisoned) after a transposing copy into its first J columns from
// vs ([B, J, pitch], the source along I from column `first`): every element of the view
// is the source's, the padding still NaN. Empty when so, else the first difference.
std::string transposed_into_padded(const Tensor& dbuf, const std::vector<double>& vs, int64_t B, int64_t I,
                                   int64_t J, int64_t pitch, int64_t first) {
  const int64_t dpitch = dbuf.sizes()[2];
  const std::vector<double> got = dbuf.to(Device::cpu()).to_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t j = 0; j < dpitch; ++j) {
        const double g = got[static_cast<size_t>((b * I + i) * dpitch + j)];
        const std::string at = std::to_string(b) + "," + std::to_string(i) + "," + std::to_string(j);
        if (j >= J && !std::isnan(g)) return "padding written at " + at;
        if (j < J && g != vs[static_cast<size_t>((b * J + j) * pitch + first + i)]) return "wrong element at " + at;
      }
  return "";
}

// Note [Paired 2-byte transpose tiles]: a 2-byte transpose whose words lie on 4-byte
// boundaries moves pairs: an odd row and column count (ragged last pairs), several
// 64 x 128 tiles each way (full and ragged) with a batch, 64 x 64 tiles where the
// columns are 64 or fewer (64 and 37), dst padded (its padding left as it was), both
// 2-byte dtypes; a source one element off a 4-byte boundary takes the element tiles.
TEST(CudaCopy, TwoByteTransposesMoveAlignedPairs) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (const DType dt : {DType::BFloat16, DType::Float16}) {
    // J 131: 64 x 128 tiles; 64 and 37: 64 x 64 tiles (full, and ragged with an odd J)
    for (const int64_t J : {131, 64, 37}) {
      for (const bool aligned : {true, false}) {
        // src: [B, J, pitch 302] holding the [B, I, J] source along I (stride 1)
        const int64_t B = 2, I = 267, pitch = 302, first = aligned ? 0 : 1, dpitch = J + (J % 2 ? 3 : 2);
        const Shape sb = {B, J, pitch};
        const std::vector<double> vs = test::stored(test::random_values(sb, 51, dt, -50, 50, false), sb, dt);
        const Tensor sbuf = test::host_tensor(vs, sb, dt).to(dev);
        const Tensor src = sbuf.narrow(2, first, I).transpose(1, 2);  // [B, I, J], strides [J * pitch, 1, pitch]
        // dst: [B, I, J] in a [B, I, dpitch] buffer: an even pitch, padding after each row
        const Tensor dbuf = test::poisoned_on(dev, {B, I, dpitch}, dt, Layout::Contiguous);
        Tensor dst = dbuf.narrow(2, 0, J);
        cuda::reset_copy_path_counts();
        dst.copy_(src);
        const cuda::CopyPathCounts n = cuda::copy_path_counts();
        const std::string what =
            std::string(dtype_name(dt)) + " J " + std::to_string(J) + (aligned ? " aligned" : " one element off");
        EXPECT_EQ(n.transpose, 1) << what;
        EXPECT_EQ(n.transpose_pairs, aligned ? 1 : 0) << what;
        EXPECT_EQ(transposed_into_padded(dbuf, vs, B, I, J, pitch, first), "") << what;
      }
    }
  }
}

// A 4-byte transpose of more 64 x 64 tiles than the device holds blocks (2 x 16 x 32 =
// 1024 tiles, ragged in both dims), so that a block walks several tiles, whatever the
// walk: every element lands once, the padding of a poisoned dst stays NaN.
TEST(CudaCopy, FourByteTransposesWalkManyTilesABlock) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const int64_t B = 2, I = 1001, J = 1990, pitch = 1003, dpitch = J + 3;
  const Shape sb = {B, J, pitch};
  const std::vector<double> vs = test::stored(test::random_values(sb, 52, DType::Float32, -50, 50, false), sb, DType::Float32);
  const Tensor src = test::host_tensor(vs, sb, DType::Float32).to(dev).narrow(2, 1, I).transpose(1, 2);
  const Tensor dbuf = test::poisoned_on(dev, {B, I, dpitch}, DType::Float32, Layout::Contiguous);
  Tensor dst = dbuf.narrow(2, 0, J);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass over a written dst: same bits
    cuda::reset_copy_path_counts();
    dst.copy_(src);
    EXPECT_EQ(cuda::copy_path_counts().transpose, 1);
    EXPECT_EQ(transposed_into_padded(dbuf, vs, B, I, J, pitch, 1), "") << "pass " << pass;
  }
}

TEST(CudaCopy, BackendRejectsHostTensorsBeforeAnyWork) {
  Tensor a = zeros({2, 3}), b = zeros({2, 3});
  EXPECT_THROW(cuda::fill(a, 1.0), Error);
  EXPECT_THROW(cuda::copy(a, b), Error);  // neither on a GPU
  EXPECT_EQ(a.to_vector(), std::vector<double>(6, 0.0));
}
#endif  // SB_WITH_CUDA

}  // namespace
}  // namespace sb
