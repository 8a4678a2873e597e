// overlap.cpp — whether a tensor's elements share memory with each other
// (has_internal_overlap) or with another tensor's (get_overlap_status), from sizes and
// strides alone (Note [Overlap from strides]); declared in stridebench/tensor.h. Every
// op's aliasing check, CPU and CUDA, comes here.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "core/test_hooks.h"
#include "stridebench/tensor.h"

namespace sb {

MemOverlap has_internal_overlap(const Tensor& t) {
  if (t.numel() == 0) return MemOverlap::No;  // no element, nothing to share (any strides)
  for (int64_t i = 0; i < t.dim(); ++i)
    if (t.sizes()[i] > 1 && t.strides()[i] == 0) return MemOverlap::Yes;
  if (t.is_non_overlapping_and_dense()) return MemOverlap::No;
  // sorted by stride, each stride must exceed the span of all smaller dims
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t i = 0; i < t.dim(); ++i)
    if (t.sizes()[i] > 1) dims.emplace_back(t.strides()[i], t.sizes()[i]);
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;
  for (auto [st, sz] : dims) {
    if (st <= span) return MemOverlap::TooHard;
    span += (sz - 1) * st;
  }
  return MemOverlap::No;
}

namespace {

// Note [Overlap from strides]
// Two views of one storage overlap when an element of a and an element of b share a
// byte. With byte offsets oa, ob, byte strides sa, sb and element sizes ea, eb, they do
// iff some indices i, j and bytes u < ea, v < eb solve
//     oa + sum_k i_k sa_k + u = ob + sum_k j_k sb_k + v.
// Substituting v' = eb - 1 - v and, for each negative coefficient c, x' = bound - x
// gives sum_k c_k x_k = D with every c_k > 0 and 0 <= x_k <= bound_k: a bounded
// knapsack feasibility question, which a depth-first search over the coefficients in
// decreasing order answers exactly, pruned by the reachable range and the gcd of the
// coefficients left. Equal coefficients merge into one variable (the sum of two ranges
// is a range), which makes the common cases (x[..., 0::2] against x[..., 1::2], the two
// halves of a dim) a handful of steps. Past kOverlapWork search steps the answer is
// TooHard, and the callers take the safe side (copy_ and the elementwise ops go through
// a temporary). Address ranges alone would call interleaved disjoint views overlapping.
//
// Note [Bytes within an element prune by residue]: the last variable, the bytes u + v'
// (coefficient 1, bound ea + eb - 2), makes the gcd of every suffix 1, so the gcd alone
// prunes nothing. With G the gcd of the coefficients between level k and that last
// variable, the sum of those terms is a multiple of G and u + v' is at least D mod G:
// a level whose D mod G exceeds the bytes' bound has no solution below it. Two lattices
// of unrelated even strides, one at an even and one at an odd element offset, are then
// decided at the first level; by the gcd alone they ran out of steps as TooHard.
constexpr int64_t kOverlapWork = 1 << 16;
std::atomic<int64_t> g_overlap_work{kOverlapWork};

struct OverlapTerm {
  int64_t coef, bound;
};

class OverlapSearch {
 public:
  OverlapSearch(std::vector<OverlapTerm> terms, int64_t target) : t_(std::move(terms)), target_(target) {
    std::sort(t_.begin(), t_.end(), [](const OverlapTerm& x, const OverlapTerm& y) { return x.coef > y.coef; });
    std::vector<OverlapTerm> merged;
    for (const OverlapTerm& x : t_) {
      if (!merged.empty() && merged.back().coef == x.coef) merged.back().bound += x.bound;
      else merged.push_back(x);
    }
    t_ = std::move(merged);
    const size_t n = t_.size();
    reach_.assign(n + 1, 0);
    gcd_.assign(n + 1, 0);
    // Note [Bytes within an element prune by residue]: a last term of coefficient 1 is left
    // out of the gcds and allows a residue up to its bound (0 where there is none: the
    // plain divisibility test)
    const bool unit = n > 0 && t_[n - 1].coef == 1;
    unit_bound_ = unit ? t_[n - 1].bound : 0;
    for (size_t k = n; k-- > 0;) {
      reach_[k] = reach_[k + 1] + t_[k].coef * t_[k].bound;
      gcd_[k] = unit && k == n - 1 ? 0 : std::gcd(gcd_[k + 1], t_[k].coef);
    }
  }
  // 1: a solution exists, 0: none, -1: the work bound ran out first
  int solve() {
    const bool found = feasible(0, target_);
    return exhausted_ ? -1 : found ? 1 : 0;
  }

 private:
  bool feasible(size_t k, int64_t d) {
    if (++work_ > work_limit_) exhausted_ = true;
    if (exhausted_) return false;
    if (d < 0 || d > reach_[k]) return false;
    if (k == t_.size()) return d == 0;
    if (gcd_[k] > 1 && d % gcd_[k] > unit_bound_) return false;  // gcd_[k] = 0: the unit term alone
    const int64_t c = t_[k].coef;
    const int64_t lo = std::max<int64_t>(0, (d - reach_[k + 1] + c - 1) / c);
    const int64_t hi = std::min(t_[k].bound, d / c);
    for (int64_t x = hi; x >= lo && !exhausted_; --x)
      if (feasible(k + 1, d - c * x)) return true;
    return false;
  }

  std::vector<OverlapTerm> t_;
  std::vector<int64_t> reach_, gcd_;  // gcd_: Note [Bytes within an element prune by residue]
  int64_t unit_bound_ = 0;
  int64_t target_;
  int64_t work_ = 0;
  const int64_t work_limit_ = g_overlap_work.load(std::memory_order_relaxed);
  bool exhausted_ = false;
};

}  // namespace

void check_disjoint(const char* op, const Tensor& out, const Tensor& in, const char* in_name) {
  const MemOverlapStatus ov = get_overlap_status(out, in);
  SB_CHECK(ov == MemOverlapStatus::No, op, ": out (sizes ", out.sizes(), ", strides ", out.strides(), ", offset ",
           out.storage_offset(), ") ", ov == MemOverlapStatus::TooHard ? "may overlap" : "overlaps", " ", in_name,
           " (sizes ", in.sizes(), ", strides ", in.strides(), ", offset ", in.storage_offset(),
           ") in memory; write into a separate tensor");
}

void set_overlap_search_steps(int64_t steps) { g_overlap_work.store(steps < 0 ? kOverlapWork : steps); }

MemOverlapStatus get_overlap_status(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.shares_storage_with(b)) return MemOverlapStatus::No;
  if (a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
      a.dtype() == b.dtype())
    return MemOverlapStatus::Full;
  const int64_t ea = static_cast<int64_t>(a.element_size()), eb = static_cast<int64_t>(b.element_size());
  // Note [Overlap from strides]: a's terms enter with +, b's with -
  std::vector<OverlapTerm> terms;
  int64_t target = b.storage_offset() * eb - a.storage_offset() * ea + (eb - 1);
  auto add = [&](int64_t coef, int64_t bound) {
    if (coef == 0 || bound == 0) return;
    if (coef < 0) {
      coef = -coef;
      target += coef * bound;
    }
    terms.push_back({coef, bound});
  };
  for (int64_t i = 0; i < a.dim(); ++i) add(a.strides()[i] * ea, a.sizes()[i] - 1);
  for (int64_t i = 0; i < b.dim(); ++i) add(-b.strides()[i] * eb, b.sizes()[i] - 1);
  add(1, ea + eb - 2);  // u + v'
  switch (OverlapSearch(std::move(terms), target).solve()) {
    case 0: return MemOverlapStatus::No;
    case 1: return MemOverlapStatus::Partial;
    default: return MemOverlapStatus::TooHard;
  }
}

}  // namespace sb
