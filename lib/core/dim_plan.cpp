// dim_plan.cpp — Note [One dimension planner] (dim_plan.h).
#include "core/dim_plan.h"

#include <algorithm>

#include "stridebench/error.h"

namespace sb {

namespace {

// > 0: dim d0 goes outside d1; < 0: it stays inside; 0: no operand decides.
int should_swap(const int64_t* sizes, const int64_t* const* strides, int nops, int64_t d0, int64_t d1) {
  for (int i = 0; i < nops; ++i) {
    const int64_t s0 = strides[i][d0], s1 = strides[i][d1];
    if (s0 == 0 || s1 == 0) continue;  // broadcast along one of them: ask the next operand
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    if (sizes[d0] > sizes[d1]) return 1;  // equal strides: the smaller size inside
  }
  return 0;
}

}  // namespace

void order_fastest_first(const int64_t* sizes, int64_t ndim, const int64_t* const* strides, int nops, int64_t* perm) {
  for (int64_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;  // the logical order: last dim inside
  for (int64_t i = 1; i < ndim; ++i) {  // insertion sort that tolerates "no operand decides"
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      const int c = should_swap(sizes, strides, nops, perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
}

DimPlan plan_dims(const int64_t* sizes, int64_t ndim, const int64_t* const* strides, int nops) {
  SB_INTERNAL_ASSERT(nops >= 1 && nops <= DimPlan::kMaxOperands, "plan_dims: ", nops, " operands");
  DimPlan plan;
  plan.nops = nops;
  // 1. drop size-1 dims
  SmallVec<int64_t, DimPlan::kInlineDims> kept;
  for (int64_t d = 0; d < ndim; ++d)
    if (sizes[d] != 1) kept.push_back(d);
  const int64_t nk = static_cast<int64_t>(kept.size());
  SmallVec<int64_t, DimPlan::kInlineDims> ksizes;
  SmallVec<DimPlan::Strides, DimPlan::kInlineDims> kstrides;
  ksizes.resize_for_overwrite(static_cast<size_t>(nk));
  kstrides.resize_for_overwrite(static_cast<size_t>(nk));
  for (int64_t k = 0; k < nk; ++k) {
    ksizes[k] = sizes[kept[k]];
    DimPlan::Strides s{};
    for (int i = 0; i < nops; ++i) s[i] = strides[i][kept[k]];
    kstrides[k] = s;
  }
  // 2. order fastest first
  SmallVec<int64_t, DimPlan::kInlineDims> perm;
  perm.resize_for_overwrite(static_cast<size_t>(nk));
  {
    const int64_t* kst[DimPlan::kMaxOperands];
    SmallVec<int64_t, DimPlan::kInlineDims * DimPlan::kMaxOperands> flat;
    flat.resize_for_overwrite(static_cast<size_t>(nk * nops));
    for (int i = 0; i < nops; ++i) {
      for (int64_t k = 0; k < nk; ++k) flat[i * nk + k] = kstrides[k][i];
      kst[i] = flat.data() + i * nk;
    }
    order_fastest_first(ksizes.data(), nk, kst, nops, perm.data());
  }
  // 3. merge each dim into the one inside it where every operand continues it
  for (int64_t k : perm) {
    const DimPlan::Strides& s = kstrides[k];
    if (!plan.sizes.empty()) {
      const int64_t inner = plan.sizes.back();
      bool merge = true;
      for (int i = 0; i < nops; ++i) merge = merge && s[i] == plan.strides.back()[i] * inner;
      if (merge) {
        plan.sizes.back() *= ksizes[k];
        continue;
      }
    }
    plan.sizes.push_back(ksizes[k]);
    plan.strides.push_back(s);
  }
  return plan;
}

DimPlan plan_dims(const Shape& sizes, std::initializer_list<const Shape*> strides) {
  const int64_t* st[DimPlan::kMaxOperands];
  int n = 0;
  for (const Shape* s : strides) {
    SB_INTERNAL_ASSERT(n < DimPlan::kMaxOperands && s->size() == sizes.size(), "plan_dims: operand ", n,
                       " strides ", *s, " for sizes ", sizes);
    st[n++] = s->data();
  }
  return plan_dims(sizes.data(), static_cast<int64_t>(sizes.size()), st, n);
}

Shape broadcast_strides(const Tensor& t, const Shape& sizes) {
  Shape st(sizes.size(), 0);
  const size_t lead = sizes.size() - t.sizes().size();
  for (size_t i = 0; i < t.sizes().size(); ++i) st[lead + i] = t.sizes()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

Shape output_strides_like(const Shape& sizes, const Shape* const* input_strides, int n) {
  SB_INTERNAL_ASSERT(n >= 1 && n <= DimPlan::kMaxOperands, "output_strides_like: ", n, " inputs");
  const int64_t nd = static_cast<int64_t>(sizes.size());
  SmallVec<int64_t, DimPlan::kInlineDims> perm;
  perm.resize_for_overwrite(sizes.size());
  const int64_t* st[DimPlan::kMaxOperands];
  for (int i = 0; i < n; ++i) st[i] = input_strides[i]->data();
  order_fastest_first(sizes.data(), nd, st, n, perm.data());
  Shape out(sizes.size());
  int64_t z = 1;
  for (int64_t d : perm) {
    out[d] = z;
    z *= std::max<int64_t>(sizes[d], 1);
  }
  return out;
}

Shape output_strides_like(const Shape& sizes, std::initializer_list<const Shape*> input_strides) {
  return output_strides_like(sizes, input_strides.begin(), static_cast<int>(input_strides.size()));
}

}  // namespace sb
