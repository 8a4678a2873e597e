// normalize_strided16.cpp — normalize's float16 and bfloat16 rows that are not dense
// along dim (Note [16-bit strided rows through float32]): widened into float32 buffers,
// normalized there by normalize.cpp's float32 strips, rounded back into out.
#include <algorithm>
#include <cstring>

#include "elementwise/normalize_rows.h"
#include "core/transpose_tile.h"
#include "copy/copy.h"
#include "core/scratch.h"

namespace sb::ew {

#ifdef SB_HAVE_AVX2
// Note [16-bit strided rows through float32]: float16 and bfloat16 rows that are not
// dense along dim in both x and out (a transposed, stepped or channels-last x or out, an
// outer dim) are widened into a float32 buffer, normalized there by the kernel the
// float32 rows of that buffer's layout take, and rounded back into out: per block, kk
// rows of x side by side where x's rows lie side by side (Note [Normalize across
// adjacent rows]: each element's kk values widened by one vector conversion), else
// kk dense rows (each gathered, then widened); the result in dense rows, or side by side
// where both x's and out's rows are, then rounded into out per row or per element's kk
// values (dense rows first transposed by 8x8 tiles where out's rows lie side by side).
// The numerics are float32's, one rounding on the store, as Note [16-bit normalize rows
// through float32]. The generic path these rows took before read and converted one
// element at a time, several to tens of times the contiguous time (float16 through its
// scalar conversion; docs/notes/elementwise.md). Blocks whose buffers would pass 1 MiB
// keep it.
constexpr int64_t kStrided16Chunk = 512;  // elements gathered or scattered per step

// Every other 16-bit element (a stepped slice): the low halves of 32-bit words, 8 a
// load; the loads stop at the row's last element (j + 9 <= n: the load of words j ..
// j + 7 ends at element 2j + 15 <= 2n - 3)
template <typename T>
int64_t widen16_stride2(float* d, const char* x, int64_t n) {
  int64_t j = 0;
  const __m256i lo = _mm256_set1_epi32(0xFFFF);
  for (; j + 9 <= n; j += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 4 * j));
    if constexpr (std::is_same_v<T, BFloat16>) {
      _mm256_storeu_ps(d + j, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    } else {
      const __m256i h = _mm256_packus_epi32(_mm256_and_si256(v, lo), _mm256_and_si256(v, lo));  // per lane: 4 halves twice
      _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(h, 0x08))));
    }
  }
  return j;
}

template <typename T>
void widen16(float* d, const char* x, int64_t stride, int64_t n) {
  if (stride == static_cast<int64_t>(sizeof(T))) return convert_unit_stride(d, reinterpret_cast<const T*>(x), n, false);
  if (stride == 2 * static_cast<int64_t>(sizeof(T))) {
    const int64_t j = widen16_stride2<T>(d, x, n);
    d += j, x += j * stride, n -= j;
  }
  alignas(64) T t[kStrided16Chunk];
  for (int64_t j0 = 0; j0 < n; j0 += kStrided16Chunk) {
    const int64_t m = std::min(kStrided16Chunk, n - j0);
    for (int64_t j = 0; j < m; ++j) std::memcpy(t + j, x + (j0 + j) * stride, sizeof(T));
    convert_unit_stride(d + j0, t, m, false);
  }
}

template <typename T>
void narrow16(char* o, int64_t stride, const float* f, int64_t n) {
  if (stride == static_cast<int64_t>(sizeof(T))) return convert_unit_stride(reinterpret_cast<T*>(o), f, n, false);
  alignas(64) T t[kStrided16Chunk];
  for (int64_t j0 = 0; j0 < n; j0 += kStrided16Chunk) {
    const int64_t m = std::min(kStrided16Chunk, n - j0);
    convert_unit_stride(t, f + j0, m, false);
    for (int64_t j = 0; j < m; ++j) std::memcpy(o + (j0 + j) * stride, t + j, sizeof(T));
  }
}

template <typename T>
bool normalize_strided16(bool avx, char* const* p, const int64_t* s, int64_t rows, int64_t n, int64_t xsd,
                         int64_t osd, double eps) {
  constexpr int64_t es = sizeof(T);
  constexpr int64_t kMaxBuf = int64_t{1} << 20;  // bytes per buffer
  const bool x_adj = s[1] == es && xsd != es, o_adj = s[0] == es && osd != es;
  int64_t kr;  // rows per block
  if (x_adj) {
    kr = std::min<int64_t>(rows, n <= 1024 ? 64 : 16);
    if (kr * n * 4 > kMaxBuf) return false;
  } else {
    if (n * 4 > kMaxBuf) return false;
    kr = std::clamp<int64_t>((int64_t{64} << 10) / (n * 4), 1, rows);
  }
  // xb, then ob 2 KiB past a 4 KiB boundary from it (no 4K aliasing between the kernel's
  // loads and stores: Note [Fused groups and 4K aliasing])
  const int64_t xbytes = (kr * n * 4 + 4095) / 4096 * 4096;
  float* const xb = reinterpret_cast<float*>(tile_scratch(static_cast<size_t>(2 * xbytes + 2048)));
  float* const ob = reinterpret_cast<float*>(reinterpret_cast<char*>(xb) + xbytes + 2048);
  for (int64_t r0 = 0; r0 < rows; r0 += kr) {
    const int64_t kk = std::min(kr, rows - r0);
    const char* const x0 = p[1] + r0 * s[1];
    char* const o0 = p[0] + r0 * s[0];
    if (x_adj && xsd == kk * es)  // the block is one run (a channels-last x's pixels)
      convert_unit_stride(xb, reinterpret_cast<const T*>(x0), n * kk, false);
    else if (x_adj)
      for (int64_t i = 0; i < n; ++i) widen16<T>(xb + i * kk, x0 + i * xsd, es, kk);
    else
      for (int64_t k = 0; k < kk; ++k) widen16<T>(xb + k * n, x0 + k * s[1], xsd, n);
    const bool side = x_adj && o_adj;  // the result side by side too
    char* const q[2] = {reinterpret_cast<char*>(ob), reinterpret_cast<char*>(xb)};
    const int64_t sq[2] = {side ? 4 : n * 4, x_adj ? 4 : n * 4};
    normalize_buffered_f32(avx, q, sq, kk, n, x_adj ? kk * 4 : 4, side ? kk * 4 : 4, eps);
    if (o_adj) {
      const float* r = ob;
      if (!side) {  // xb[i * kk + k] = ob[k * n + i]
        detail::transpose_tile_f32(xb, kk, ob, n, n, kk);
        r = xb;
      }
      if (osd == kk * es) convert_unit_stride(reinterpret_cast<T*>(o0), r, n * kk, false);
      else
        for (int64_t i = 0; i < n; ++i) narrow16<T>(o0 + i * osd, es, r + i * kk, kk);
    } else {
      for (int64_t k = 0; k < kk; ++k) narrow16<T>(o0 + k * s[0], osd, ob + k * n, n);
    }
  }
  return true;
}

template bool normalize_strided16<Half>(bool, char* const*, const int64_t*, int64_t, int64_t, int64_t, int64_t, double);
template bool normalize_strided16<BFloat16>(bool, char* const*, const int64_t*, int64_t, int64_t, int64_t, int64_t,
                                            double);
#endif

}  // namespace sb::ew
