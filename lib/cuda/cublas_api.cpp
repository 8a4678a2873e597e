// cublas_api.cpp — Note [cuBLAS loaded on first use] (cublas_api.h).
#include "cuda/cublas_api.h"

#include <dlfcn.h>

#include <string>

#include "stridebench/error.h"

#ifndef SB_CUDA_LIBDIR
#define SB_CUDA_LIBDIR ""
#endif

namespace sb::cuda {

#define SB_STR2(x) #x
#define SB_STR(x) SB_STR2(x)

namespace detail {
void* open_cuda_library(const std::string& soname) {
  void* h = dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (h) return h;
  std::string why = dlerror();
  const std::string dir = SB_CUDA_LIBDIR;
  if (!dir.empty()) {
    const std::string path = dir + "/" + soname;
    h = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (h) return h;
    why += "; " + std::string(dlerror());
  }
  SB_CHECK(false, "cuBLAS: ", soname, " did not load (", why,
           "); a CUDA matmul, linear, conv2d without cuDNN or quantized linear needs it: put its "
           "directory on LD_LIBRARY_PATH");
  return nullptr;
}
}  // namespace detail

namespace {

CublasApi load() {
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  void* lt = detail::open_cuda_library("libcublasLt.so." + major);
  void* blas = detail::open_cuda_library("libcublas.so." + major);
  CublasApi api{};
  auto find = [&](const char* name) {
    void* p = dlsym(blas, name);
    if (!p) p = dlsym(lt, name);
    SB_CHECK(p != nullptr, "cuBLAS: entry point ", name, " not found in libcublas.so.", major,
             " or libcublasLt.so.", major, " (a cuBLAS older than the headers this build used?)");
    return p;
  };
#define SB_CUBLAS_ENTRY(fn) api.fn = reinterpret_cast<decltype(api.fn)>(find(SB_STR(fn)));
#define SB_CUBLAS_ENTRY_AS(fn, ...) SB_CUBLAS_ENTRY(fn)
#include "cuda/cublas_entries.inc"
#undef SB_CUBLAS_ENTRY
#undef SB_CUBLAS_ENTRY_AS
#undef SB_STR
#undef SB_STR2
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

}  // namespace sb::cuda
