// allocator.cpp — the CUDA device and pinned-host allocators, device queries and the
// error helpers of cuda_check.h. Plain C++ against the CUDA runtime (no kernels).
//
//   caching_allocator(d)  CachingAllocator (stridebench/cuda_allocator.h) over cudaMalloc/cudaFree
//   direct_allocator(d)   cudaMalloc/cudaFree on every call (a cudaMalloc costs ~µs to
//                         ~ms and synchronises the device; that is what caching avoids)
//   pinned_allocator()    CachingAllocator over cudaHostAlloc/cudaFreeHost, device CPU
// Allocators are made on first use and deliberately never destroyed: destructors at
// exit would run after the CUDA runtime has been torn down (PyTorch leaks them too).
#include <cuda_runtime.h>
#include "cuda/cublas_api.h"

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "stridebench/cuda_allocator.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"

namespace sb::cuda {

namespace detail {
void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a sticky-free error so the next call starts clean
  ::sb::detail::throw_error(::sb::detail::str_cat("CUDA error: ", expr, " failed at ", file, ":", line, ": ",
                                                  cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}
void throw_cublas_error(int status, const char* expr, const char* file, int line) {
  ::sb::detail::throw_error(::sb::detail::str_cat(
      "cuBLAS error: ", expr, " failed at ", file, ":", line, ": ",
      ::sb::cuda::cublas_api().cublasGetStatusName(static_cast<cublasStatus_t>(status)), " (",
      ::sb::cuda::cublas_api().cublasGetStatusString(static_cast<cublasStatus_t>(status)), ")"));
}
}  // namespace detail

// ---------------------------------------------------------------- devices

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {  // no driver, no device: not an error here
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }

static void check_device(int device, const char* what) {
  const int n = device_count();
  SB_CHECK(n > 0, what, ": no CUDA device is available (cudaGetDeviceCount found none), asked for cuda:", device);
  SB_CHECK(device >= 0 && device < n, what, ": device cuda:", device, " does not exist (", n, " device(s))");
}

DeviceInfo device_info(int device) {
  check_device(device, "device_info");
  cudaDeviceProp p;
  SB_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceInfo info;
  info.name = p.name;
  info.total_memory = static_cast<int64_t>(p.totalGlobalMem);
  info.sm_count = p.multiProcessorCount;
  info.major = p.major;
  info.minor = p.minor;
  info.l2_bytes = p.l2CacheSize;
  info.memory_bus_bits = p.memoryBusWidth;
  int clock = 0;
  if (cudaDeviceGetAttribute(&clock, cudaDevAttrMemoryClockRate, device) == cudaSuccess) info.memory_clock_khz = clock;
  else cudaGetLastError();
  SB_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  SB_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  return info;
}

void synchronize(int device) {
  check_device(device, "synchronize");
  DeviceGuard g(device);
  SB_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---------------------------------------------------------------- backends

namespace {

// cudaMalloc: nullptr on cudaErrorMemoryAllocation (the caching allocator then frees
// its cache and retries), any other error throws.
class CudaMallocBackend : public MemoryBackend {
 public:
  explicit CudaMallocBackend(int device) : device_(device) {}
  void* malloc(size_t nbytes) override {
    DeviceGuard g(device_);
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // cudaMalloc's OOM is not sticky; clear it anyway
      return nullptr;
    }
    SB_CUDA_CHECK(err);
    return p;
  }
  void free(void* ptr, size_t) override {
    DeviceGuard g(device_);
    SB_CUDA_CHECK(cudaFree(ptr));
  }

 private:
  int device_;
};

class PinnedBackend : public MemoryBackend {
 public:
  void* malloc(size_t nbytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, nbytes, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    SB_CUDA_CHECK(err);
    return p;
  }
  void free(void* ptr, size_t) override { SB_CUDA_CHECK(cudaFreeHost(ptr)); }
};

// cudaMalloc/cudaFree on every call, with the same statistics.
class DirectAllocator : public Allocator {
 public:
  explicit DirectAllocator(int device) : device_(device), name_("cuda_direct:" + std::to_string(device)) {}
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    DeviceGuard g(device_);
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      const AllocatorStats s = stats();
      SB_CHECK(false, name_, ": out of memory allocating ", nbytes, " bytes; allocated ", s.allocated_bytes,
               " bytes in ", s.allocation_count - s.free_count, " blocks");
    }
    SB_CUDA_CHECK(err);
    std::lock_guard<std::mutex> lock(mu_);
    s_.on_system_alloc(static_cast<int64_t>(nbytes));
    s_.on_alloc(static_cast<int64_t>(nbytes), static_cast<int64_t>(nbytes), false);
    return p;
  }
  // Called from Storage's noexcept destructor: a failing cudaFree is reported on
  // stderr (with the device and size) and the block counted as freed, never thrown.
  void deallocate(void* ptr, size_t nbytes) noexcept override {
    if (ptr == nullptr) return;
    int prev = -1;
    const bool switched = cudaGetDevice(&prev) == cudaSuccess && prev != device_ && cudaSetDevice(device_) == cudaSuccess;
    const cudaError_t err = cudaFree(ptr);
    if (switched) cudaSetDevice(prev);
    if (err != cudaSuccess)
      std::fprintf(stderr, "stridebench: %s: cudaFree of %zu bytes failed: %s\n", name_.c_str(), nbytes,
                   cudaGetErrorString(err));
    std::lock_guard<std::mutex> lock(mu_);
    s_.on_free(static_cast<int64_t>(nbytes), static_cast<int64_t>(nbytes));
    s_.on_system_free(static_cast<int64_t>(nbytes));
  }
  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return s_;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu_);
    s_.reset_peaks();
  }
  void empty_cache() override {}
  const char* name() const override { return name_.c_str(); }
  Device device() const override { return Device::cuda(device_); }

 private:
  int device_;
  std::string name_;
  mutable std::mutex mu_;
  AllocatorStats s_;
};

CudaAllocatorKind initial_kind() {
  const char* e = std::getenv("SB_CUDA_ALLOCATOR");
  return (e && std::strcmp(e, "direct") == 0) ? CudaAllocatorKind::Direct : CudaAllocatorKind::Caching;
}
std::atomic<CudaAllocatorKind> g_kind{initial_kind()};

template <typename Make>
Allocator* per_device(std::vector<Allocator*>& table, std::mutex& mu, int device, Make make) {
  std::lock_guard<std::mutex> lock(mu);
  if (table.empty()) table.assign(static_cast<size_t>(device_count()), nullptr);
  Allocator*& a = table[static_cast<size_t>(device)];
  if (!a) a = make();  // never deleted: see the file comment
  return a;
}

}  // namespace

Allocator* caching_allocator(int device) {
  check_device(device, "caching_allocator");
  static std::vector<Allocator*> table;
  static std::mutex mu;
  return per_device(table, mu, device, [&] {
    return new CachingAllocator(std::make_unique<CudaMallocBackend>(device), "cuda_caching:" + std::to_string(device),
                                Device::cuda(device));
  });
}

Allocator* direct_allocator(int device) {
  check_device(device, "direct_allocator");
  static std::vector<Allocator*> table;
  static std::mutex mu;
  return per_device(table, mu, device, [&] { return new DirectAllocator(device); });
}

Allocator* allocator(int device) {
  return g_kind.load() == CudaAllocatorKind::Caching ? caching_allocator(device) : direct_allocator(device);
}

void set_allocator(CudaAllocatorKind kind) { g_kind.store(kind); }
CudaAllocatorKind allocator_kind() { return g_kind.load(); }

Allocator* pinned_allocator() {
  check_device(0, "pinned_allocator");
  static Allocator* a = new CachingAllocator(std::make_unique<PinnedBackend>(), "cuda_pinned", Device::cpu());
  return a;
}

Tensor pinned_empty(const Shape& sizes, DType dtype, MemoryFormat format) {
  SB_CHECK(format != MemoryFormat::Preserve, "pinned_empty: memory format Preserve is only for clone/empty_like");
  if (format == MemoryFormat::ChannelsLast)
    SB_CHECK(sizes.size() == 4, "pinned_empty: ChannelsLast needs 4-D (NCHW) sizes, got ", sizes);
  const int64_t n = checked_numel(sizes, "pinned_empty");
  int64_t nbytes;
  SB_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &nbytes), "pinned_empty: sizes ", sizes,
           " of ", dtype, " overflow int64 bytes");
  auto storage = std::make_shared<Storage>(static_cast<size_t>(nbytes), pinned_allocator());
  return Tensor(std::move(storage), sizes, strides_for(sizes, format), 0, dtype);
}

bool is_pinned(const Tensor& t) {
  return t.defined() && is_available() && t.storage()->allocator() == pinned_allocator();
}

}  // namespace sb::cuda
