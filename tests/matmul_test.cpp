// matmul_test.cpp — matmul / matmul_out / gemm (lib/matmul/, gemm_kernel.cpp)
// against a float64 triple loop, over random shapes (K not a multiple of KC, M or N
// of 1, sizes 0), every operand layout, poisoned outputs, 1 and 2 threads, AVX2 and
// scalar micro-kernels; plus the epilogue, batch broadcasting, workspace accounting
// and bad inputs.
#include "stridebench/matmul.h"

#include "stridebench/cpu_features.h"
#include "stridebench/parallel.h"
#include "core/test_hooks.h"
#include "matmul/gemm_impl.h"
#include "cases/matmul.h"
#include "test_util.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

using test::all_close;
using test::Layout;
using cases::Style;

// float64 reference of a @ b with batch broadcasting, row-major over the result.
std::vector<double> ref_matmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const int64_t ba = a.dim() == 3 ? a.size(0) : 1, bb = b.dim() == 3 ? b.size(0) : 1;
  const int64_t B = std::max(ba, bb);
  std::vector<double> out(static_cast<size_t>(B * M * N));
  for (int64_t z = 0; z < B; ++z) {
    const double* pa = va.data() + (ba == 1 ? 0 : z) * M * K;
    const double* pb = vb.data() + (bb == 1 ? 0 : z) * K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += pa[i * K + k] * pb[k * N + j];
        out[(z * M + i) * N + j] = s;
      }
  }
  return out;
}

// A column-major [r, c] tensor with the values of v.
Tensor column_major(const Tensor& v) { return test::with_layout(v, Layout::ColumnMajor); }

using test::Modes;
using test::ModeGuard;
const std::vector<Modes> kModes = test::gemm_kernel_modes();

// float32 accumulation errs by about K float32 roundings; bfloat16 rounds the result once
// more (a unit of 2^-8: rtol 8e-3, with atol for results near 0)
double tol_for(DType dt, int64_t K) {
  return dt == DType::Float64 ? 1e-12 * (K + 1) : 2e-6 * (K + 1) + (dt == DType::BFloat16 ? 1e-2 : 0.0);
}
double rtol_for(DType dt) { return dt == DType::BFloat16 ? 8e-3 : 1e-5; }

// bfloat16 runs every packing of its GEMM (test_hooks.h set_bf16_gemm_pairs): the AMX
// tiles and the pairs of vdpbf16ps (each its scalar stand-in on a CPU without the
// instructions) and the widened one.
std::vector<int> pair_modes(DType dt) { return dt == DType::BFloat16 ? std::vector<int>{2, 1, 0} : std::vector<int>{-1}; }
struct PairsGuard {
  explicit PairsGuard(int mode) { set_bf16_gemm_pairs(mode); }
  ~PairsGuard() { set_bf16_gemm_pairs(-1); }
};

TEST(Matmul, RandomShapesEveryLayoutModeAndDtype) {
  std::mt19937_64 rng(11);
  const int64_t sizes[] = {0, 1, 2, 5, 7, 13, 17, 33, 70, 161, 300};
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t M = sizes[rng() % 11], N = sizes[rng() % 11];
    int64_t K = sizes[rng() % 11];
    if (trial % 7 == 0) K = detail::kc_block() + 1 + rng() % (2 * detail::kc_block());  // K across 2-3 KC blocks, not a multiple
    const DType dt = trial % 5 == 4 ? DType::Float64 : trial % 5 == 2 ? DType::BFloat16 : DType::Float32;
    const Tensor va = randn({M, K}, rng(), dt), vb = randn({K, N}, rng(), dt);
    const std::vector<double> ref = ref_matmul(va, vb);
    for (const Modes& m : kModes)
    for (int pm : pair_modes(dt)) {
      ModeGuard g(m);
      PairsGuard pg(pm);
      for (int la = 0; la < 4; ++la) {
        const Tensor a = la == 3 ? column_major(va) : test::with_layout(va, la == 0 ? Layout::Contiguous : la == 1 ? Layout::Transposed : Layout::Sliced);
        const Tensor b = test::with_layout(vb, la == 2 ? Layout::Transposed : la == 1 ? Layout::Sliced : Layout::Offset);
        Tensor out = matmul(a, b);
        ASSERT_EQ(out.dtype(), dt);
        ASSERT_TRUE(test::all_close(out, ref, tol_for(dt, K), rtol_for(dt)))
            << dtype_name(dt) << " " << M << "x" << K << "x" << N << " layout " << la << " threads " << m.threads
            << " simd " << int(m.simd) << " tile " << m.tile << " pairs " << pm;
        // out= into a poisoned, non-contiguous (transposed or sliced) buffer
        Tensor o2 = test::with_layout(zeros({M, N}, dt), la % 2 ? Layout::Transposed : Layout::Sliced);
        test::poison(o2);
        matmul_out(o2, a, b);
        ASSERT_TRUE(test::all_close(o2, ref, tol_for(dt, K), rtol_for(dt))) << dtype_name(dt) << " out= layout " << la;
      }
    }
  }
}

// Every design's block sizes come from cpu_tuning() (Note [Tuning by
// microarchitecture]); a wrong KC, MC or NC must cost time, never a result. Small,
// ragged blocks (not multiples of the tile) put every path through many jc, pc and ic
// blocks at sizes a test can afford, with operands and outputs in several layouts.
TEST(Matmul, ForcedBlockSizesOfAnyDesign) {
  std::mt19937_64 rng(29);
  struct Blocks {
    int64_t kc, mc, nc;
  };
  const Blocks blocks[] = {{8, 1, 1}, {24, 20, 40}, {37, 7, 33}, {100, 50, 70}};
  for (const Blocks& bl : blocks) {
    CpuTuning t = cpu_tuning();
    t.gemm_kc = bl.kc;
    t.gemm_mc = bl.mc;
    t.gemm_nc = bl.nc;
    t.gemm_amx_kc = std::max<int64_t>(32, bl.kc / 32 * 32);  // the tiles' blocks: whole chunks
    t.gemm_amx_mc = bl.mc > 32 ? 64 : 32;
    set_cpu_tuning(&t);
    struct Restore {
      ~Restore() { set_cpu_tuning(nullptr); }
    } restore;
    // the driver plans with these blocks: one thread's B block (KC x NC rounded to the
    // 16-column panel) and A block (MC rounded to the tile's rows, x KC) in float64
    const int64_t nc = (bl.nc + 7) / 8 * 8, mc = (bl.mc + 3) / 4 * 4;
    EXPECT_EQ(gemm_workspace_bytes(4000, 4000, 4000, DType::Float64, 1),
              static_cast<size_t>(((bl.kc * nc + 15) / 16 * 16 + (mc * bl.kc + 15) / 16 * 16) * 8))
        << describe_tuning(t);
    for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
      const int64_t M = 1 + rng() % 90, N = 1 + rng() % 150, K = 1 + rng() % 120;
      const Tensor va = randn({M, K}, rng(), dt), vb = randn({K, N}, rng(), dt);
      const std::vector<double> ref = ref_matmul(va, vb);
      for (const Modes& m : kModes)
        for (int pm : pair_modes(dt)) {
          ModeGuard g(m);
          PairsGuard pg(pm);
          for (int l = 0; l < 3; ++l) {
            const Tensor a = test::with_layout(va, l == 1 ? Layout::Transposed : Layout::Contiguous);
            const Tensor b = test::with_layout(vb, l == 2 ? Layout::Transposed : Layout::Sliced);
            Tensor out = test::with_layout(zeros({M, N}, dt), l == 0 ? Layout::Contiguous : Layout::Transposed);
            test::poison(out);
            matmul_out(out, a, b);
            ASSERT_TRUE(test::all_close(out, ref, tol_for(dt, K), rtol_for(dt)))
                << describe_tuning(t) << " " << dtype_name(dt) << " " << M << "x" << K << "x" << N << " layout " << l
                << " threads " << m.threads << " simd " << int(m.simd) << " tile " << m.tile << " pairs " << pm;
          }
        }
    }
  }
}

// N wider than the driver's NC block (1024 columns) and M taller than its MC block:
// several jc and ic blocks, each B block packed once per KC block, A re-packed per jc,
// with ragged last blocks. On 2 threads each stripe still spans more than one NC block.
TEST(Matmul, WideAndTallAcrossSeveralCacheBlocks) {
  std::mt19937_64 rng(23);
  struct Case {
    DType dt;
    int64_t M, N, K;
  };
  // bfloat16: a K of two or three KC blocks keeps the partial sums of each thread's
  // stripe across several NC blocks (Note [bfloat16 C]); its pairs take a KC twice as deep
  const Case cases[] = {{DType::Float32, 5, 2085, 3},
                        {DType::Float32, 161, 2300, 37},
                        {DType::Float32, 300, 1100, detail::kc_block() + 1},
                        {DType::BFloat16, 5, 2085, 3},
                        {DType::BFloat16, 70, 2300, 2 * detail::kc_block() + 3}};
  for (const Case& c : cases) {
    const Tensor va = randn({c.M, c.K}, rng(), c.dt), vb = randn({c.K, c.N}, rng(), c.dt);
    const std::vector<double> ref = ref_matmul(va, vb);
    for (const Modes& m : kModes)
    for (int pm : pair_modes(c.dt)) {
      ModeGuard g(m);
      PairsGuard pg(pm);
      for (int lb = 0; lb < 2; ++lb) {
        const Tensor b = test::with_layout(vb, lb ? Layout::Transposed : Layout::Sliced);
        Tensor out = test::with_layout(zeros({c.M, c.N}, c.dt), lb ? Layout::Sliced : Layout::Contiguous);
        test::poison(out);
        matmul_out(out, test::with_layout(va, lb ? Layout::Contiguous : Layout::Transposed), b);
        ASSERT_TRUE(test::all_close(out, ref, tol_for(c.dt, c.K), rtol_for(c.dt)))
            << dtype_name(c.dt) << " " << c.M << "x" << c.K << "x" << c.N << " b layout " << lb << " threads "
            << m.threads << " simd " << int(m.simd) << " tile " << m.tile << " pairs " << pm;
      }
    }
  }
}

TEST(Matmul, BatchedAndBroadcast) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t B = 1 + rng() % 4, M = rng() % 20, K = 1 + rng() % 40, N = rng() % 30;
    const int kind = trial % 4;  // 0: both 3-D, 1: a 2-D, 2: b 2-D, 3: a batch 1 expanded
    Tensor va = randn(kind == 1 ? Shape{M, K} : Shape{kind == 3 ? 1 : B, M, K}, rng());
    Tensor vb = randn(kind == 2 ? Shape{K, N} : Shape{B, K, N}, rng());
    const std::vector<double> ref = ref_matmul(va, vb);
    for (const Modes& m : kModes) {
      ModeGuard g(m);
      Tensor a = test::with_layout(va, trial % 2 ? Layout::Transposed : Layout::Sliced);
      Tensor b = test::with_layout(vb, trial % 3 ? Layout::Contiguous : Layout::Transposed);
      if (kind == 3) a = a.expand({B, M, K});  // stride-0 batch
      Tensor out = matmul(a, b);
      ASSERT_EQ(out.sizes(), (Shape{B, M, N}));
      ASSERT_TRUE(test::all_close(out, ref, tol_for(DType::Float32, K), 1e-5)) << "kind " << kind;
      Tensor o2 = test::with_layout(zeros({B, M, N}), Layout::Transposed);
      test::poison(o2);
      matmul_out(o2, a, b);
      ASSERT_TRUE(test::all_close(o2, ref, tol_for(DType::Float32, K), 1e-5)) << "out= kind " << kind;
    }
  }
}

// float64 reference of torch.matmul's shapes: a 1-D a is a row [1, K] and a 1-D b a
// column [K, 1], their added dim dropped from the result; the batch dims (all but the
// last two) broadcast. Returns the result sizes and its values, row-major.
std::pair<Shape, std::vector<double>> ref_matmul_nd(const Tensor& a, const Tensor& b) {
  const Shape sa = a.dim() == 1 ? Shape{1, a.size(0)} : a.sizes(), sb = b.dim() == 1 ? Shape{b.size(0), 1} : b.sizes();
  const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const size_t nb = std::max(ba.size(), bb.size());
  Shape batch(nb, 1);
  for (size_t i = 0; i < nb; ++i) {  // broadcast, aligned at the right
    const int64_t x = i + ba.size() >= nb ? ba[i + ba.size() - nb] : 1, y = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
    batch[i] = x == 1 ? y : x;
  }
  int64_t nbatch = 1;
  for (int64_t v : batch) nbatch *= v;
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  // offset of batch index z (row-major over batch) in an operand of batch sizes bs
  auto batch_off = [&](int64_t z, const Shape& bs, int64_t mat) {
    int64_t off = 0, stride = mat;
    for (size_t i = nb; i-- > 0;) {
      const int64_t idx = z % batch[i];
      z /= batch[i];
      if (i + bs.size() >= nb) {
        const int64_t s = bs[i + bs.size() - nb];
        off += (s == 1 ? 0 : idx) * stride;
        stride *= s;
      }
    }
    return off;
  };
  std::vector<double> out(static_cast<size_t>(nbatch * M * N));
  for (int64_t z = 0; z < nbatch; ++z) {
    const int64_t oa = batch_off(z, ba, M * K), ob = batch_off(z, bb, K * N);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += va[oa + i * K + k] * vb[ob + k * N + j];
        out[(z * M + i) * N + j] = acc;
      }
  }
  Shape sizes = batch;
  if (a.dim() > 1) sizes.push_back(M);
  if (b.dim() > 1) sizes.push_back(N);
  return {sizes, out};
}

// PyTorch's matmul shapes: vectors on either side and batch dims of any number that
// broadcast, non-contiguous operands and outputs, float32, float64 and bfloat16.
TEST(Matmul, VectorsAndBatchDimsAsPyTorch) {
  struct C {
    Shape a, b;
  };
  const std::vector<C> cs = {{{7}, {7}},          {{5, 7}, {7}},          {{7}, {7, 6}},        {{7}, {3, 7, 6}},
                             {{3, 5, 7}, {7}},    {{2, 1, 5, 7}, {3, 7, 6}}, {{2, 3, 5, 7}, {7, 6}}, {{5, 7}, {2, 3, 7, 6}},
                             {{2, 1, 2, 5, 7}, {3, 1, 7, 6}}, {{4, 1, 5, 7}, {1, 3, 7, 6}}, {{0, 5, 7}, {7, 6}},
                             {{2, 3, 5, 0}, {3, 0, 6}}};
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16})
    for (size_t c = 0; c < cs.size(); ++c) {
      const Tensor va = randn(cs[c].a, 11 + c).to(dt), vb = randn(cs[c].b, 23 + c).to(dt);
      const auto [sizes, ref] = ref_matmul_nd(va, vb);
      const int64_t K = cs[c].a.back();
      for (bool strided : {false, true}) {
        const Tensor a = strided && va.dim() >= 2 ? test::with_layout(va, Layout::Transposed) : va;
        const Tensor b = strided ? test::with_layout(vb, vb.dim() >= 2 ? Layout::Transposed : Layout::Sliced) : vb;
        const std::string what = std::string(dtype_name(dt)) + " " + ::testing::PrintToString(cs[c].a) + " x " +
                                 ::testing::PrintToString(cs[c].b) + (strided ? " strided" : "");
        Tensor out;
        ASSERT_NO_THROW(out = matmul(a, b)) << what;
        ASSERT_EQ(out.sizes(), sizes) << what;
        EXPECT_TRUE(test::all_close(out, ref, tol_for(dt, K), rtol_for(dt))) << what;
        // out=, transposed where it has two dims or more, poisoned first
        Tensor o = sizes.size() >= 2 ? test::with_layout(zeros(sizes, dt), Layout::Transposed) : zeros(sizes, dt);
        test::poison(o);
        ASSERT_NO_THROW(matmul_out(o, a, b)) << what;
        EXPECT_TRUE(test::all_close(o, ref, tol_for(dt, K), rtol_for(dt))) << what << " out=";
      }
    }
}

// alpha * A B + beta * C [+ bias] [relu] in float64, C [M, N] row-major.
std::vector<double> ref_epilogue(const std::vector<double>& ab, const std::vector<double>& vc,
                                 const std::vector<double>& vbias, const GemmEpilogue& ep, int64_t M, int64_t N) {
  std::vector<double> ref(ab.size());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double v = ep.alpha * ab[i * N + j] + ep.beta * vc[i * N + j];
      if (ep.bias) v += vbias[(ep.bias_per_row ? i : j) * ep.bias_stride];
      if (ep.relu) v = std::max(v, 0.0);
      ref[i * N + j] = v;
    }
  return ref;
}

TEST(Gemm, EpilogueAlphaBetaBiasRelu) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 16; ++trial) {
    const int64_t M = 1 + rng() % 40, N = 1 + rng() % 40, K = rng() % 600;
    const Tensor a = randn({M, K}, rng()), b = randn({K, N}, rng()), c0 = randn({M, N}, rng());
    const Tensor bias = randn({std::max(M, N) * 2}, rng());
    const std::vector<double> ab = ref_matmul(a, b), vc = c0.to_vector(), vbias = bias.to_vector();
    GemmEpilogue ep;
    ep.alpha = 0.5f + trial % 3;
    ep.beta = trial % 2 ? 0.75f : 0.0f;
    ep.bias = trial % 4 < 2 ? bias.data<float>() : nullptr;
    ep.bias_stride = 1 + trial / 8;  // unit and strided bias (fused AVX-512 store and tile paths)
    ep.bias_per_row = trial % 8 >= 4;
    ep.relu = trial % 3 == 0;
    const std::vector<double> ref = ref_epilogue(ab, vc, vbias, ep, M, N);
    for (const Modes& m : kModes) {
      ModeGuard g(m);
      Tensor c = c0.clone();
      if (ep.beta == 0.0f) test::poison(c);  // beta == 0 must never read C
      gemm(M, N, K, a.data<float>(), K, 1, b.data<float>(), N, 1, c.data<float>(), N, 1, ep);
      ASSERT_TRUE(test::all_close(c, ref, 2e-6 * (K + 1), 1e-5)) << "trial " << trial;
      // column-major C (Note [Column-major C]: computed as C^T = B^T A^T, bias side swapped)
      Tensor ct = c0.t().contiguous();  // [N, M]: C(i, j) at i + j*M
      if (ep.beta == 0.0f) test::poison(ct);
      gemm(M, N, K, a.data<float>(), K, 1, b.data<float>(), N, 1, ct.data<float>(), 1, M, ep);
      ASSERT_TRUE(test::all_close(ct.t(), ref, 2e-6 * (K + 1), 1e-5)) << "column-major C, trial " << trial;
    }
  }
}

// Note [Narrow GEMMs]: N <= 64 and M >= 64 with unit-stride rows of A and C take the
// unpacked-A path on the AVX512 level (every panel count, NP = 1-4, and their row tiles
// of 8, 12, 8 and 6; rows left over for the zero-padded tail; K up to the path's
// limit and past it), every other level and stride the packed one; the results must be
// the same. A's rows stepped (a_rs > K), B row-major or transposed, C's rows stepped
// with the gap between them poisoned and left as it was, and every part of the
// epilogue; a NaN row of A stays a NaN row of C through the relu.
TEST(Gemm, NarrowShapesFromUnpackedRows) {
  std::mt19937_64 rng(11);
  const int64_t Ns[] = {1, 7, 16, 17, 31, 32, 33, 40, 48, 49, 57, 64};
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t N = Ns[trial % 12], M = 64 + rng() % 200;
    const int64_t K = trial == 22 ? detail::kNarrowMaxK : trial == 23 ? detail::kNarrowMaxK + 1 : 1 + rng() % 700;
    const int64_t lda = K + 3, ldc = N + 5;
    Tensor abuf = randn({M, lda}, rng());
    if (trial % 3 == 0)
      for (int64_t k = 0; k < K; ++k) abuf.data<float>()[7 * lda + k] = NAN;  // row 7 of C
    const Tensor a = abuf.slice(1, 0, K).contiguous();
    const bool bt = trial % 2 == 1;
    const Tensor b = randn({K, N}, rng()), b_t = b.t().contiguous();  // b_t: B^T stored row-major
    const Tensor c0 = randn({M, N}, rng()), bias = randn({2 * std::max(M, N)}, rng());
    GemmEpilogue ep;
    ep.alpha = trial % 4 == 2 ? 0.5f : 1.0f;
    ep.beta = trial % 4 == 1 ? 0.75f : 0.0f;
    ep.bias = trial % 3 != 1 ? bias.data<float>() : nullptr;
    ep.bias_stride = 1 + trial % 2;
    ep.bias_per_row = trial % 5 == 0;
    ep.relu = trial % 3 == 0 || trial % 4 == 3;
    const std::vector<double> ref = ref_epilogue(ref_matmul(a, b), c0.to_vector(), bias.to_vector(), ep, M, N);
    const std::string what = "M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) +
                             (bt ? ", B transposed" : "") + ", trial " + std::to_string(trial);
    for (const Modes& m : kModes) {
      ModeGuard g(m);
      Tensor cbuf = full({M, ldc}, 0.0);
      test::poison(cbuf);
      Tensor c = cbuf.slice(1, 0, N);
      if (ep.beta != 0.0f) c.copy_(c0);
      gemm(M, N, K, abuf.data<float>(), lda, 1, bt ? b_t.data<float>() : b.data<float>(), bt ? 1 : N, bt ? K : 1,
           c.data<float>(), ldc, 1, ep);
      ASSERT_TRUE(test::all_close(c, ref, 2e-6 * (K + 1), 1e-5))
          << what << ", " << simd_level_name(m.simd) << ", " << m.threads << " threads";
      const std::vector<double> gap = test::naive_values(cbuf.slice(1, N, ldc));
      ASSERT_TRUE(std::all_of(gap.begin(), gap.end(), [](double v) { return std::isnan(v); }))
          << what << ": the gap between C's rows was written";
    }
  }
}

// Note [Fused relu and NaN]: a NaN row of A and a NaN bias element give NaN rows and
// columns of C through the relu, at every SIMD level, for float32 (the AVX-512, AVX2 and
// scalar epilogues; full and ragged tiles), bfloat16 with a float32 and a bfloat16 C
// (both pairings), float64 and the K = 0 product (bias and relu alone). C starts at 7:
// a NaN that was never written cannot pass.
TEST(Gemm, FusedReluPropagatesNaN) {
  const int64_t M = 19, N = 37;
  for (int64_t K : {int64_t{0}, int64_t{50}}) {
    Tensor a = randn({M, K}, 61), bias = randn({N}, 62);
    const Tensor b = randn({K, N}, 63);
    for (int64_t k = 0; k < K; k += 7) a.data<float>()[3 * K + k] = NAN;  // row 3 of C
    bias.data<float>()[5] = NAN;                                          // column 5 of C
    GemmEpilogue ep;
    ep.bias = bias.data<float>();
    ep.relu = true;
    for (DType dt : {DType::Float32, DType::BFloat16, DType::Float64}) {
      const Tensor at = a.to(dt), bt = b.to(dt);
      const std::vector<double> ref = ref_epilogue(ref_matmul(at, bt), std::vector<double>(M * N, 0.0),
                                                   bias.to_vector(), ep, M, N);
      ASSERT_TRUE(std::isnan(ref[5]) && (K == 0 || std::isnan(ref[3 * N + 1])));
      ASSERT_TRUE(std::any_of(ref.begin(), ref.end(), [](double v) { return v == 0.0; }));
      for (const Modes& m : kModes)
        for (int pm : pair_modes(dt)) {
          ModeGuard g(m);
          PairsGuard pg(pm);
          const std::string what = std::string(dtype_name(dt)) + " K " + std::to_string(K) + ", " +
                                   simd_level_name(m.simd) + ", " + std::to_string(m.threads) + " threads";
          const double at_ = dt == DType::Float32 ? 2e-6 * (K + 1) : tol_for(DType::BFloat16, K);
          if (dt == DType::Float32) {
            Tensor c = full({M, N}, 7.0);
            gemm(M, N, K, at.data<float>(), K, 1, bt.data<float>(), N, 1, c.data<float>(), N, 1, ep);
            ASSERT_TRUE(test::all_close(c, ref, at_, 1e-5)) << what;
          } else if (dt == DType::Float64) {
            const Tensor bias64 = bias.to(DType::Float64);
            GemmEpilogueT<double> ep64;
            ep64.bias = bias64.data<double>();
            ep64.relu = true;
            Tensor c = full({M, N}, 7.0, DType::Float64);
            gemm(M, N, K, at.data<double>(), K, 1, bt.data<double>(), N, 1, c.data<double>(), N, 1, ep64);
            ASSERT_TRUE(test::all_close(c, ref, 1e-12 * (K + 1), 1e-12)) << what;
          } else {
            for (DType cdt : {DType::Float32, DType::BFloat16}) {
              Tensor c = full({M, N}, 7.0, cdt);
              if (cdt == DType::Float32)
                gemm(M, N, K, at.data<BFloat16>(), K, 1, bt.data<BFloat16>(), N, 1, c.data<float>(), N, 1, ep);
              else
                gemm(M, N, K, at.data<BFloat16>(), K, 1, bt.data<BFloat16>(), N, 1, c.data<BFloat16>(), N, 1, ep);
              ASSERT_TRUE(test::all_close(c, ref, tol_for(cdt, K), rtol_for(cdt))) << what << ", C " << dtype_name(cdt);
            }
          }
        }
    }
  }
}

TEST(Gemm, HalfBMatchesReference) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t M = 1 + rng() % 30, N = 1 + rng() % 40, K = 1 + rng() % 300;
    const Tensor a = randn({M, K}, rng());
    const Tensor bh = randn({N, K}, rng()).to(DType::Float16);  // used as B = bh^T
    const std::vector<double> ref = ref_matmul(a, bh.t());
    for (const Modes& m : kModes) {
      ModeGuard g(m);
      for (int tr = 0; tr < 2; ++tr) {
        Tensor c = empty({M, N});
        test::poison(c);
        const Tensor b = tr ? bh.t() : bh.t().clone(MemoryFormat::Contiguous);
        gemm(M, N, K, a.data<float>(), K, 1, b.data<Half>(), b.stride(0), b.stride(1), c.data<float>(), N, 1);
        ASSERT_TRUE(test::all_close(c, ref, 2e-6 * (K + 1), 1e-5)) << "trial " << trial << " tr " << tr;
      }
    }
  }
}

// The bfloat16 GEMM with a float32 C (Linear's) and a bfloat16 C, every epilogue: alpha,
// beta (C read back), bias per column or row, unit or strided, relu; row- and
// column-major C (Note [Column-major C]); K across several KC blocks.
TEST(Gemm, Bfloat16EpilogueFloatAndBfloat16C) {
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t M = 1 + rng() % 40, N = 1 + rng() % 40;
    const int64_t K = trial % 4 == 3 ? 2 * detail::kc_block() + 1 + rng() % 300 : rng() % 300;
    const Tensor a = randn({M, K}, rng(), DType::BFloat16), b = randn({K, N}, rng(), DType::BFloat16);
    const Tensor c0 = randn({M, N}, rng()), bias = randn({std::max(M, N) * 2}, rng());
    const std::vector<double> ab = ref_matmul(a, b), vbias = bias.to_vector();
    GemmEpilogue ep;
    ep.alpha = 0.5f + trial % 3;
    ep.beta = trial % 2 ? 0.75f : 0.0f;
    ep.bias = trial % 4 < 2 ? bias.data<float>() : nullptr;
    ep.bias_stride = 1 + trial / 6;
    ep.bias_per_row = trial % 6 >= 3;
    ep.relu = trial % 3 == 0;
    for (DType cdt : {DType::Float32, DType::BFloat16}) {
      const Tensor cin = c0.to(cdt);  // C as that dtype holds it: beta reads it back
      const std::vector<double> vc = cin.to_vector();
      const std::vector<double> ref = ref_epilogue(ab, vc, vbias, ep, M, N);
      const double at = tol_for(cdt, K), rt = rtol_for(cdt);
      for (const Modes& m : kModes)
      for (int pm : pair_modes(DType::BFloat16)) {
        ModeGuard g(m);
        PairsGuard pg(pm);
        const std::string what = "trial " + std::to_string(trial) + ", C " + dtype_name(cdt) + ", " +
                                 simd_level_name(m.simd) + ", " + std::to_string(m.threads) + " threads, pairs " +
                                 std::to_string(pm);
        for (bool col_major : {false, true}) {
          Tensor c = col_major ? cin.t().contiguous() : cin.clone();  // col_major: [N, M], C(i, j) at i + j*M
          if (ep.beta == 0.0f) test::poison(c);  // beta == 0 must never read C
          const int64_t rs = col_major ? 1 : N, cs = col_major ? M : 1;
          if (cdt == DType::Float32)
            gemm(M, N, K, a.data<BFloat16>(), K, 1, b.data<BFloat16>(), N, 1, c.data<float>(), rs, cs, ep);
          else
            gemm(M, N, K, a.data<BFloat16>(), K, 1, b.data<BFloat16>(), N, 1, c.data<BFloat16>(), rs, cs, ep);
          ASSERT_TRUE(test::all_close(col_major ? c.t() : c, ref, at, rt)) << what << (col_major ? ", column-major C" : "");
        }
      }
    }
  }
}

TEST(Matmul, AllocatesOnlyResultPlusDocumentedWorkspace) {
  Allocator* al = cpu_allocator();
  for (int threads : {1, 2}) {
    const int prev = get_num_threads();
    set_num_threads(threads);
    const int64_t M = 300, K = 520, N = 200;
    const Tensor a = randn({M, K}, 1).t().clone(MemoryFormat::Contiguous).t(), b = randn({K, N}, 2);
    Tensor out = empty({M, N});
    const size_t ws = gemm_workspace_bytes(M, N, K);
    EXPECT_GT(ws, 0u);
    al->reset_peak_stats();
    const int64_t base = al->stats().allocated_bytes;
    matmul_out(out, a, b);
    const int64_t peak_out = al->stats().peak_allocated_bytes - base;
    EXPECT_LE(peak_out, static_cast<int64_t>(cpu_caching_round_size(ws)) + 64);
    EXPECT_GE(peak_out, static_cast<int64_t>(ws));
    al->reset_peak_stats();
    const int64_t base2 = al->stats().allocated_bytes;
    Tensor r = matmul(a, b);
    const int64_t peak_oop = al->stats().peak_allocated_bytes - base2;
    EXPECT_LE(peak_oop, static_cast<int64_t>(cpu_caching_round_size(ws) + cpu_caching_round_size(M * N * 4)) + 64);
    EXPECT_EQ(al->stats().allocated_bytes - base2, static_cast<int64_t>(cpu_caching_round_size(M * N * 4)));
    // Note [Narrow GEMMs]: a narrow shape takes the larger of its two paths' workspaces,
    // whichever path A's strides take (row-major: unpacked on the AVX512 level; a
    // transposed view: packed)
    {
      const int64_t Mn = 300, Nn = 64, Kn = 200;
      const Tensor an = randn({Mn, Kn}, 5), an_t = randn({Kn, Mn}, 6).t(), bn = randn({Kn, Nn}, 7);
      const size_t wsn = gemm_workspace_bytes(Mn, Nn, Kn);
      for (const Tensor& x : {an, an_t}) {
        Tensor outn = empty({Mn, Nn});
        al->reset_peak_stats();
        const int64_t b0 = al->stats().allocated_bytes;
        matmul_out(outn, x, bn);
        const int64_t pk = al->stats().peak_allocated_bytes - b0;
        EXPECT_LE(pk, static_cast<int64_t>(cpu_caching_round_size(wsn)) + 64) << "narrow, a_cs " << x.stride(1);
        EXPECT_GE(pk, static_cast<int64_t>(wsn)) << "narrow, a_cs " << x.stride(1);
      }
    }
    // bfloat16, both packings: a K over one KC block (of the pairs' twice as deep one too),
    // so the partial sums' buffer is in the workspace
    const int64_t K16 = 2 * detail::kc_block() + 8;
    const Tensor a16 = randn({M, K16}, 3, DType::BFloat16), b16 = randn({K16, N}, 4, DType::BFloat16);
    for (int pm : {1, 0}) {
      PairsGuard pg(pm);
      Tensor out16 = empty({M, N}, DType::BFloat16);
      const size_t ws16 = gemm_workspace_bytes(M, N, K16, DType::BFloat16);
      EXPECT_GE(ws16, static_cast<size_t>(M * N * 4 / threads)) << "the float32 partial sums of a bfloat16 C";
      al->reset_peak_stats();
      const int64_t base3 = al->stats().allocated_bytes;
      matmul_out(out16, a16, b16);
      const int64_t peak16 = al->stats().peak_allocated_bytes - base3;
      EXPECT_LE(peak16, static_cast<int64_t>(cpu_caching_round_size(ws16)) + 64) << "pairs " << pm;
      EXPECT_GE(peak16, static_cast<int64_t>(ws16)) << "pairs " << pm;
    }
    set_num_threads(prev);
  }
}

TEST(Matmul, BadInputs) {
  const Tensor a = randn({3, 4}, 1), b = randn({5, 6}, 2);
  auto expect_msg = [](auto f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no throw, expected: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { matmul(a, b); }, "inner dimensions differ");
  expect_msg([&] { matmul(full({}, 2.0), b); }, "at least 1-D");  // PyTorch refuses 0-D operands too
  expect_msg([&] { matmul(a, full({}, 2.0)); }, "at least 1-D");
  expect_msg([&] { matmul(randn({3}, 1), b); }, "inner dimensions differ");
  expect_msg([&] { matmul(randn({2, 3, 4, 5}, 1), randn({2, 5, 2}, 1)); }, "batch sizes do not broadcast");
  expect_msg([&] { matmul(a, randn({4, 2}, 1, DType::Float64)); }, "dtype mismatch");
  expect_msg([&] { matmul(a.to(DType::Int32), randn({4, 2}, 1).to(DType::Int32)); }, "int32");
  expect_msg([&] { matmul(randn({2, 3, 4}, 1), randn({3, 4, 2}, 1)); }, "batch sizes do not broadcast");
  Tensor out = empty({3, 7});
  test::poison(out);
  const std::vector<double> before = out.to_vector();
  expect_msg([&] { matmul_out(out, a, randn({4, 6}, 3)); }, "[3, 6]");
  Tensor big = empty({4, 4});
  Tensor alias = big.narrow(1, 0, 2);
  expect_msg([&] { matmul_out(alias, big.narrow(0, 0, 4), randn({4, 2}, 1)); }, "overlaps");
  Tensor exp_out = empty({1, 2}).expand({3, 2});
  expect_msg([&] { matmul_out(exp_out, randn({3, 4}, 1), randn({4, 2}, 1)); }, "overlapping");
  Tensor wrong_dt = empty({3, 2}, DType::Float64);
  expect_msg([&] { matmul_out(wrong_dt, randn({3, 4}, 1), randn({4, 2}, 1)); }, "out dtype");
  EXPECT_TRUE(test::all_close(out, before, 0, 0));  // untouched (NaN == NaN in all_close?)
}


TEST(Matmul, DeviceMismatch) {
  const Tensor a = randn({3, 4}, 1), g = test::fake_cuda({4, 2});
  try {
    matmul(a, g);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device mismatch"), std::string::npos) << e.what();
  }
  Tensor out = test::fake_cuda({3, 2});
  EXPECT_THROW(matmul_out(out, a, randn({4, 2}, 2)), Error);
}

// ---------------------------------------------------------------- on every device
// (Note [Device-parameterized tests] in test_util.h)

class MatmulOnDevice : public ::testing::TestWithParam<Device> {};

std::vector<double> ref_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t B, int64_t Ba,
                               int64_t Bb, int64_t M, int64_t K, int64_t N) {
  std::vector<double> c(static_cast<size_t>(B * M * N), 0.0);
  for (int64_t z = 0; z < B; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a[((Ba == 1 ? 0 : z) * M + i) * K + k] * b[((Bb == 1 ? 0 : z) * K + k) * N + j];
        c[(z * M + i) * N + j] = s;
      }
  return c;
}

enum class MatLayout { RowMajor, Transposed, RowStrided, Stepped };

Tensor matrix_on(Device dev, const std::vector<double>& v, const Shape& s, DType dt, MatLayout ml) {
  const Tensor g = test::host_tensor(v, s, dt).to(dev);
  switch (ml) {
    case MatLayout::RowMajor: return g;
    case MatLayout::Transposed: return test::with_layout(g, Layout::Transposed);
    case MatLayout::RowStrided: {  // a narrow() of a wider buffer: row stride > cols
      cases::Placement p = cases::dense(s);
      p.start.back() = 2;
      p.pad.back() = 3;
      const cases::Placed placed = cases::place(s, p, dt, dev);
      test::poison(placed.buffer);
      Tensor view = placed.view;
      view.copy_(g);
      return view;
    }
    case MatLayout::Stepped: return test::with_layout(g, Layout::Sliced);
  }
  return g;
}

TEST_P(MatmulOnDevice, LayoutsDtypesBatches) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  struct Case { int64_t B, Ba, Bb, M, K, N; };
  const Case cases[] = {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 17, 33, 9}, {1, 1, 1, 64, 64, 64}, {3, 3, 3, 5, 7, 11},
                        {4, 1, 4, 8, 3, 6}, {2, 2, 1, 31, 16, 2}, {1, 1, 1, 4, 0, 3}};
  const MatLayout mls[] = {MatLayout::RowMajor, MatLayout::Transposed, MatLayout::RowStrided, MatLayout::Stepped};
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    if (dt == DType::Float16 && dev.is_cpu()) {  // float16 on CUDA only, as in PyTorch 1.13
      Tensor out = full({2, 2}, 7.0, dt);
      test::expect_msg([&] { matmul_out(out, zeros({2, 3}, dt), zeros({3, 2}, dt)); },
                       "matmul_out: expected float32, float64 or bfloat16 (or float16 on CUDA), got float16 on cpu");
      EXPECT_TRUE(all_close(out, std::vector<double>(4, 7.0), 0, 0)) << "out untouched";
      continue;
    }
    for (const Case& c : cases) {
      const bool batched = c.B > 1 || c.Ba > 1;
      for (MatLayout la : mls) {
        for (MatLayout lb : mls) {
          const Shape sa = batched ? Shape{c.Ba, c.M, c.K} : Shape{c.M, c.K};
          const Shape sb = batched ? Shape{c.Bb, c.K, c.N} : Shape{c.K, c.N};
          const Shape so = batched ? Shape{c.B, c.M, c.N} : Shape{c.M, c.N};
          const auto va = test::stored(test::random_values(sa, 1, dt, -1, 1, false), sa, dt);
          const auto vb = test::stored(test::random_values(sb, 2, dt, -1, 1, false), sb, dt);
          Tensor a = matrix_on(dev, va, sa, dt, la), b = matrix_on(dev, vb, sb, dt, lb);
          if (batched && c.Ba == 1) a = a.expand({c.B, c.M, c.K});
          if (batched && c.Bb == 1) b = b.expand({c.B, c.K, c.N});
          Tensor out = test::poisoned_on(dev, so, dt, Layout::Contiguous);
#ifdef SB_WITH_CUDA
          if (dev.is_cuda()) cuda::reset_matmul_operand_copies();
#endif
          matmul_out(out, a, b);
          // a stepped view is neither row- nor column-major unless one of its dims is 1
          const int64_t copies = (la == MatLayout::Stepped && c.M > 1 && c.K > 1) +
                                 (lb == MatLayout::Stepped && c.K > 1 && c.N > 1);
#ifdef SB_WITH_CUDA
          if (dev.is_cuda()) {
            EXPECT_EQ(cuda::matmul_operand_copies(), copies) << "layouts " << int(la) << "/" << int(lb);
          }
#endif
          (void)copies;
          const double tol = dt == DType::Float16 ? 1e-2 : dt == DType::BFloat16 ? 2e-2 : (dt == DType::Float32 ? 1e-5 : 1e-12);
          EXPECT_TRUE(all_close(out, ref_matmul(va, vb, c.B, c.Ba, c.Bb, c.M, c.K, c.N), tol, tol))
              << dt << " B" << c.B << " M" << c.M << " K" << c.K << " N" << c.N << " layouts " << int(la) << "/"
              << int(lb);
        }
      }
      // A column-major out.
      const Shape sa = {c.M, c.K}, sb = {c.K, c.N};
      const auto va = test::stored(test::random_values(sa, 3, dt, -1, 1, false), sa, dt);
      const auto vb = test::stored(test::random_values(sb, 4, dt, -1, 1, false), sb, dt);
      Tensor out = empty({c.N, c.M}, dt, dev).t();
      test::poison(out);
      matmul_out(out, matrix_on(dev, va, sa, dt, MatLayout::RowMajor), matrix_on(dev, vb, sb, dt, MatLayout::Transposed));
      const double tol = dt == DType::Float16 ? 1e-2 : dt == DType::BFloat16 ? 2e-2 : (dt == DType::Float32 ? 1e-5 : 1e-12);
      EXPECT_TRUE(all_close(out, ref_matmul(va, vb, 1, 1, 1, c.M, c.K, c.N), tol, tol)) << "column-major out " << dt;
    }
  }
}

// Issue #45, defects 1-3 (found on CUDA, where they failed): matmul_out takes any out
// whose elements do not overlap, as matmul.h promises and PyTorch computes: batches
// interleaved with each other (a permuted [M, N, B] or [M, B, N] buffer), a stepped
// out, a column-major one; and empty batched products, with a broadcast batch dim, give
// empty results (K = 0: zeros) instead of an internal error. Every device.
TEST_P(MatmulOnDevice, OutsOfEveryNonOverlappingLayoutAndEmptyProducts) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    const double tol = dt == DType::BFloat16 ? 2e-2 : (dt == DType::Float32 ? 1e-5 : 1e-12);
    const int64_t B = 3, M = 4, K = 6, N = 5;
    const auto va = test::stored(test::random_values({B, M, K}, 7, dt, -1, 1, false), {B, M, K}, dt);
    const auto vb = test::stored(test::random_values({1, K, N}, 8, dt, -1, 1, false), {1, K, N}, dt);
    const Tensor a = matrix_on(dev, va, {B, M, K}, dt, MatLayout::RowMajor);
    const Tensor b = matrix_on(dev, vb, {1, K, N}, dt, MatLayout::RowMajor).expand({B, K, N});
    const std::vector<double> ref = ref_matmul(va, vb, B, B, 1, M, K, N);
    struct Out {
      const char* what;
      Tensor t;
    };
    const Out outs[] = {
        {"batches innermost ([M, N, B] permuted: strides [1, N B, B])", empty({M, N, B}, dt, dev).permute({2, 0, 1})},
        {"batches between the rows ([M, B, N] permuted: strides [N, B N, 1])", empty({M, B, N}, dt, dev).permute({1, 0, 2})},
        {"stepped columns", test::poisoned_on(dev, {B, M, N}, dt, Layout::Sliced)},
        {"column-major batches", empty({B, N, M}, dt, dev).transpose(1, 2)},
    };
    for (const Out& o : outs) {
      Tensor out = o.t;
      test::poison(out);
      matmul_out(out, a, b);
      EXPECT_TRUE(all_close(out, ref, tol, tol)) << dt << ", out " << o.what << ", strides " << ::testing::PrintToString(out.strides());
    }
    // empty products: no rows, no batches, and K = 0 (every element a sum of nothing)
    struct Empty {
      Shape sa, sb, so;
    };
    for (const Empty& e : {Empty{{3, 0, 5}, {1, 5, 4}, {3, 0, 4}}, Empty{{0, 2, 5}, {1, 5, 4}, {0, 2, 4}},
                           Empty{{1, 2, 5}, {3, 5, 0}, {3, 2, 0}}, Empty{{2, 3, 0}, {1, 0, 4}, {2, 3, 4}}}) {
      const Tensor ea = zeros(e.sa, dt, dev), eb = zeros(e.sb, dt, dev);
      const Tensor r = matmul(ea, eb);
      EXPECT_EQ(r.sizes(), e.so) << dt << " " << ::testing::PrintToString(e.sa) << " x " << ::testing::PrintToString(e.sb);
      EXPECT_TRUE(all_close(r, std::vector<double>(static_cast<size_t>(r.numel()), 0.0), 0, 0));
      Tensor out = test::poisoned_on(dev, e.so, dt, Layout::Contiguous);
      matmul_out(out, ea, eb);
      EXPECT_TRUE(all_close(out, std::vector<double>(static_cast<size_t>(out.numel()), 0.0), 0, 0))
          << dt << " out= " << ::testing::PrintToString(e.so);
    }
  }
}

// The family's case table (Note [Case tables], cases/matmul.h): every layout and style
// the benchmarks time, with their operands and calls, on small odd shapes (empty ones
// included), every dtype each device takes (tf32 on CUDA), outs poisoned. Each element
// is held to a bound of its own: the float64 sum of |a_ik b_kj| times the rounding of
// the dtype's inputs, its float32 (or float64) accumulation over K, and its output.
TEST_P(MatmulOnDevice, EveryCaseOfTheTable) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  struct Type {
    DType dt;
    bool tf32;
  };
  std::vector<Type> types = {{DType::Float32, false}, {DType::Float64, false}, {DType::BFloat16, false}};
  if (dev.is_cuda()) types.insert(types.end(), {{DType::Float32, true}, {DType::Float16, false}});
  const Shape mkn[] = {{5, 7, 3}, {17, 33, 9}, {1, 64, 1}, {8, 1, 6}, {0, 3, 4}, {4, 0, 5}, {3, 5, 0}};
  uint64_t seed = 1;
  for (const cases::MmCase& c : cases::matmul_cases()) {
    for (const Type& ty : types) {
      for (const Shape& s : mkn) {
        const int64_t M = s[0], K = s[1], N = s[2];
        const std::string what = std::string(layout_name(c.layout)) + " " + cases::style_name(c.style) + " " +
                                 dtype_name(ty.dt) + (ty.tf32 ? " (tf32)" : "") + " " + test::shape_str(s);
        cases::MmOperands t = cases::mm_operands(c, M, K, N, [&](const cases::Placement& p, const Shape& sz, char) {
          return test::with_placement(test::host_tensor(test::random_values(sz, seed++, ty.dt, -1, 1), sz, ty.dt).to(dev), p);
        });
        if (t.out.defined()) test::poison(t.out);
        const std::vector<double> va = test::naive_values(t.a), vb = test::naive_values(t.b);
        std::vector<double> ref(static_cast<size_t>(M * N)), bound(ref.size());
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double r = 0, m = 0;
            for (int64_t k = 0; k < K; ++k) r += va[i * K + k] * vb[k * N + j], m += std::fabs(va[i * K + k] * vb[k * N + j]);
            ref[i * N + j] = r;
            bound[i * N + j] = m;
          }
        // relative error of the inputs' rounding, the accumulation and the output's rounding
        const double acc = (ty.dt == DType::Float64 ? 0x1p-52 : 0x1p-24) * static_cast<double>(K + 2);
        const double in = ty.tf32 ? 0x1p-10 : 0.0;
        const double outr = ty.dt == DType::BFloat16 ? 0x1p-8 : ty.dt == DType::Float16 ? 0x1p-11 : 0.0;
        // below the dtype's smallest normal the output's rounding is absolute: half its
        // subnormal step (float16: a product of two inputs near 2^-9 lands there)
        const double sub = ty.dt == DType::Float16 ? 0x1p-25 : ty.dt == DType::BFloat16 ? 0x1p-134 : 0.0;
        std::vector<double> atol(bound.size());
        for (size_t i = 0; i < atol.size(); ++i) atol[i] = 2 * (acc + in + outr) * bound[i] + sub;
        Tensor y;
        {
          const test::Tf32Scope tf32(dev, ty.tf32);
          const test::SystemAllocatorScope system(dev, c.style == Style::OutofplaceSystem);
          y = cases::mm_call(c, t);
        }
        ASSERT_EQ(y.sizes(), Shape({M, N})) << what;
        EXPECT_EQ(y.device(), dev) << what;
        EXPECT_TRUE(all_close(y, ref, atol, 0)) << what;
      }
    }
  }
}

TEST_P(MatmulOnDevice, BadInputs) {
  const Device dev = GetParam();
  SB_SKIP_WITHOUT_DEVICE(dev);
  auto mm = [](Tensor out, const Tensor& a, const Tensor& b) { matmul_out(out, a, b); };
  Tensor a = zeros({3, 4}, DType::Float32, dev), b = zeros({5, 6}, DType::Float32, dev);
  Tensor out = zeros({3, 6}, DType::Float32, dev);
  try {
    matmul_out(out, a, b);
    FAIL() << "expected sb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inner dimensions differ: [3, 4] x [5, 6] (4 vs 5)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mm(zeros({3, 6}, DType::Float64, dev), a, zeros({4, 6}, DType::Float32, dev)), Error);
  EXPECT_THROW(mm(zeros({3, 6}, DType::Float32, dev), a, zeros({4, 6}, DType::Float16, dev)), Error);
  EXPECT_THROW(mm(zeros({3, 6}, DType::Int32, dev), a.to(DType::Int32), zeros({4, 6}, DType::Int32, dev)),
               Error);
  EXPECT_THROW(mm(zeros({1, 6}, DType::Float32, dev).expand({3, 6}), a, zeros({4, 6}, DType::Float32, dev)),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, MatmulOnDevice, ::testing::ValuesIn(test::test_devices()), test::device_param_name);

#ifdef SB_WITH_CUDA
// ---------------------------------------------------------------- the CUDA backend's own paths

TEST(CudaMatmul, Tf32AndInt8Linear) {
  const Device dev = Device::cuda(0);
  SB_SKIP_WITHOUT_DEVICE(dev);
  const int64_t M = 64, K = 128, N = 48;
  const auto va = test::stored(test::random_values({M, K}, 1, DType::Float32, -1, 1, false), {M, K}, DType::Float32);
  const auto vw = test::stored(test::random_values({N, K}, 2, DType::Float32, -1, 1, false), {N, K}, DType::Float32);
  std::vector<double> vwt(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) vwt[k * N + n] = vw[n * K + k];
  const auto ref = ref_matmul(va, vwt, 1, 1, 1, M, K, N);
  cuda::set_allow_tf32(true);
  Tensor out = test::poisoned_on(dev, {M, N}, DType::Float32, Layout::Contiguous);
  cuda::linear(out, test::host_tensor(va, {M, K}, DType::Float32).to(dev), test::host_tensor(vw, {N, K}, DType::Float32).to(dev));
  cuda::set_allow_tf32(false);
  EXPECT_TRUE(all_close(out, ref, 2e-2, 2e-2));  // TF32: 10-bit mantissa inputs
  // int8: exact int32 accumulation.
  const auto ia = test::random_values({M, K}, 5, DType::Int8, -127, 128, false);
  const auto iw = test::random_values({N, K}, 6, DType::Int8, -127, 128, false);
  std::vector<double> iwt(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) iwt[k * N + n] = iw[n * K + k];
  Tensor iout = test::poisoned_on(dev, {M, N}, DType::Int32, Layout::Contiguous);
  cuda::linear(iout, test::host_tensor(ia, {M, K}, DType::Int8).to(dev), test::host_tensor(iw, {N, K}, DType::Int8).to(dev));
  EXPECT_TRUE(all_close(iout, ref_matmul(ia, iwt, 1, 1, 1, M, K, N), 0, 0));
}

TEST(CudaMatmul, BackendRejectsHostTensorsBeforeAnyWork) {
  Tensor a = zeros({2, 3}), out = full({2, 2}, 7.0);
  test::expect_msg([&] { cuda::matmul(out, a, zeros({3, 2})); }, "expected CUDA tensors, got one on cpu");
  EXPECT_EQ(out.to_vector(), std::vector<double>(4, 7.0));
}
#endif  // SB_WITH_CUDA

}  // namespace
}  // namespace sb
