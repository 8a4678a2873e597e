// tensor.h — the strided Tensor: sizes, strides (in elements), a storage offset (in
// elements), a dtype, over one shared Storage (whose allocator gives the device).
//
// Views (view, reshape-when-possible, transpose, t, permute, slice, select, narrow,
// expand/broadcast_to, squeeze/unsqueeze, flatten/unflatten, as_strided) edit
// metadata only and share the storage: O(dim) work, no allocation of tensor data.
// contiguous(), clone() and copy_() move data through the strided copy in
// lib/copy/. Semantics follow PyTorch wherever PyTorch defines them: negative
// dims wrap, slice bounds clamp, step <= 0 is rejected, reshape views when the
// strides allow it and copies otherwise.
//
// In-place elementwise methods (add_, relu_, …) are declared here and defined with
// their op family in lib/elementwise/elementwise.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stridebench/allocator.h"
#include "stridebench/dtype.h"
#include "stridebench/error.h"
#include "stridebench/memory_format.h"
#include "stridebench/storage.h"

namespace sb {

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  Tensor(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t storage_offset, DType dtype);

  // ---- metadata ----
  bool defined() const { return storage_ != nullptr; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t size(int64_t d) const;    // negative d wraps
  int64_t stride(int64_t d) const;  // in elements
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return offset_; }  // in elements
  DType dtype() const { return dtype_; }
  Device device() const;
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * element_size(); }  // numel * element size
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage_with(const Tensor& o) const { return storage_ && storage_ == o.storage_; }
  long storage_use_count() const { return storage_.use_count(); }
  void* data_ptr() const;  // address of element [0, …, 0]
  template <typename T>
  T* data() const {
    SB_CHECK(DTypeOf<T>::value == dtype_, "data<", dtype_name(DTypeOf<T>::value), ">: tensor has dtype ", dtype_);
    return static_cast<T*>(data_ptr());
  }
  std::string str() const;  // "Tensor(sizes=[…], strides=[…], offset=…, dtype=…, device=…)"

  // ---- views (share storage) ----
  Tensor view(const Shape& sizes) const;        // one size may be -1; error if strides forbid
  Tensor reshape(const Shape& sizes) const;     // a view when possible, else a copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;                             // 2-D (or less) transpose
  Tensor permute(const Shape& dims) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor expand(const Shape& sizes) const;      // -1 keeps a size; new leading dims allowed
  Tensor broadcast_to(const Shape& sizes) const { return expand(sizes); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;  // a view when possible
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> storage_offset = std::nullopt) const;

  // ---- layout ----
  bool is_contiguous(MemoryFormat format = MemoryFormat::Contiguous) const;
  bool is_non_overlapping_and_dense() const;
  MemoryFormat suggest_memory_format() const;
  Tensor contiguous(MemoryFormat format = MemoryFormat::Contiguous) const;  // itself when already so
  Tensor clone(MemoryFormat format = MemoryFormat::Preserve) const;         // always new storage

  // ---- copies and conversions ----
  Tensor& copy_(const Tensor& src);  // src broadcasts to this; dtype converts; any layouts
  Tensor to(DType dtype) const;      // itself when already that dtype
  Tensor to(Device device) const;    // itself when already there
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

  // ---- element access (CPU tensors; for tests and small tools, not for kernels) ----
  double get(const Shape& index) const;
  void set(const Shape& index, double value);
  double item() const;                  // one-element tensors
  std::vector<double> to_vector() const;  // all elements, row-major over sizes()

  // ---- in-place elementwise ops (lib/elementwise/elementwise.cpp) ----
  Tensor& add_(const Tensor& other);
  Tensor& add_(double other);
  Tensor& sub_(const Tensor& other);
  Tensor& sub_(double other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(double other);
  Tensor& maximum_(const Tensor& other);
  Tensor& minimum_(const Tensor& other);
  Tensor& neg_();
  Tensor& abs_();
  Tensor& relu_();
  Tensor& exp_();
  Tensor& sqrt_();
  Tensor& normalize_(int64_t dim, double eps = 1e-5);  // (x - mean) / sqrt(var + eps) along dim

 private:
  void recompute_numel();
  std::shared_ptr<Storage> storage_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 0;
  DType dtype_ = DType::Float32;
};

// ---- factories ----
Tensor empty(const Shape& sizes, DType dtype = DType::Float32, Device device = Device::cpu(),
             MemoryFormat format = MemoryFormat::Contiguous);
Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype = DType::Float32,
                     Device device = Device::cpu());
Tensor empty_like(const Tensor& t, MemoryFormat format = MemoryFormat::Preserve);
Tensor zeros(const Shape& sizes, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor ones(const Shape& sizes, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor full(const Shape& sizes, double value, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor arange(int64_t end, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor arange(double start, double end, double step, DType dtype = DType::Float32, Device device = Device::cpu());
// Uniform [0, 1) and standard normal, from a counter-based generator: the same seed
// gives the same values on every machine and device, element i of the row-major order
// depending only on (seed, i).
Tensor rand(const Shape& sizes, uint64_t seed, DType dtype = DType::Float32, Device device = Device::cpu());
Tensor randn(const Shape& sizes, uint64_t seed, DType dtype = DType::Float32, Device device = Device::cpu());
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes);
template <typename T>
Tensor from_vector(const std::vector<T>& values) { return from_vector(values, {static_cast<int64_t>(values.size())}); }

// ---- shape helpers ----
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);  // negative wraps; error names op
int64_t checked_numel(const Shape& sizes, const char* op);     // error on negative sizes or overflow
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);  // PyTorch's rule
Allocator* allocator_for(Device device);

// Overlap in memory between tensors:
//  internal: Yes when a dim of size > 1 has stride 0; No when strides prove the
//            elements distinct; TooHard otherwise (allowed, as in PyTorch).
//  between a and b: Full when they are the same elements in the same order; Partial
//            when an element of one shares a byte with an element of the other
//            otherwise; No when none does, decided exactly from sizes, strides and
//            offsets, so interleaved disjoint views (x[..., 0::2] and x[..., 1::2])
//            are No; TooHard when the search gives up (Note [Overlap from strides] in
//            tensor.cpp). PyTorch answers TooHard for any non-dense pair and Partial
//            for dense pairs whose byte ranges intersect.
enum class MemOverlap : uint8_t { No, Yes, TooHard };
enum class MemOverlapStatus : uint8_t { Full, Partial, No, TooHard };
MemOverlap has_internal_overlap(const Tensor& t);
MemOverlapStatus get_overlap_status(const Tensor& a, const Tensor& b);
// sb::Error unless out and in are disjoint in memory (get_overlap_status No); the
// message names op, in_name and both tensors' sizes, strides and offsets.
void check_disjoint(const char* op, const Tensor& out, const Tensor& in, const char* in_name);

}  // namespace sb
