// copy.cpp — the strided copy and fill (CPU), dispatching CUDA tensors to lib/cuda.
//
// copy_generic: an N-D odometer over dst's sizes; the innermost dim is a plain
// strided loop. src strides are aligned to dst's dims with 0 for broadcast dims.
// One read and one write per element.
#include "ops/copy.h"

#include <cstring>

#include "core/convert.h"

#ifdef SB_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace sb {

namespace {

// src strides seen through dst's dims (broadcast dims get stride 0).
Shape broadcast_strides(const Tensor& src, const Shape& dst_sizes) {
  Shape st(dst_sizes.size(), 0);
  const size_t lead = dst_sizes.size() - src.sizes().size();
  for (size_t i = 0; i < src.sizes().size(); ++i)
    st[lead + i] = src.sizes()[i] == 1 ? 0 : src.strides()[i];
  return st;
}

template <typename D, typename S>
void copy_loop(const Tensor& dst, const Tensor& src) {
  const Shape& sizes = dst.sizes();
  const Shape& dst_st = dst.strides();
  const Shape sst = broadcast_strides(src, sizes);
  const int64_t nd = dst.dim();
  D* d = static_cast<D*>(dst.data_ptr());
  const S* s = static_cast<const S*>(src.data_ptr());
  if (nd == 0) {
    d[0] = convert<D>(s[0]);
    return;
  }
  const int64_t inner = sizes[nd - 1], dsi = dst_st[nd - 1], ssi = sst[nd - 1];
  Shape idx(nd, 0);
  const int64_t outer = dst.numel() / inner;
  int64_t doff = 0, soff = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) d[doff + i * dsi] = convert<D>(s[soff + i * ssi]);
    for (int64_t k = nd - 2; k >= 0; --k) {  // odometer step over the outer dims
      if (++idx[k] < sizes[k]) {
        doff += dst_st[k];
        soff += sst[k];
        break;
      }
      doff -= (sizes[k] - 1) * dst_st[k];
      soff -= (sizes[k] - 1) * sst[k];
      idx[k] = 0;
    }
  }
}

template <typename T>
void fill_loop(const Tensor& t, T v) {
  const Shape& sizes = t.sizes();
  const Shape& st = t.strides();
  const int64_t nd = t.dim();
  T* d = static_cast<T*>(t.data_ptr());
  if (nd == 0) {
    d[0] = v;
    return;
  }
  const int64_t inner = sizes[nd - 1], si = st[nd - 1];
  Shape idx(nd, 0);
  const int64_t outer = t.numel() / inner;
  int64_t off = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) d[off + i * si] = v;
    for (int64_t k = nd - 2; k >= 0; --k) {
      if (++idx[k] < sizes[k]) {
        off += st[k];
        break;
      }
      off -= (sizes[k] - 1) * st[k];
      idx[k] = 0;
    }
  }
}

}  // namespace

void copy_generic(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  SB_DISPATCH_ALL(dst.dtype(), "copy_", {
    using D = scalar_t;
    SB_DISPATCH_ALL(src.dtype(), "copy_", (copy_loop<D, scalar_t>(dst, src)));
  });
}

void copy_kernel(const Tensor& dst, const Tensor& src) {
  if (!dst.device().is_cpu() || !src.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    cuda::copy(dst, src);
    return;
#else
    SB_CHECK(false, "copy_: ", src.device(), " -> ", dst.device(), " needs CUDA, and stridebench was built without it");
#endif
  }
  copy_generic(dst, src);
}

void fill_kernel(const Tensor& t, double value) {
  if (t.numel() == 0) return;
  if (!t.device().is_cpu()) {
#ifdef SB_WITH_CUDA
    cuda::fill(t, value);
    return;
#else
    SB_CHECK(false, "fill_: device ", t.device(), " needs CUDA, and stridebench was built without it");
#endif
  }
  // a 0-d view of a stack value as the broadcast source: fill allocates nothing
  SB_DISPATCH_ALL(t.dtype(), "fill_", {
    const scalar_t v = convert<scalar_t>(value);
    fill_loop<scalar_t>(t, v);
  });
}

}  // namespace sb
