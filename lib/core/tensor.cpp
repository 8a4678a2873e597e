// tensor.cpp — Tensor metadata, views, factories and element access.
//
// Every view checks its arguments first (one SB_CHECK per precondition), then
// builds a new Tensor over the same storage: no tensor data is touched.
#include "stridebench/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "core/convert.h"
#include "copy/copy.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

// ---------------------------------------------------------------- shape helpers

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1
  SB_CHECK(dim >= -n && dim < n, op, ": dimension ", dim, " out of range for a ", ndim,
           "-D tensor (expected in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

int64_t checked_numel(const Shape& sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) SB_CHECK(s >= 0, op, ": negative size in sizes ", sizes);
  for (int64_t s : sizes) {
    SB_CHECK(!__builtin_mul_overflow(n, s, &n), op, ": sizes ", sizes,
             " overflow: the element count does not fit in int64");
  }
  return n;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SB_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
             " are not broadcastable (size ", da, " vs ", db, " at dimension ", i, " of the broadcast shape)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Allocator* allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
#ifdef SB_WITH_CUDA
  return cuda::allocator(device.index);
#else
  SB_CHECK(false, "device ", device, ": stridebench was built without CUDA (meson option cuda)");
  return nullptr;
#endif
}

// ---------------------------------------------------------------- Tensor basics

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t storage_offset, DType dtype)
    : storage_(std::move(storage)), sizes_(std::move(sizes)), strides_(std::move(strides)),
      offset_(storage_offset), dtype_(dtype) {
  SB_INTERNAL_ASSERT(sizes_.size() == strides_.size(), "sizes ", sizes_, " strides ", strides_);
  recompute_numel();
}

void Tensor::recompute_numel() {
  numel_ = 1;
  for (int64_t s : sizes_) numel_ *= s;
}

int64_t Tensor::size(int64_t d) const { return sizes_[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides_[wrap_dim(d, dim(), "stride")]; }
Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

void* Tensor::data_ptr() const {
  SB_CHECK(defined(), "data_ptr: undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

std::string Tensor::str() const {
  std::ostringstream os;
  os << "Tensor(sizes=" << sizes_ << ", strides=" << strides_ << ", offset=" << offset_ << ", dtype=" << dtype_
     << ", device=" << device() << ")";
  return os.str();
}

// ---------------------------------------------------------------- views

namespace {

// PyTorch's computeStride: strides that let `oldshape`/`oldstride` be seen as
// `newshape` without a copy, or nullopt.
std::optional<Shape> compute_view_strides(const Shape& oldshape, const Shape& oldstride, const Shape& newshape) {
  Shape newstride(newshape.size());
  if (oldshape.empty()) {
    std::fill(newstride.begin(), newstride.end(), 1);
    return newstride;
  }
  int64_t numel = 1;
  for (int64_t s : oldshape) numel *= s;
  if (numel == 0 && oldshape == newshape) return oldstride;
  if (numel == 0) return contiguous_strides(newshape);
  int64_t view_d = static_cast<int64_t>(newshape.size()) - 1;
  int64_t chunk_base_stride = oldstride.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(oldshape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= oldshape[tensor_d];
    if (tensor_d == 0 ||
        (oldshape[tensor_d - 1] != 1 && oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
        newstride[view_d] = view_numel * chunk_base_stride;
        view_numel *= newshape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return newstride;
}

// Resolves one -1 in `shape` against numel.
Shape infer_size(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      SB_CHECK(infer < 0, op, ": only one dimension can be -1, got shape ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      SB_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " at dimension ", i, " of shape ", shape);
      SB_CHECK(!__builtin_mul_overflow(known, shape[i], &known), op, ": shape ", shape, " overflows int64");
    }
  }
  if (infer >= 0) {
    SB_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for input of ", numel,
             " elements");
    out[infer] = numel / known;
  } else {
    SB_CHECK(known == numel, op, ": shape ", shape, " is invalid for input of ", numel, " elements");
  }
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& sizes) const {
  const Shape shape = infer_size(sizes, numel_, "view");
  auto st = compute_view_strides(sizes_, strides_, shape);
  SB_CHECK(st.has_value(), "view: size ", shape, " is not compatible with the input's sizes ", sizes_,
           " and strides ", strides_,
           " (at least one dimension spans across two contiguous subspaces); use reshape instead");
  return Tensor(storage_, shape, *st, offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& sizes) const {
  const Shape shape = infer_size(sizes, numel_, "reshape");
  if (auto st = compute_view_strides(sizes_, strides_, shape)) return Tensor(storage_, shape, *st, offset_, dtype_);
  return clone(MemoryFormat::Contiguous).view(shape);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  Shape sz = sizes_, st = strides_;
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return Tensor(storage_, sz, st, offset_, dtype_);
}

Tensor Tensor::t() const {
  SB_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, got ", dim(), "-D sizes ", sizes_);
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  SB_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: number of dims in ", dims,
           " does not match the tensor's ", dim(), " dims (sizes ", sizes_, ")");
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    SB_CHECK(!seen[d], "permute: dims ", dims, " is not a permutation (dim ", d, " repeats)");
    seen[d] = true;
    sz[i] = sizes_[d];
    st[i] = strides_[d];
  }
  return Tensor(storage_, sz, st, offset_, dtype_);
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt, int64_t step) const {
  SB_CHECK(dim() > 0, "slice: cannot slice a 0-D tensor");
  d = wrap_dim(d, dim(), "slice");
  SB_CHECK(step > 0, "slice: step must be positive, got ", step, " (dim ", d, ", sizes ", sizes_, ")");
  const int64_t n = sizes_[d];
  int64_t start = start_opt.value_or(0), end = end_opt.value_or(n);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = sizes_, st = strides_;
  sz[d] = (end - start + step - 1) / step;
  st[d] = strides_[d] * step;
  return Tensor(storage_, sz, st, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  SB_CHECK(dim() > 0, "select: cannot select on a 0-D tensor");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = sizes_[d];
  SB_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dimension ", d, " of size ", n,
           " (sizes ", sizes_, ")");
  if (index < 0) index += n;
  Shape sz = sizes_, st = strides_;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, sz, st, offset_ + index * strides_[d], dtype_);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  SB_CHECK(dim() > 0, "narrow: cannot narrow a 0-D tensor");
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = sizes_[d];
  SB_CHECK(start >= -n && start <= n, "narrow: start ", start, " out of range for dimension ", d, " of size ", n);
  if (start < 0) start += n;
  SB_CHECK(length >= 0, "narrow: length ", length, " must be >= 0 (dimension ", d, " of size ", n, ")");
  SB_CHECK(start + length <= n, "narrow: start (", start, ") + length (", length, ") exceeds dimension ", d,
           " of size ", n);
  return slice(d, start, start + length, 1);
}

Tensor Tensor::expand(const Shape& sizes) const {
  SB_CHECK(sizes.size() >= sizes_.size(), "expand: the number of sizes provided (", sizes.size(),
           ") must be >= the number of dimensions of the tensor (", dim(), "); sizes ", sizes, ", tensor sizes ",
           sizes_);
  const size_t lead = sizes.size() - sizes_.size();
  Shape sz(sizes.size()), st(sizes.size());
  // innermost first: a new leading dim of size 1 takes the stride a contiguous tensor
  // would give it (the next dim's size x stride, 0 after no dim), as PyTorch's
  // inferExpandGeometry does; a new dim of any other size is broadcast (stride 0)
  for (size_t i = sizes.size(); i-- > 0;) {
    if (i < lead) {
      SB_CHECK(sizes[i] >= 0, "expand: new leading size ", sizes[i], " at dimension ", i, " must be >= 0 (sizes ",
               sizes, ")");
      sz[i] = sizes[i];
      st[i] = sizes[i] == 1 && i + 1 < sizes.size() ? sz[i + 1] * st[i + 1] : 0;
      continue;
    }
    const int64_t have = sizes_[i - lead], want = sizes[i];
    if (want == -1 || want == have) {
      sz[i] = have;
      st[i] = strides_[i - lead];
    } else {
      SB_CHECK(have == 1, "expand: the expanded size (", want, ") must match the existing size (", have,
               ") at non-singleton dimension ", i, "; target sizes ", sizes, ", tensor sizes ", sizes_);
      SB_CHECK(want >= 0, "expand: invalid size ", want, " at dimension ", i, " (sizes ", sizes, ")");
      sz[i] = want;
      st[i] = 0;
    }
  }
  checked_numel(sz, "expand");
  return Tensor(storage_, sz, st, offset_, dtype_);
}

Tensor Tensor::squeeze() const {
  Shape sz, st;
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (sizes_[i] != 1) {
      sz.push_back(sizes_[i]);
      st.push_back(strides_[i]);
    }
  return Tensor(storage_, sz, st, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) {
    wrap_dim(d, 0, "squeeze");
    return *this;
  }
  d = wrap_dim(d, dim(), "squeeze");
  if (sizes_[d] != 1) return *this;
  Shape sz = sizes_, st = strides_;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, sz, st, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  SB_CHECK(d >= -(dim() + 1) && d <= dim(), "unsqueeze: dimension ", d, " out of range for a ", dim(),
           "-D tensor (unsqueeze takes [", -(dim() + 1), ", ", dim(), "])");
  if (d < 0) d += dim() + 1;
  Shape sz = sizes_, st = strides_;
  const int64_t new_stride = d >= dim() ? 1 : sizes_[d] * strides_[d];
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return Tensor(storage_, sz, st, offset_, dtype_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  SB_CHECK(start_dim <= end_dim, "flatten: start_dim (", start_dim, ") must be <= end_dim (", end_dim, ")");
  if (start_dim == end_dim) return *this;
  Shape shape(sizes_.begin(), sizes_.begin() + start_dim);
  int64_t n = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) n *= sizes_[i];
  shape.push_back(n);
  shape.insert(shape.end(), sizes_.begin() + end_dim + 1, sizes_.end());
  return reshape(shape);
}

Tensor Tensor::unflatten(int64_t d, const Shape& sizes) const {
  d = wrap_dim(d, dim(), "unflatten");
  SB_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  const Shape inner = infer_size(sizes, sizes_[d], "unflatten");
  Shape shape(sizes_.begin(), sizes_.begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), sizes_.begin() + d + 1, sizes_.end());
  return view(shape);
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> storage_offset) const {
  SB_CHECK(sizes.size() == strides.size(), "as_strided: sizes ", sizes, " and strides ", strides,
           " have different lengths");
  const int64_t off = storage_offset.value_or(offset_);
  SB_CHECK(off >= 0, "as_strided: negative storage offset ", off);
  for (int64_t s : strides) SB_CHECK(s >= 0, "as_strided: negative strides are not supported, got ", strides);
  const int64_t n = checked_numel(sizes, "as_strided");
  const int64_t storage_elems = static_cast<int64_t>(storage_->nbytes() / element_size());
  if (n > 0) {
    int64_t last = off;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t span = 0;
      SB_CHECK(!__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) && !__builtin_add_overflow(last, span, &last),
               "as_strided: sizes ", sizes, " with strides ", strides, " overflow int64");
    }
    SB_CHECK(last < storage_elems, "as_strided: sizes ", sizes, ", strides ", strides, " and offset ", off,
             " reach element ", last, ", outside the storage of ", storage_elems, " elements");
  } else {
    SB_CHECK(off <= storage_elems, "as_strided: offset ", off, " is outside the storage of ", storage_elems,
             " elements");
  }
  return Tensor(storage_, sizes, strides, off, dtype_);
}

// ---------------------------------------------------------------- layout

bool Tensor::is_contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::ChannelsLast) return is_channels_last_contiguous_strides(sizes_, strides_);
  SB_CHECK(format == MemoryFormat::Contiguous, "is_contiguous: memory format ", format, " is not a layout");
  return is_contiguous_strides(sizes_, strides_);
}

bool Tensor::is_non_overlapping_and_dense() const { return sb::is_non_overlapping_and_dense(sizes_, strides_); }

MemoryFormat Tensor::suggest_memory_format() const {
  if (dim() == 4 && is_channels_last_like_strides(sizes_, strides_)) return MemoryFormat::ChannelsLast;
  return MemoryFormat::Contiguous;
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Preserve) {  // PyTorch: the tensor itself when contiguous, else an error
    SB_CHECK(is_contiguous(), "contiguous: memory format Preserve is not a layout to copy into; this tensor (sizes ",
             sizes_, ", strides ", strides_, ") is not contiguous: name Contiguous or ChannelsLast");
    return *this;
  }
  if (format == MemoryFormat::ChannelsLast)
    SB_CHECK(dim() == 4, "contiguous: ChannelsLast needs a 4-D tensor, got sizes ", sizes_);
  if (is_contiguous(format)) return *this;
  return clone(format);
}

Tensor Tensor::clone(MemoryFormat format) const {
  Tensor out = empty_like(*this, format);
  out.copy_(*this);
  return out;
}

namespace {
// MemoryFormat::Preserve's strides for a new tensor like t (PyTorch's): t's own if dense,
// else dense ones in the same order of dims. empty_like, clone() and to() all take them.
Shape preserved_strides(const Tensor& t) {
  return t.is_non_overlapping_and_dense() ? t.strides() : dense_strides_like(t.sizes(), t.strides());
}
}  // namespace

Tensor empty_like(const Tensor& t, MemoryFormat format) {
  if (format == MemoryFormat::Preserve) return empty_strided(t.sizes(), preserved_strides(t), t.dtype(), t.device());
  return empty(t.sizes(), t.dtype(), t.device(), format);
}

// ---------------------------------------------------------------- copies

Tensor& Tensor::copy_(const Tensor& src) {
  SB_CHECK(defined() && src.defined(), "copy_: undefined tensor");
  SB_CHECK(broadcast_shapes(src.sizes(), sizes_, "copy_") == sizes_, "copy_: source sizes ", src.sizes(),
           " cannot be broadcast to destination sizes ", sizes_);
  SB_CHECK(has_internal_overlap(*this) != MemOverlap::Yes, "copy_: more than one element of the destination (sizes ",
           sizes_, ", strides ", strides_, ") refers to a single memory location; clone() it first");
  // The overlap rule on every device (Note [Overlap from strides]): the kernels, CPU and
  // CUDA alike, assume a source that is exactly the destination or disjoint from it.
  const MemOverlapStatus ov = get_overlap_status(*this, src);
  if (ov == MemOverlapStatus::Full) return *this;  // a.copy_(a): nothing to do
  SB_CHECK(ov != MemOverlapStatus::Partial, "copy_: the source (sizes ", src.sizes(), ", strides ", src.strides(),
           ", offset ", src.storage_offset(), ") shares elements with the destination (sizes ", sizes_, ", strides ",
           strides_, ", offset ", offset_, ") at other positions; clone() the source first");
  copy_kernel(*this, ov == MemOverlapStatus::TooHard ? src.clone() : src);
  return *this;
}

// to() keeps the layout as PyTorch's MemoryFormat::Preserve does, as empty_like and
// clone() do (preserved_strides): a transposed tensor stays transposed, a stepped one
// becomes dense in the same order of dims, not its suggested memory format.
Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty_strided(sizes_, preserved_strides(*this), dtype, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Tensor out = empty_strided(sizes_, preserved_strides(*this), dtype_, dev);
  out.copy_(*this);
  return out;
}

Tensor& Tensor::fill_(double value) {
  SB_CHECK(defined(), "fill_: undefined tensor");
  SB_CHECK(has_internal_overlap(*this) != MemOverlap::Yes, "fill_: more than one element of the tensor (sizes ",
           sizes_, ", strides ", strides_, ") refers to a single memory location");
  fill_kernel(*this, value);
  return *this;
}

// ---------------------------------------------------------------- element access

namespace {
int64_t element_offset(const Tensor& t, const Shape& index, const char* op) {
  SB_CHECK(t.device().is_cpu(), op, ": element access needs a CPU tensor, this one is on ", t.device());
  SB_CHECK(static_cast<int64_t>(index.size()) == t.dim(), op, ": index ", index, " has ", index.size(),
           " entries for a ", t.dim(), "-D tensor");
  int64_t off = t.storage_offset();
  for (size_t i = 0; i < index.size(); ++i) {
    SB_CHECK(index[i] >= 0 && index[i] < t.sizes()[i], op, ": index ", index, " out of range for sizes ", t.sizes());
    off += index[i] * t.strides()[i];
  }
  return off;
}
}  // namespace

double Tensor::get(const Shape& index) const {
  const int64_t off = element_offset(*this, index, "get");
  double v = 0;
  SB_DISPATCH_ALL(dtype_, "get", v = convert<double>(static_cast<const scalar_t*>(storage_->data())[off]));
  return v;
}

void Tensor::set(const Shape& index, double value) {
  const int64_t off = element_offset(*this, index, "set");
  SB_DISPATCH_ALL(dtype_, "set", static_cast<scalar_t*>(storage_->data())[off] = convert<scalar_t>(value));
}

double Tensor::item() const {
  SB_CHECK(numel_ == 1, "item: a tensor with ", numel_, " elements (sizes ", sizes_, ") cannot be a scalar");
  return to_vector()[0];
}

std::vector<double> Tensor::to_vector() const {
  if (!device().is_cpu()) return to(Device::cpu()).to_vector();
  Tensor c = to(DType::Float64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + numel_);
}

// ---------------------------------------------------------------- factories

Tensor empty(const Shape& sizes, DType dtype, Device device, MemoryFormat format) {
  SB_CHECK(format != MemoryFormat::Preserve, "empty: memory format Preserve is only for clone/empty_like");
  if (format == MemoryFormat::ChannelsLast)
    SB_CHECK(sizes.size() == 4, "empty: ChannelsLast needs 4-D (NCHW) sizes, got ", sizes);
  checked_numel(sizes, "empty");  // before strides are computed: they would overflow too
  return empty_strided(sizes, strides_for(sizes, format), dtype, device);
}

Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype, Device device) {
  SB_CHECK(sizes.size() == strides.size(), "empty_strided: sizes ", sizes, " and strides ", strides,
           " have different lengths");
  const int64_t n = checked_numel(sizes, "empty_strided");
  for (int64_t s : strides) SB_CHECK(s >= 0, "empty_strided: negative strides are not supported, got ", strides);
  int64_t extent = 0;  // elements the strides reach
  if (n > 0) {
    extent = 1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t span;
      SB_CHECK(!__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) && !__builtin_add_overflow(extent, span, &extent),
               "empty_strided: sizes ", sizes, " with strides ", strides, " overflow int64");
    }
  }
  int64_t nbytes;
  SB_CHECK(!__builtin_mul_overflow(extent, static_cast<int64_t>(dtype_size(dtype)), &nbytes), "empty_strided: sizes ",
           sizes, " of ", dtype, " overflow: the byte count does not fit in int64");
  auto storage = std::make_shared<Storage>(static_cast<size_t>(nbytes), allocator_for(device));
  return Tensor(std::move(storage), sizes, strides, 0, dtype);
}

Tensor zeros(const Shape& sizes, DType dtype, Device device) { return full(sizes, 0.0, dtype, device); }
Tensor ones(const Shape& sizes, DType dtype, Device device) { return full(sizes, 1.0, dtype, device); }

Tensor full(const Shape& sizes, double value, DType dtype, Device device) {
  Tensor t = empty(sizes, dtype, device);
  t.fill_(value);
  return t;
}

Tensor arange(int64_t end, DType dtype, Device device) { return arange(0.0, static_cast<double>(end), 1.0, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  SB_CHECK(step != 0, "arange: step must be nonzero");
  SB_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange: upper bound ", end,
           " and lower bound ", start, " inconsistent with step sign ", step);
  const auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  return from_vector(v).to(dtype).to(device);
}

namespace {
// splitmix64 of (seed, counter): a counter-based generator, so element i depends only
// on (seed, i) and a kernel may fill any element in any order.
inline uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline double uniform01(uint64_t seed, uint64_t i) { return static_cast<double>(mix(seed, i) >> 11) * 0x1.0p-53; }
}  // namespace

Tensor rand(const Shape& sizes, uint64_t seed, DType dtype, Device device) {
  const int64_t n = checked_numel(sizes, "rand");
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = uniform01(seed, static_cast<uint64_t>(i));
  // keep values < 1 after rounding: the largest value below 1 of float16 (and below it,
  // float32's), and of bfloat16
  if (dtype == DType::Float32 || dtype == DType::Float16)
    for (auto& x : v) x = std::min(x, 0.99951171875);
  if (dtype == DType::BFloat16)
    for (auto& x : v) x = std::min(x, 0.99609375);
  return from_vector(v, sizes).to(dtype).to(device);
}

Tensor randn(const Shape& sizes, uint64_t seed, DType dtype, Device device) {
  const int64_t n = checked_numel(sizes, "randn");
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {  // Box-Muller on two counter draws
    const double u1 = 1.0 - uniform01(seed, 2 * static_cast<uint64_t>(i));
    const double u2 = uniform01(seed, 2 * static_cast<uint64_t>(i) + 1);
    v[i] = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  return from_vector(v, sizes).to(dtype).to(device);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes) {
  const int64_t n = checked_numel(sizes, "from_vector");
  SB_CHECK(n == static_cast<int64_t>(values.size()), "from_vector: ", values.size(), " values do not fill sizes ",
           sizes, " (", n, " elements)");
  Tensor t = empty(sizes, DTypeOf<T>::value, Device::cpu());
  if (n > 0) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(T));
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&);
template Tensor from_vector<Half>(const std::vector<Half>&, const Shape&);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&);
template Tensor from_vector<int8_t>(const std::vector<int8_t>&, const Shape&);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&);

}  // namespace sb
