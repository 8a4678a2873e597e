// test_util.h — shared test helpers: random shapes, the same values in every layout,
// poisoned outputs, and comparison against a float64 reference with
// atol + rtol * |ref| (printing index, expected and actual on a mismatch).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "stridebench/cpu_features.h"
#include "core/test_hooks.h"
#include "stridebench/parallel.h"
#include "stridebench/tensor.h"
#include "stridebench/elementwise.h"
#include "cases/layout.h"

namespace sb::test {

// Layouts are the builder's (Note [One layout builder] in cases/layout.h); tests use
// the six that apply to any shape.
using cases::Layout;
using cases::layout_name;
std::vector<Layout> all_layouts();  // contiguous, transposed, sliced, expanded, channels_last, offset

// A tensor holding the same logical values as `values` (any layout), on its device, laid
// out as asked by cases::placement, in a poisoned buffer of its own. Expanded holds
// values' first index along the broadcast dims, i.e. layout_values(values, Expanded), not
// `values`. Sliced starts one element into its buffer here (a misaligned strided start;
// the benchmarks' sliced starts at 0).
Tensor with_layout(const Tensor& values, Layout layout);
// values (broadcast dims: their first index) in placement p, on values' device, in a
// poisoned buffer of its own: with_layout's builder.
Tensor with_placement(const Tensor& values, const cases::Placement& p);
// The logical values that with_layout(values, layout) holds, row-major, from plain
// loops over v (values row-major, `sizes` theirs): for Expanded, values' first index
// along each broadcast dim; for every other layout, v itself. References are computed
// from these, so the values themselves need no structure: tests use values random in
// every dim (constant ones along the broadcast dims would hide a kernel that reads the
// wrong index there).
std::vector<double> layout_values(const std::vector<double>& v, const Shape& sizes, Layout layout);
// The same, as a contiguous tensor of values' dtype.
Tensor layout_values(const Tensor& values, Layout layout);

// Fills every element of t's storage with a value no kernel would write: NaN for
// floating dtypes, 0x5A bytes for integers.
void poison(const Tensor& t);

// Random sizes: ndim dims in [0 or 1, max_size]; sizes 0 and 1 appear on purpose.
Shape random_shape(std::mt19937_64& rng, int ndim, int64_t max_size, bool allow_zero = true);

// t's values as float64, row-major over its sizes, read through its sizes, strides and
// offset by plain loops (Tensor::to_vector goes through the library's copy kernels,
// which some tests are testing). all_close reads `actual` with it.
std::vector<double> naive_values(const Tensor& t);

// Compares a tensor with a float64 reference (row-major over its sizes). Returns
// a gtest failure naming the first bad index.
::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected, double atol,
                                     double rtol);
// The same with an absolute tolerance per element, for results whose conditioning varies
// from element to element (normalize: an error in x - mean grows as 1 / std of its row).
::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected,
                                     const std::vector<double>& atol, double rtol);

// Tolerances for float32/float16/bfloat16/float64/integer results of a few operations.
double default_atol(DType t);
double default_rtol(DType t);
// x rounded to bfloat16 (through float32, as the library converts) by arithmetic on the
// value (frexp, a quantum, ties to even): the reference of the library's bit rounding.
double round_to_bf16(double x);

// A thread count and SIMD level to run a kernel under, and for the GEMM the AVX-512
// tile's width (16 or 32, Note [Wide tile]; 0: the design's choice). ModeGuard sets them
// for one scope and restores the previous thread count and tuning and the build's SIMD
// level.
struct Modes {
  int threads;
  SimdLevel simd;
  int tile = 0;
};
class ModeGuard {
 public:
  explicit ModeGuard(const Modes& m) : threads_(get_num_threads()) {
    set_num_threads(m.threads);
    set_simd_level(m.simd);
    if (m.tile) {
      prev_ = cpu_tuning_override();
      tuning_ = cpu_tuning();
      tuning_.gemm_tile_cols = m.tile;
      set_cpu_tuning(&tuning_);
      tile_set_ = true;
    }
  }
  ~ModeGuard() {
    set_num_threads(threads_);
    set_simd_level(compiled_simd_level());
    if (tile_set_) set_cpu_tuning(prev_);
  }
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  int threads_;
  CpuTuning tuning_;
  const CpuTuning* prev_ = nullptr;
  bool tile_set_ = false;
};

// The CPU tuning a test sets for one scope: tuning() starts as cpu_tuning(); set()
// installs it as it stands (again after each change), and the override before the scope
// (or none) is back after it.
class TuningScope {
 public:
  TuningScope() : prev_(cpu_tuning_override()), tuning_(cpu_tuning()) {}
  ~TuningScope() { set_cpu_tuning(prev_); }
  TuningScope(const TuningScope&) = delete;
  TuningScope& operator=(const TuningScope&) = delete;
  CpuTuning& tuning() { return tuning_; }
  void set() { set_cpu_tuning(&tuning_); }

 private:
  const CpuTuning* prev_;
  CpuTuning tuning_;
};

// The modes of `want` whose SIMD level this build has on this CPU; a level left out is
// reported once on stderr (e.g. the AVX-512 kernels on a CPU without AVX-512 VNNI), so
// a run never claims to have tested a path it did not take.
std::vector<Modes> available_modes(std::initializer_list<Modes> want);
// Every level (AVX-512, AVX2, scalar) x 1 and 2 threads, as available.
inline std::vector<Modes> all_kernel_modes() {
  return available_modes({{1, SimdLevel::AVX512}, {2, SimdLevel::AVX512}, {1, SimdLevel::AVX2}, {2, SimdLevel::AVX2},
                          {1, SimdLevel::Scalar}, {2, SimdLevel::Scalar}});
}
// The same for the GEMM's users (matmul, conv, Linear): AVX-512 with either tile, so
// both run on every AVX-512 machine whichever its design takes.
inline std::vector<Modes> gemm_kernel_modes() {
  return available_modes({{1, SimdLevel::AVX512, 16}, {2, SimdLevel::AVX512, 16}, {1, SimdLevel::AVX512, 32},
                          {2, SimdLevel::AVX512, 32}, {1, SimdLevel::AVX2}, {2, SimdLevel::AVX2},
                          {1, SimdLevel::Scalar}, {2, SimdLevel::Scalar}});
}

// The system allocator of dev for one scope when `on` (CPU: aligned_alloc and free;
// CUDA: cudaMalloc and cudaFree), the one the outofplace_system style runs under.
class SystemAllocatorScope {
 public:
  SystemAllocatorScope(Device dev, bool on);
  ~SystemAllocatorScope();
  SystemAllocatorScope(const SystemAllocatorScope&) = delete;
  SystemAllocatorScope& operator=(const SystemAllocatorScope&) = delete;

 private:
  Device dev_;
  bool on_;
  int prev_ = 0;  // the allocator kind it replaced
};

// TF32 tensor-core math (cuda::set_allow_tf32) as `on` for one scope on a CUDA device,
// restored after; nothing on the CPU, which computes float32 as it is.
class Tf32Scope {
 public:
  Tf32Scope(Device dev, bool on);
  ~Tf32Scope();
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool cuda_;
  bool prev_ = false;  // cuda::Tf32Guard's state, kept here so this header needs no CUDA
};

// f() must throw sb::Error whose message contains `part` (a non-fatal failure otherwise).
void expect_msg(const std::function<void()>& f, const std::string& part);

// A float32 tensor in host memory whose storage reports itself as cuda:0, so the
// device checks of every op can be exercised without a GPU (no kernel ever touches it:
// the checks come first).
Tensor fake_cuda(const Shape& sizes);

// The float64 reference of one elementwise op on one element (NaN propagates through
// maximum and minimum, as in PyTorch).
double ref_binary(BinaryOp op, double x, double y);
double ref_unary(UnaryOp op, double x);

// Row-major unravel of a flat index.
Shape unravel(int64_t flat, const Shape& sizes);
// The row-major index after idx (an odometer, last dim fastest; past the end it wraps to
// zeros): walking every element of sizes without an unravel per element.
inline void next_index(Shape& idx, const Shape& sizes) {
  for (size_t d = sizes.size(); d-- > 0;) {
    if (++idx[d] < sizes[d]) return;
    idx[d] = 0;
  }
}

// ---- tests with the device as a parameter (Note [Device-parameterized tests])
//
// Note [Device-parameterized tests]
// A family's tests that hold on every device are TEST_Ps over test_devices(): cpu, and
// cuda:0 in a build with CUDA. The body builds its inputs with on_device() and its
// outputs with poisoned_on(), calls the public op (which dispatches by device) and
// compares with the same float64 reference on every device. A CUDA case skips, with a
// message, where no device is present (SB_SKIP_WITHOUT_DEVICE), so a CI machine without
// a GPU runs the CPU half and reports the CUDA half as skipped. Cases about one
// backend's internals (which CUDA kernel ran, pinned memory) are plain TESTs in the same
// file, named Cuda<Family>.
std::vector<Device> test_devices();
std::string device_param_name(const ::testing::TestParamInfo<Device>& info);  // "cpu", "cuda0"
bool device_present(Device d);
#define SB_SKIP_WITHOUT_DEVICE(dev)                                                               \
  do {                                                                                            \
    if (!::sb::test::device_present(dev)) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount found none)"; \
  } while (0)

// Row-major values in [lo, hi) from seed (whole numbers for integer dtypes); constant
// along Expanded's broadcast dims when `expandable`, so that the Expanded layout can hold
// them.
std::vector<double> random_values(const Shape& sizes, uint64_t seed, DType dt, double lo, double hi,
                                  bool expandable = false);
// v as dtype dt stores it (float16, bfloat16 and integer rounding included): the reference's input.
std::vector<double> stored(const std::vector<double>& v, const Shape& sizes, DType dt);
// v (row-major over sizes) as dt in host memory, contiguous.
Tensor host_tensor(const std::vector<double>& v, const Shape& sizes, DType dt);
// v (row-major over sizes) as dt on dev, in `layout` (with_layout applied on the device).
Tensor on_device(Device dev, const std::vector<double>& v, const Shape& sizes, DType dt, Layout layout);
// A poisoned tensor on dev in `layout` to write a result into; Expanded (unwritable)
// becomes Contiguous.
Tensor poisoned_on(Device dev, const Shape& sizes, DType dt, Layout layout);
// "[2, 3]": gtest messages cannot find sb's operator<< for Shape (a std::vector).
std::string shape_str(const Shape& s);
// The dtypes of the arithmetic ops (elementwise, reductions) on every device.
inline constexpr DType kMathTypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32};
// A few fixed shapes (empty, size-1 dims, odd sizes, 4-D) and `count` random ones.
std::vector<Shape> mixed_shapes(uint64_t seed, int count);

}  // namespace sb::test
