// iterator.cpp — set-up of the shared strided iterator: the dims from plan_dims (Note
// [One dimension planner]), then the path (see Note [Strided iteration] in iterator.h).
// Cost: O(ndim^2) integer work per op call, nothing per element.
#include "elementwise/iterator.h"

#include "stridebench/cpu_features.h"
#include "core/dim_plan.h"
#include "copy/copy.h"
#include "core/transpose_tile.h"

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <numeric>

namespace sb {

namespace {

template <int64_t ES>
void stage_fixed(char* buf, const char* src, int64_t s0, int64_t s1, int64_t n0, int64_t n1, int64_t ld) {
  for (int64_t i = 0; i < n0; ++i) {
    const char* row = src + i * s0;
    char* dst = buf + i * ES;
    for (int64_t j = 0; j < n1; ++j) std::memcpy(dst + j * ld * ES, row + j * s1, ES);
  }
}

}  // namespace

void stage_tile(char* buf, const char* src, int64_t s0, int64_t s1, int64_t n0, int64_t n1, int64_t ld, int64_t es) {
#ifdef SB_HAVE_AVX2
  if (use_avx2() && s1 == es && s0 % es == 0) {
    if (es == 4)
      return detail::transpose_tile_f32(reinterpret_cast<float*>(buf), ld, reinterpret_cast<const float*>(src), s0 / 4,
                                        n1, n0);
    if (es == 8)
      return detail::transpose_tile_f64(reinterpret_cast<double*>(buf), ld, reinterpret_cast<const double*>(src),
                                        s0 / 8, n1, n0);
    if (es == 2)  // through the zmm tiles where the design fills 2-byte buffers that way (Note [zmm 2-byte tiles])
      return detail::fill_tile_u16(reinterpret_cast<uint16_t*>(buf), ld, reinterpret_cast<const uint16_t*>(src), s0 / 2,
                                   n1, n0, use_zmm_fill16());
  }
#endif
  switch (es) {
    case 1: return stage_fixed<1>(buf, src, s0, s1, n0, n1, ld);
    case 2: return stage_fixed<2>(buf, src, s0, s1, n0, n1, ld);
    case 4: return stage_fixed<4>(buf, src, s0, s1, n0, n1, ld);
    case 8: return stage_fixed<8>(buf, src, s0, s1, n0, n1, ld);
    default:
      for (int64_t i = 0; i < n0; ++i)
        for (int64_t j = 0; j < n1; ++j) std::memcpy(buf + (j * ld + i) * es, src + i * s0 + j * s1, es);
  }
}

StridedIter StridedIter::from_tensors(const std::vector<Tensor>& tensors, bool tiles) {
  SB_INTERNAL_ASSERT(!tensors.empty() && tensors.size() <= kMaxOperands, "operands: ", tensors.size());
  Operand ops[kMaxOperands];
  int n = 0;
  for (const Tensor& t : tensors) {
    SB_INTERNAL_ASSERT(t.sizes() == tensors[0].sizes(), "operand sizes ", t.sizes(), " vs output ", tensors[0].sizes());
    ops[n++] = {static_cast<char*>(t.numel() ? t.data_ptr() : nullptr), t.strides().data(),
                static_cast<int64_t>(t.element_size())};
  }
  return StridedIter(tensors[0].sizes(), ops, n, tiles);
}

StridedIter StridedIter::of(std::initializer_list<const Tensor*> tensors) {
  SB_INTERNAL_ASSERT(tensors.size() >= 1 && tensors.size() <= kMaxOperands, "operands: ", tensors.size());
  const Tensor& out = **tensors.begin();
  bool contiguous = out.numel() > 0;
  for (const Tensor* t : tensors) {
    SB_INTERNAL_ASSERT(t->sizes() == out.sizes(), "operand sizes ", t->sizes(), " vs output ", out.sizes());
    contiguous = contiguous && t->is_contiguous();
  }
  if (!contiguous) {  // the general set-up
    Operand ops[kMaxOperands];
    int n = 0;
    for (const Tensor* t : tensors)
      ops[n++] = {static_cast<char*>(t->numel() ? t->data_ptr() : nullptr), t->strides().data(),
                  static_cast<int64_t>(t->element_size())};
    return StridedIter(out.sizes(), ops, n);
  }
  // What steps 1-4 give for dense row-major operands: one dim of numel, Contiguous.
  StridedIter it;
  it.nops_ = static_cast<int>(tensors.size());
  it.numel_ = out.numel();
  it.sizes_.assign(1, it.numel_);
  Strides s{};
  int i = 0;
  for (const Tensor* t : tensors) {
    it.base_[i] = static_cast<char*>(t->data_ptr());
    it.elem_size_[i] = static_cast<int64_t>(t->element_size());
    s[i] = it.elem_size_[i];
    ++i;
  }
  it.strides_.assign(1, s);
  it.path_ = Path::Contiguous;
  return it;
}

StridedIter::StridedIter(const Shape& sizes, const Operand* ops, int nops, bool tiles) {
  nops_ = nops;
  SB_INTERNAL_ASSERT(nops_ >= 1 && nops_ <= kMaxOperands, "operands: ", nops_);
  numel_ = 1;
  for (int64_t s : sizes) numel_ *= s;
  for (int i = 0; i < nops_; ++i) {
    base_[i] = ops[i].data;
    elem_size_[i] = ops[i].elem_size;
  }
  if (numel_ == 0) {
    sizes_.assign(1, 0);
    strides_.assign(1, Strides{});
    return;
  }
  // 1-3. Note [One dimension planner]; the iterator keeps strides in bytes
  const int64_t* st[kMaxOperands];
  for (int i = 0; i < nops_; ++i) st[i] = ops[i].strides;
  const DimPlan plan = plan_dims(sizes.data(), static_cast<int64_t>(sizes.size()), st, nops_);
  for (int d = 0; d < plan.ndim(); ++d) {
    sizes_.push_back(plan.sizes[d]);
    Strides s{};
    for (int i = 0; i < nops_; ++i) s[i] = plan.strides[d][i] * ops[i].elem_size;
    strides_.push_back(s);
  }
  if (sizes_.empty()) {  // every dim was size 1: one element
    sizes_.assign(1, 1);
    Strides s{};
    for (int i = 0; i < nops_; ++i) s[i] = ops[i].elem_size;
    strides_.push_back(s);
  }
  // 4. pick the path
  const int nd = ndim();
  if (nd == 1) {
    bool dense = strides_[0][0] == ops[0].elem_size;
    for (int i = 1; i < nops_; ++i) dense = dense && (strides_[0][i] == ops[i].elem_size || strides_[0][i] == 0);
    if (dense) {
      path_ = Path::Contiguous;
      return;
    }
  }
  // Tiled: an input whose fastest dim k is not dim 0 (and both dims long enough to tile)
  for (int i = 1; i < nops_ && nd >= 2 && tiles; ++i) {
    const int64_t s0 = strides_[0][i];
    if (s0 == 0) continue;
    int k = -1;
    for (int d = 1; d < nd; ++d) {
      const int64_t sd = strides_[d][i];
      if (sd != 0 && sd < s0 && (k < 0 || sd < strides_[k][i])) k = d;
    }
    if (k < 0 || sizes_[0] < 8 || sizes_[k] < 8) continue;
    // dim 0 shorter than kTileBytes0 (e.g. 128-float rows): the tile takes more rows, up
    // to kTileElems elements (a whole 128 x 128 plane), so the staged source is read in
    // longer runs (docs/notes/elementwise.md, git 86d4bad (2026-11-23))
    tile0_ = std::min(std::max<int64_t>(1, kTileBytes0 / ops[0].elem_size), sizes_[0]);
    tile1_ = std::min(std::max(kTileRows, kTileElems / tile0_), sizes_[k]);
    // move dim k to position 1 (the order of the outer dims does not matter to the tiles)
    std::rotate(sizes_.begin() + 1, sizes_.begin() + k, sizes_.begin() + k + 1);
    std::rotate(strides_.begin() + 1, strides_.begin() + k, strides_.begin() + k + 1);
    int64_t bytes = 0;  // Note [Tile prefetch]: only where the operands come from memory
    for (int j = 0; j < nops_; ++j) bytes += numel_ * ops[j].elem_size;
    prefetch_ = bytes > nt_threshold_bytes();
    tiles0_ = (sizes_[0] + tile0_ - 1) / tile0_;
    tiles1_ = (sizes_[1] + tile1_ - 1) / tile1_;
    path_ = Path::Tiled;
    // stage every input that runs faster along dim 1 than along dim 0
    for (int j = 1; j < nops_; ++j) {
      const int64_t a0 = strides_[0][j], a1 = strides_[1][j];
      if (a0 != 0 && a1 != 0 && a1 < a0 && ops[j].elem_size <= 8)
        staged_mask_ |= 1u << j;
    }
    // Note [Grouped staging]: whole planes per tile, coming from memory, every operand
    // but the staged ones dense over dims 0-2 (or constant there), the staged ones read
    // along dense rows
    if (prefetch_ && nd >= 3 && tile0_ == sizes_[0] && tile1_ == sizes_[1] && staged_mask_ != 0) {
      const int64_t plane = sizes_[0] * sizes_[1];
      bool ok = true, streams = false;  // streams: a dense input beside the staged ones
      int64_t staged_bytes = 0;
      for (int j = 0; j < nops_; ++j) {
        const int64_t es = ops[j].elem_size, a0 = strides_[0][j], a1 = strides_[1][j], a2 = strides_[2][j];
        if (staged(j)) {
          ok = ok && a1 == es;
          staged_bytes += plane * es;
        } else {
          const bool dense = a0 == es && a1 == sizes_[0] * es && a2 == plane * es;
          ok = ok && (dense || (j > 0 && a0 == 0 && a1 == 0 && a2 == 0));
          streams = streams || (j > 0 && dense);
        }
      }
      if (ok && streams)
        group_ = std::clamp<int64_t>(cpu_tuning().group_bytes / staged_bytes, cpu_tuning().group_min, 16);
    }
    // Note [Staged source read ahead]: each staged input's tile one run of memory (the
    // tile spans its dim 1, its rows lie end to end), a dense input beside
    if (prefetch_ && group_ == 1 && staged_mask_ != 0 && tile1_ == sizes_[1]) {
      bool runs = true, streams = false;
      for (int j = 1; j < nops_; ++j) {
        if (staged(j)) runs = runs && strides_[1][j] == ops[j].elem_size && strides_[0][j] == sizes_[1] * ops[j].elem_size;
        else streams = streams || (strides_[0][j] != 0 && strides_[1][j] != 0);
      }
      ahead_ = runs && streams;
    }

    return;
  }
  tile0_ = 0;
  for (int i = 1; i < nops_; ++i)
    if (strides_[0][i] == 0) {
      path_ = Path::Broadcast;
      return;
    }
  path_ = Path::Strided;
}

}  // namespace sb
