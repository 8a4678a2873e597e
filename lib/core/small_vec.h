// small_vec.h — SmallVec<T, N>: a vector of trivially copyable T that keeps up to N
// elements inline and moves to the heap only past N. The strided iterator's per-call
// set-up (elementwise/iterator.h) builds a dozen short dim lists; as std::vectors they cost
// ~30 malloc/free pairs, more than a 16x4x4 add itself (docs/notes/planner.md).
// Cost: push_back O(1), no allocation while size() <= N.
#pragma once
#include <array>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

namespace sb {

template <typename T, int N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVec holds plain values");

 public:
  // The inline slots past size() are never read, so they are left uninitialized and
  // copies take size() elements: zeroing all N slots at each construction was the
  // largest part of plan_dims's own cost (docs/notes/copy-reduce.md, "No allocation in
  // the reduce driver").
  SmallVec() {}
  explicit SmallVec(size_t n, const T& v = T()) { resize(n, v); }
  SmallVec(const SmallVec& o) { copy_from(o); }
  SmallVec(SmallVec&& o) noexcept { move_from(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) {
      clear();
      copy_from(o);
    }
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      clear();
      move_from(o);
    }
    return *this;
  }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* data() { return heap_mode_ ? heap_.data() : inline_.data(); }
  const T* data() const { return heap_mode_ ? heap_.data() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[n_ - 1]; }
  const T& back() const { return data()[n_ - 1]; }
  T* begin() { return data(); }
  T* end() { return data() + n_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + n_; }

  void push_back(const T& v) {
    if (!heap_mode_ && n_ < static_cast<size_t>(N)) {
      inline_[n_++] = v;
      return;
    }
    to_heap();
    heap_.push_back(v);
    ++n_;
  }
  void resize(size_t n, const T& v = T()) {
    if (n > static_cast<size_t>(N)) to_heap();
    if (heap_mode_) {
      heap_.resize(n, v);
    } else {
      for (size_t i = n_; i < n; ++i) inline_[i] = v;
    }
    n_ = n;
  }
  // n elements, the inline ones left as they are, for a caller that writes them all
  void resize_for_overwrite(size_t n) {
    if (n > static_cast<size_t>(N)) to_heap();
    if (heap_mode_) heap_.resize(n);
    n_ = n;
  }
  void assign(size_t n, const T& v) {
    clear();
    resize(n, v);
  }

 private:
  void clear() {
    n_ = 0;
    heap_.clear();
    heap_mode_ = false;
  }
  void copy_from(const SmallVec& o) {
    if (o.heap_mode_) {
      heap_ = o.heap_;
      heap_mode_ = true;
    } else {
      for (size_t i = 0; i < o.n_; ++i) inline_[i] = o.inline_[i];
    }
    n_ = o.n_;
  }
  void move_from(SmallVec& o) {
    if (o.heap_mode_) {
      heap_ = std::move(o.heap_);
      heap_mode_ = true;
    } else {
      for (size_t i = 0; i < o.n_; ++i) inline_[i] = o.inline_[i];
    }
    n_ = o.n_;
    o.clear();
  }
  void to_heap() {
    if (heap_mode_) return;
    heap_.assign(inline_.begin(), inline_.begin() + n_);
    heap_mode_ = true;
  }
  std::array<T, N> inline_;  // [0, n_) only
  std::vector<T> heap_;
  size_t n_ = 0;
  bool heap_mode_ = false;
};

}  // namespace sb
