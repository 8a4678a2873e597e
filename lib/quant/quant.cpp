// quant.cpp — Linear / Mlp in f32, f16 (weights), bf16, int8 dynamic and int8 static, and the
// int8 GEMM core (see quant.h for the scheme and Note [7-bit activations]).
//
// int8 kernel: 4x16 int32 tile; per group of 4 k: 2 loads of 64 packed weight bytes,
// 4 broadcasts of 4 activation bytes, 8 x (vpmaddubsw, vpmaddwd by ones, vpaddd):
// 256 multiply-adds in 24 integer ops (float32's 6x16 kernel: 256 MACs in 32 FMAs).
// The packed weights of one 16-channel panel (16 * in' bytes) stay in L1 while every
// 4-row activation panel streams past them; threads split the weight panels.
#include "stridebench/quant.h"

#ifdef SB_HAVE_AVX2
#include <immintrin.h>
#endif

#include <cmath>
#include <mutex>

#include "stridebench/cpu_features.h"
#include "matmul/gemm_impl.h"
#include "stridebench/matmul.h"
#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {
namespace {

constexpr int kQMR = 4, kQNR = 16;

// Quantizes (scale_inv, zp) and packs rows of x into 4-row panels, 4 k per 32-bit
// group: dst[(panel * Kp/4 + k4) * 16 + r * 4 + (k & 3)]. Rows past M and k past K are 0.
template <typename Src, typename F>
void pack_act(uint8_t* dst, int64_t M, int64_t K, int64_t Kp, const F& value) {
  const int64_t panels = (M + kQMR - 1) / kQMR;
  parallel_for(0, panels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, Kp * kQMR)), [&](int64_t b, int64_t e) {
    for (int64_t pnl = b; pnl < e; ++pnl) {
      uint8_t* d = dst + pnl * Kp * kQMR;
      std::memset(d, 0, static_cast<size_t>(Kp * kQMR));
      for (int r = 0; r < kQMR; ++r) {
        const int64_t m = pnl * kQMR + r;
        if (m >= M) break;
        for (int64_t k = 0; k < K; ++k) d[(k >> 2) * 16 + r * 4 + (k & 3)] = value(m, k);
      }
    }
  });
}

// acc tile [4][16] for activation panel ap and weight panel bp, Kp/4 groups.
void qkernel_scalar(int64_t kg, const uint8_t* ap, const int8_t* bp, int32_t* tile) {
  int32_t acc[kQMR][kQNR] = {};
  for (int64_t g = 0; g < kg; ++g, ap += 16, bp += 64)
    for (int r = 0; r < kQMR; ++r)
      for (int q = 0; q < kQNR; ++q)
        for (int t = 0; t < 4; ++t) acc[r][q] += static_cast<int32_t>(ap[r * 4 + t]) * bp[q * 4 + t];
  std::memcpy(tile, acc, sizeof(acc));
}

#ifdef SB_HAVE_AVX2
void qkernel_avx2(int64_t kg, const uint8_t* ap, const int8_t* bp, int32_t* tile) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  for (int64_t g = 0; g < kg; ++g, ap += 16, bp += 64) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32));
    int32_t a32[4];
    std::memcpy(a32, ap, 16);
#define SB_QSTEP(r, x0, x1)                                                                   \
  {                                                                                           \
    const __m256i a = _mm256_set1_epi32(a32[r]);                                              \
    x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones));          \
    x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones));          \
  }
    SB_QSTEP(0, c00, c01)
    SB_QSTEP(1, c10, c11)
    SB_QSTEP(2, c20, c21)
    SB_QSTEP(3, c30, c31)
#undef SB_QSTEP
  }
  __m256i* t = reinterpret_cast<__m256i*>(tile);
  _mm256_storeu_si256(t + 0, c00); _mm256_storeu_si256(t + 1, c01);
  _mm256_storeu_si256(t + 2, c10); _mm256_storeu_si256(t + 3, c11);
  _mm256_storeu_si256(t + 4, c20); _mm256_storeu_si256(t + 5, c21);
  _mm256_storeu_si256(t + 6, c30); _mm256_storeu_si256(t + 7, c31);
}
#endif

#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
// AVX-512 VNNI: NP activation panels (4*NP rows) x one 16-channel weight panel, one zmm
// accumulator (16 int32) per row; per group of 4 k: 1 zmm load of weights, 4*NP
// broadcasts of 4 activation bytes, 4*NP vpdpbusd (u8 x s8, 4 products summed into
// int32 without saturation). NP = 4: 1024 multiply-adds in 16 instructions. tile:
// NP stacked 4x16 tiles (row-major, ld 16).
template <int NP>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void qkernel_vnni(int64_t kg, const uint8_t* ap, int64_t a_panel,
                                                                         const int8_t* bp, int32_t* tile) {
  constexpr int R = NP * kQMR;
  __m512i c[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) c[r] = _mm512_setzero_si512();
  for (int64_t g = 0; g < kg; ++g, ap += 16, bp += 64) {
    const __m512i b = _mm512_loadu_si512(bp);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      int32_t a4;
      std::memcpy(&a4, ap + (r / kQMR) * a_panel + (r % kQMR) * 4, 4);
      c[r] = _mm512_dpbusd_epi32(c[r], _mm512_set1_epi32(a4), b);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_storeu_si512(tile + r * kQNR, c[r]);
}
#endif

// Runs the int8 GEMM over packed activations; store(tile, m0, mr, n0, nr) consumes
// each 4x16 int32 tile (row-major, ld 16).
template <typename Store>
void int8_gemm_packed(int64_t M, const uint8_t* apacked, const QuantizedWeight& qw, const Store& store) {
  const int64_t kg = qw.in_padded / 4;
  const int64_t npanels = (qw.out + kQNR - 1) / kQNR, mpanels = (M + kQMR - 1) / kQMR;
  const int8_t* wp = qw.packed.data<int8_t>();
  const bool avx2 = use_avx2(), vnni = use_avx512();
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, M * qw.in_padded));
  parallel_for(0, npanels, grain, [&](int64_t b, int64_t e) {
    alignas(64) int32_t tile[4 * kQMR * kQNR];
    constexpr int64_t kMBlock = 64;  // activation panels per pass: 256 rows x in' bytes in L2
    for (int64_t mb = 0; mb < mpanels; mb += kMBlock) {
      for (int64_t jp = b; jp < e; ++jp) {
        const int8_t* bp = wp + jp * kQNR * qw.in_padded;
        const int64_t mend = std::min(mpanels, mb + kMBlock);
#if defined(SB_HAVE_AVX2) && defined(SB_HAVE_AVX512)
        if (vnni) {
          const int64_t a_panel = kQMR * qw.in_padded;
          for (int64_t ip = mb; ip < mend; ip += 4) {
            const int np = static_cast<int>(std::min<int64_t>(4, mend - ip));
            const uint8_t* ap = apacked + ip * a_panel;
            switch (np) {
              case 4: qkernel_vnni<4>(kg, ap, a_panel, bp, tile); break;
              case 3: qkernel_vnni<3>(kg, ap, a_panel, bp, tile); break;
              case 2: qkernel_vnni<2>(kg, ap, a_panel, bp, tile); break;
              default: qkernel_vnni<1>(kg, ap, a_panel, bp, tile); break;
            }
            for (int q = 0; q < np; ++q)
              store(tile + q * kQMR * kQNR, (ip + q) * kQMR, static_cast<int>(std::min<int64_t>(kQMR, M - (ip + q) * kQMR)),
                    jp * kQNR, static_cast<int>(std::min<int64_t>(kQNR, qw.out - jp * kQNR)));
          }
          continue;
        }
#endif
        (void)vnni;
        for (int64_t ip = mb; ip < mend; ++ip) {
          const uint8_t* ap = apacked + ip * kQMR * qw.in_padded;
#ifdef SB_HAVE_AVX2
          if (avx2) qkernel_avx2(kg, ap, bp, tile);
          else
#endif
            qkernel_scalar(kg, ap, bp, tile);
          (void)avx2;
          store(tile, ip * kQMR, static_cast<int>(std::min<int64_t>(kQMR, M - ip * kQMR)), jp * kQNR,
                static_cast<int>(std::min<int64_t>(kQNR, qw.out - jp * kQNR)));
        }
      }
    }
  });
}

// A 2-D tensor on `device`, float32 when f32 (Linear::forward checks its dtypes itself).
void check_2d_on(const Tensor& t, const char* op, const char* what, Device device, bool f32 = false) {
  SB_CHECK(t.defined() && t.dim() == 2, op, ": expected a 2-D ", what, ", got sizes ", t.defined() ? t.sizes() : Shape{});
  SB_CHECK(!f32 || t.dtype() == DType::Float32, op, ": expected a float32 ", what, ", got ", t.dtype());
  SB_CHECK(t.device() == device, op, ": expected the ", what, " on ", device, " (",
           device.is_cpu() ? "the CPU path" : "the weights' device", "), got one on ", t.device());
}

// A 2-D float32 tensor on `device` (the CPU unless said otherwise).
void check_2d_f32(const Tensor& t, const char* op, const char* what, Device device = Device::cpu()) {
  check_2d_on(t, op, what, device, true);
}

// min and max over x (0 included, NaN ignored, as std::min/std::max with v first):
// rows split across threads, AVX2 min/max along unit-stride rows.
void tensor_range(const Tensor& x, float& lo, float& hi) {
  const float* p = x.data<float>();
  const int64_t rows = x.size(0), cols = x.size(1), rs = x.stride(0), cs = x.stride(1);
  std::mutex mu;
  float mn = 0.0f, mx = 0.0f;
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, cols)), [&](int64_t b, int64_t e) {
    float tmn = 0.0f, tmx = 0.0f;
    for (int64_t m = b; m < e; ++m) {
      const float* row = p + m * rs;
      int64_t k = 0;
#ifdef SB_HAVE_AVX2
      if (cs == 1 && use_avx2() && cols >= 8) {
        __m256 vmn = _mm256_setzero_ps(), vmx = vmn;
        for (; k + 8 <= cols; k += 8) {
          const __m256 v = _mm256_loadu_ps(row + k);
          vmn = _mm256_min_ps(v, vmn);  // NaN in v: keeps vmn
          vmx = _mm256_max_ps(v, vmx);
        }
        alignas(32) float a[8], c[8];
        _mm256_store_ps(a, vmn);
        _mm256_store_ps(c, vmx);
        for (int i = 0; i < 8; ++i) { tmn = std::min(tmn, a[i]); tmx = std::max(tmx, c[i]); }
      }
#endif
      for (; k < cols; ++k) {
        const float v = row[k * cs];
        tmn = std::min(tmn, v);
        tmx = std::max(tmx, v);
      }
    }
    std::lock_guard<std::mutex> g(mu);
    mn = std::min(mn, tmn);
    mx = std::max(mx, tmx);
  });
  lo = mn;
  hi = mx;
}

inline uint8_t quant1(float v, float inv, int32_t zp) {
  const float q = std::nearbyint(v * inv) + static_cast<float>(zp);
  return static_cast<uint8_t>(std::min(127.0f, std::max(0.0f, q)));
}

// Quantizes rows of float x (element (m, k) at x[m*rs + k*cs]) with quant1 and packs
// them as pack_act does. Unit-stride rows take the AVX2 path: per 4-row panel and 8 k,
// four cvtps (round to nearest even, as nearbyint) and two packs give the two 16-byte
// groups (k..k+3, k+4..k+7) of the panel in one 32-byte store; clamping happens in
// float (to +-256, NaN to the low side) and in int32 (to 0..127), so every value equals
// quant1's. Tails (k % 8, rows past M) are scalar.
void quantize_pack_act(uint8_t* dst, const float* x, int64_t rs, int64_t cs, int64_t M, int64_t K, int64_t Kp, float inv,
                       int32_t zp) {
  const int64_t panels = (M + kQMR - 1) / kQMR;
  parallel_for(0, panels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, Kp * kQMR)), [&](int64_t b, int64_t e) {
    for (int64_t pnl = b; pnl < e; ++pnl) {
      uint8_t* d = dst + pnl * Kp * kQMR;
      const int64_t m0 = pnl * kQMR;
      const int rows = static_cast<int>(std::min<int64_t>(kQMR, M - m0));
      int64_t k = 0;
#ifdef SB_HAVE_AVX2
      if (cs == 1 && rows == kQMR && use_avx2()) {
        const __m256 vinv = _mm256_set1_ps(inv), flo = _mm256_set1_ps(-256.0f), fhi = _mm256_set1_ps(256.0f);
        const __m256i vzp = _mm256_set1_epi32(zp), ilo = _mm256_setzero_si256(), ihi = _mm256_set1_epi32(127);
        auto q8 = [&](const float* p) {
          __m256 v = _mm256_mul_ps(_mm256_loadu_ps(p), vinv);
          v = _mm256_min_ps(_mm256_max_ps(v, flo), fhi);  // NaN -> -256 (quant1 maps NaN to 0)
          const __m256i i = _mm256_add_epi32(_mm256_cvtps_epi32(v), vzp);
          return _mm256_min_epi32(_mm256_max_epi32(i, ilo), ihi);
        };
        const float* r0 = x + m0 * rs;
        for (; k + 8 <= K; k += 8) {
          const __m256i a0 = q8(r0 + k), a1 = q8(r0 + rs + k), a2 = q8(r0 + 2 * rs + k), a3 = q8(r0 + 3 * rs + k);
          const __m256i v = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + (k >> 2) * 16), v);
        }
      }
#endif
      const int64_t kdone = k;
      std::memset(d + (kdone >> 2) * 16, 0, static_cast<size_t>((Kp - kdone) * kQMR));
      for (int r = 0; r < rows; ++r) {
        const float* row = x + (m0 + r) * rs;
        for (int64_t kk = kdone; kk < K; ++kk) d[(kk >> 2) * 16 + r * 4 + (kk & 3)] = quant1(row[kk * cs], inv, zp);
      }
    }
  });
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::F32: return "f32";
    case Precision::F16: return "f16";
    case Precision::Int8Dynamic: return "int8_dynamic";
    case Precision::Int8Static: return "int8_static";
    case Precision::BF16: return "bf16";
  }
  return "?";
}

ActQParams act_qparams(float min, float max) {
  min = std::min(min, 0.0f);
  max = std::max(max, 0.0f);
  ActQParams q;
  q.scale = max > min ? (max - min) / 127.0f : 1.0f;
  q.zero_point = static_cast<int32_t>(std::min(127.0f, std::max(0.0f, std::nearbyint(-min / q.scale))));
  return q;
}

Tensor quantize_activations(const Tensor& x, const ActQParams& q) {
  check_2d_f32(x, "quantize_activations", "input");
  Tensor out = empty(x.sizes(), DType::Int8);
  const float* p = x.data<float>();
  int8_t* o = out.data<int8_t>();
  const float inv = 1.0f / q.scale;
  for (int64_t m = 0; m < x.size(0); ++m)
    for (int64_t k = 0; k < x.size(1); ++k)
      o[m * x.size(1) + k] = static_cast<int8_t>(quant1(p[m * x.stride(0) + k * x.stride(1)], inv, q.zero_point));
  return out;
}

QuantizedWeight quantize_weight(const Tensor& w) {
  check_2d_f32(w, "quantize_weight", "weight");
  QuantizedWeight qw;
  qw.out = w.size(0);
  qw.in = w.size(1);
  qw.in_padded = detail::round_up(std::max<int64_t>(qw.in, 1), 4);
  const int64_t np = (qw.out + kQNR - 1) / kQNR;
  qw.packed = zeros({np * kQNR * qw.in_padded}, DType::Int8);
  qw.scale = empty({qw.out}, DType::Float32);
  qw.row_sum = empty({qw.out}, DType::Int32);
  const float* p = w.data<float>();
  int8_t* dst = qw.packed.data<int8_t>();
  for (int64_t n = 0; n < qw.out; ++n) {
    const float* row = p + n * w.stride(0);
    float amax = 0.0f;
    for (int64_t k = 0; k < qw.in; ++k) amax = std::max(amax, std::fabs(row[k * w.stride(1)]));
    const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
    qw.scale.data<float>()[n] = s;
    int32_t sum = 0;
    int8_t* panel = dst + (n / kQNR) * kQNR * qw.in_padded;
    const int64_t q = n % kQNR;
    for (int64_t k = 0; k < qw.in; ++k) {
      const float v = std::min(127.0f, std::max(-127.0f, std::nearbyint(row[k * w.stride(1)] / s)));
      const int8_t iv = static_cast<int8_t>(v);
      panel[(k >> 2) * 64 + q * 4 + (k & 3)] = iv;
      sum += iv;
    }
    qw.row_sum.data<int32_t>()[n] = sum;
  }
  return qw;
}

Tensor unpack_weight(const QuantizedWeight& qw) {
  Tensor out = empty({qw.out, qw.in}, DType::Int8);
  const int8_t* src = qw.packed.data<int8_t>();
  for (int64_t n = 0; n < qw.out; ++n)
    for (int64_t k = 0; k < qw.in; ++k)
      out.data<int8_t>()[n * qw.in + k] = src[(n / kQNR) * kQNR * qw.in_padded + (k >> 2) * 64 + (n % kQNR) * 4 + (k & 3)];
  return out;
}

void int8_gemm_s32(int64_t M, const uint8_t* a, int64_t a_rs, const QuantizedWeight& qw, int32_t* acc) {
  if (M <= 0 || qw.out <= 0) return;
  const int64_t mp = (M + kQMR - 1) / kQMR;
  detail::Workspace ws(static_cast<size_t>(mp * kQMR * qw.in_padded));
  uint8_t* ap = ws.as<uint8_t>();
  pack_act<uint8_t>(ap, M, qw.in, qw.in_padded, [&](int64_t m, int64_t k) {
    const uint8_t v = a[m * a_rs + k];
    SB_INTERNAL_ASSERT(v <= 127, "int8_gemm_s32: activation above 7 bits");
    return v;
  });
  int8_gemm_packed(M, ap, qw, [&](const int32_t* tile, int64_t m0, int mr, int64_t n0, int nr) {
    for (int r = 0; r < mr; ++r)
      for (int q = 0; q < nr; ++q) acc[(m0 + r) * qw.out + n0 + q] = tile[r * kQNR + q];
  });
}

// ---- Linear ----
Linear::Linear(const Tensor& weight, const Tensor& bias, Precision precision)
    : precision_(precision), device_(weight.defined() ? weight.device() : Device::cpu()) {
  check_2d_f32(weight, "Linear", "weight", device_);
#ifndef SB_WITH_CUDA
  SB_CHECK(device_.is_cpu(), "Linear: weight on ", device_, " in a build without CUDA");
#endif
  out_ = weight.size(0);
  in_ = weight.size(1);
  if (bias.defined()) {
    SB_CHECK(bias.dim() == 1 && bias.size(0) == out_, "Linear: bias must be 1-D of size ", out_, ", got sizes ",
             bias.sizes());
    SB_CHECK(bias.dtype() == DType::Float32 && bias.device() == device_, "Linear: expected a float32 bias on ",
             device_, " (the weight's device), got ", bias.dtype(), " on ", bias.device());
    bias_ = bias.contiguous();
  }
  switch (precision) {
    case Precision::F32: w32_ = weight.contiguous(); break;
    case Precision::F16:
    case Precision::BF16: {
      const DType dt = precision == Precision::F16 ? DType::Float16 : DType::BFloat16;
      w16_ = weight.to(dt).contiguous();
      if (bias_.defined()) {  // Note [16-bit activations]
        bias16_ = bias_.to(dt);
        bias_rounded_ = bias16_.to(DType::Float32);
      }
      break;
    }
    default:
      if (device_.is_cpu()) {
        qw_ = quantize_weight(weight);
        break;
      }
      // CUDA: quantized on the host, uploaded as a plain row-major int8 matrix with out
      // and in rounded up to multiples of 4 (zeros), as cuBLAS's int8 GEMM wants.
      qw_ = quantize_weight(weight.to(Device::cpu()));
      const Tensor wq = unpack_weight(qw_);
      Tensor host = zeros({detail::round_up(std::max<int64_t>(out_, 1), 4), qw_.in_padded}, DType::Int8);
      host.narrow(0, 0, out_).narrow(1, 0, in_).copy_(wq);
      w8_ = host.to(device_);
      qw_.packed = Tensor();
      qw_.scale = qw_.scale.to(device_);
      qw_.row_sum = qw_.row_sum.to(device_);
  }
}

size_t Linear::weight_bytes() const {
  switch (precision_) {
    case Precision::F32: return w32_.nbytes();
    case Precision::F16:
    case Precision::BF16: return w16_.nbytes();
    default:
      return (w8_.defined() ? w8_.nbytes() : static_cast<size_t>(qw_.out * qw_.in_padded)) + qw_.scale.nbytes() +
             qw_.row_sum.nbytes();
  }
}

void Linear::observe(const Tensor& x) {
  check_2d_f32(x, "Linear::observe", "input", device_);
  float lo, hi;
  tensor_range(x.to(Device::cpu()), lo, hi);  // calibration: a host pass is fine
  act_min_ = calibrated_ ? std::min(act_min_, lo) : lo;
  act_max_ = calibrated_ ? std::max(act_max_, hi) : hi;
  calibrated_ = true;
}

Tensor Linear::forward(const Tensor& x, bool relu) const {
  const DType own = precision_ == Precision::F16    ? DType::Float16
                    : precision_ == Precision::BF16 ? DType::BFloat16
                                                    : DType::Float32;
  SB_CHECK(!x.defined() || x.dtype() == DType::Float32 || x.dtype() == own, "Linear: a ", precision_name(precision_),
           " layer takes a float32", own != DType::Float32 ? std::string(" or ") + dtype_name(own) : std::string(),
           " input, got ", x.dtype());
  check_2d_on(x, "Linear", "input", device_);
  SB_CHECK(x.size(1) == in_, "Linear: input has ", x.size(1), " features (sizes ", x.sizes(), "), weight expects ", in_);
  SB_CHECK(precision_ != Precision::Int8Static || calibrated_, "Linear: int8_static layer used before calibration");
  const int64_t M = x.size(0);
  Tensor y = empty({M, out_}, x.dtype(), device_);
#ifdef SB_WITH_CUDA
  if (device_.is_cuda()) {
    cuda::LinearWeights lw;
    lw.precision = precision_;
    lw.w = precision_ == Precision::F32 ? w32_ : precision_ == Precision::F16 || precision_ == Precision::BF16 ? w16_ : w8_;
    lw.scale = qw_.scale;
    lw.row_sum = qw_.row_sum;
    lw.bias = bias_;
    lw.bias16 = bias16_;
    lw.bias_rounded = bias_rounded_;
    lw.out = out_;
    lw.in = in_;
    const ActQParams act = precision_ == Precision::Int8Static ? act_qparams(act_min_, act_max_) : ActQParams{};
    cuda::linear_forward(y, x, lw, act, relu);
    return y;
  }
#endif
  const bool narrow = x.dtype() != DType::Float32;  // Note [16-bit activations]
  const Tensor& bias = narrow ? bias_rounded_ : bias_;
  GemmEpilogue ep;
  ep.bias = bias.defined() ? bias.data<float>() : nullptr;
  ep.relu = relu;
  if (precision_ == Precision::F32) {
    gemm(M, out_, in_, x.data<float>(), x.stride(0), x.stride(1), w32_.data<float>(), 1, in_, y.data<float>(), out_, 1, ep);
    return y;
  }
  if (precision_ == Precision::F16) {  // the float32 GEMM with float16 B (and A), y rounded after it
    if (!narrow) {
      gemm(M, out_, in_, x.data<float>(), x.stride(0), x.stride(1), w16_.data<Half>(), 1, in_, y.data<float>(), out_,
           1, ep);
      return y;
    }
    Tensor y32 = empty({M, out_}, DType::Float32);
    gemm(M, out_, in_, x.data<Half>(), x.stride(0), x.stride(1), w16_.data<Half>(), 1, in_, y32.data<float>(), out_, 1,
         ep);
    y.copy_(y32);
    return y;
  }
  if (precision_ == Precision::BF16) {  // a float32 x rounded to bfloat16 once (its strides kept)
    const Tensor x16 = x.to(DType::BFloat16);
    if (narrow)
      gemm(M, out_, in_, x16.data<BFloat16>(), x16.stride(0), x16.stride(1), w16_.data<BFloat16>(), 1, in_,
           y.data<BFloat16>(), out_, 1, ep);
    else
      gemm(M, out_, in_, x16.data<BFloat16>(), x16.stride(0), x16.stride(1), w16_.data<BFloat16>(), 1, in_,
           y.data<float>(), out_, 1, ep);
    return y;
  }
  if (M == 0 || out_ == 0) return y;
  float lo = act_min_, hi = act_max_;
  if (precision_ == Precision::Int8Dynamic) tensor_range(x, lo, hi);
  const ActQParams q = act_qparams(lo, hi);
  const int64_t mp = (M + kQMR - 1) / kQMR;
  detail::Workspace ws(static_cast<size_t>(mp * kQMR * qw_.in_padded));
  uint8_t* ap = ws.as<uint8_t>();
  quantize_pack_act(ap, x.data<float>(), x.stride(0), x.stride(1), M, in_, qw_.in_padded, 1.0f / q.scale, q.zero_point);
  float* yp = y.data<float>();
  const float* sw = qw_.scale.data<float>();
  const int32_t* rsum = qw_.row_sum.data<int32_t>();
  const float* bp = ep.bias;
  const float sx = q.scale;
  const int32_t zp = q.zero_point;
  int8_gemm_packed(M, ap, qw_, [&](const int32_t* tile, int64_t m0, int mr, int64_t n0, int nr) {
#ifdef SB_HAVE_AVX2
    if (nr == kQNR && use_avx2()) {  // the same arithmetic, 8 columns at a time
      const __m256 zero = _mm256_setzero_ps();
      for (int h = 0; h < kQNR; h += 8) {
        const __m256 s = _mm256_mul_ps(_mm256_set1_ps(sx), _mm256_loadu_ps(sw + n0 + h));
        const __m256i zr = _mm256_mullo_epi32(_mm256_set1_epi32(zp), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rsum + n0 + h)));
        const __m256 bias = bp ? _mm256_loadu_ps(bp + n0 + h) : zero;
        for (int r = 0; r < mr; ++r) {
          const __m256i t = _mm256_sub_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(tile + r * kQNR + h)), zr);
          __m256 v = _mm256_mul_ps(s, _mm256_cvtepi32_ps(t));
          if (bp) v = _mm256_add_ps(v, bias);
          if (relu) v = _mm256_max_ps(zero, v);  // NaN stays (Note [Fused relu and NaN] in matmul/gemm_impl.h)
          _mm256_storeu_ps(yp + (m0 + r) * out_ + n0 + h, v);
        }
      }
      return;
    }
#endif
    for (int r = 0; r < mr; ++r) {
      float* yr = yp + (m0 + r) * out_ + n0;
      for (int c = 0; c < nr; ++c) {
        float v = sx * sw[n0 + c] * static_cast<float>(tile[r * kQNR + c] - zp * rsum[n0 + c]);
        if (bp) v += bp[n0 + c];
        yr[c] = relu && v < 0.0f ? 0.0f : v;
      }
    }
  });
  return y;
}

// ---- Mlp ----
Mlp::Mlp(const std::vector<Tensor>& weights, const std::vector<Tensor>& biases, Precision precision) {
  SB_CHECK(weights.size() == 3 && biases.size() == 3, "Mlp: expected 3 weights and 3 biases, got ", weights.size(),
           " and ", biases.size());
  for (size_t i = 0; i < 3; ++i) {
    if (i > 0)
      SB_CHECK(weights[i].dim() == 2 && weights[i].size(1) == weights[i - 1].size(0), "Mlp: layer ", i, " weight sizes ",
               weights[i].sizes(), " do not follow ", weights[i - 1].sizes());
    layers_.emplace_back(weights[i], biases[i], precision);
  }
}

void Mlp::calibrate(const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].observe(h);
    // propagate with the layer itself (its range now includes this batch)
    h = layers_[i].forward(h, i + 1 < layers_.size());
  }
}

Tensor Mlp::forward(const Tensor& x) const {
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) h = layers_[i].forward(h, i + 1 < layers_.size());
  return h;
}

size_t Mlp::weight_bytes() const {
  size_t s = 0;
  for (const Linear& l : layers_) s += l.weight_bytes();
  return s;
}

double relative_error(const Tensor& out, const Tensor& ref) {  // either on any device: to_vector copies
  SB_CHECK(out.sizes() == ref.sizes(), "relative_error: sizes ", out.sizes(), " vs ", ref.sizes());
  const std::vector<double> a = out.to_vector(), b = ref.to_vector();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : (num > 0.0 ? INFINITY : 0.0);
}

}  // namespace sb
