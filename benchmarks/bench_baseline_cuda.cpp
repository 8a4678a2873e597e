// bench_baseline_cuda.cpp — the GPU's own ceilings, measured in the same run as the rows they
// bound: device-to-device copy bandwidth (memory-bound rows) and cuBLAS GEMM peak
// (compute-bound rows), and the fixed cost of one launch. Rows of the `baseline` family
// with device:cuda:0.
//
//   baseline/op:overhead/.../shape:1   one launch (a 1-element add_) between two events
//
// Every row is timed as the rows it bounds are (time_gpu_loop: batched event intervals,
// sampled until its noise is measured), the overhead row one launch per interval.
//
//   baseline/op:d2d_copy/.../dtype:f32/shape:<n>   one cudaMemcpy (Tensor::copy_ of two
//       contiguous tensors); bytes = 2 n 4 (read + write), for reference beside
//   baseline/op:read|copy|scale|add|triad/.../dtype:f32/shape:<n>   STREAM's kernels
//       (Note [GPU stream kernels]): the ceilings of the memory-bound rows, each row
//       held to the best of its own read:write mix and regime (docs/BENCHMARKS.md),
//       at an L2 size and two DRAM sizes (nominal and reachable figures per GPU:
//       docs/notes/cuda.md).
//   baseline/op:gemm_peak/.../dtype:f32|tf32|f16|bf16|i8/shape:MxNxK   cuBLAS on square
//       random row-major operands (int8: TN); flop = 2 M N K. fp32 runs without tensor
//       cores, tf32 is float32 with set_allow_tf32, fp16/bf16/int8 dense tensor cores
//       (the nominal peaks per GPU: docs/notes/cuda.md).
#include <cmath>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_bench_common.h"

namespace sb::bench {
namespace {

void bm_d2d(benchmark::State& state, int64_t n) {
  SB_REQUIRE_DEVICE(state);
  Tensor a = ones({n}, DType::Float32, Device::cuda(0));
  Tensor b = zeros({n}, DType::Float32, Device::cuda(0));
  const int64_t bytes = 2 * n * 4;
  time_gpu_loop(state, [&] { b.copy_(a); });
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetLabel(regime_label(bytes));
}

// STREAM's kernels on n floats (Note [GPU stream kernels] in lib/cuda/stream.cu): read
// (n floats read), copy and scale (read n, write n), add and triad (read 2n, write n).
void bm_stream(benchmark::State& state, cuda::StreamOp op, int64_t n) {
  SB_REQUIRE_DEVICE(state);
  const Device g = Device::cuda(0);
  const Tensor a = ones({n}, DType::Float32, g), b = full({n}, 2.0, DType::Float32, g);
  Tensor c = zeros({op == cuda::StreamOp::Read ? std::max<int64_t>(n, cuda::stream_blocks()) : n}, DType::Float32, g);
  const int64_t arrays = op == cuda::StreamOp::Read ? 1 : op == cuda::StreamOp::Copy || op == cuda::StreamOp::Scale ? 2 : 3;
  const int64_t bytes = arrays * n * 4;
  time_gpu_loop(state, [&] { cuda::stream(op, c, a, b, 0.5); });
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetLabel(regime_label(bytes));
}

// A random m x m operand on the device: uniform in [-1, 1) for floating dtypes, in
// [-64, 64) for int8 (constant operands would flatter the peak), from a xorshift on the
// host (about a second for 8192^2, where the per-element rand() takes many), made once
// per (dtype, size, seed) and kept for the binary's later repetitions.
Tensor random_operand(int64_t m, DType dt, uint64_t seed) {
  static std::map<std::tuple<int, int64_t, uint64_t>, Tensor> cache;
  Tensor& t = cache[{static_cast<int>(dt), m, seed}];
  if (t.defined()) return t;
  std::vector<float> v(static_cast<size_t>(m * m));
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (float& e : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float u = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    e = dt == DType::Int8 ? std::floor(128 * u) - 64 : 2 * u - 1;
  }
  t = from_vector(v, {m, m}).to(dt).to(Device::cuda(0));
  return t;
}

void bm_gemm(benchmark::State& state, DType dt, bool tf32, int64_t m) {
  SB_REQUIRE_DEVICE(state);
  const cuda::Tf32Guard tf32_scope(tf32);
  const Device g = Device::cuda(0);
  // int8: cuBLAS's assured int8 form is TN (matmul.cu): b is the transposed view of a
  // row-major [N, K] matrix, as linear(x, w) gives it
  const Tensor a = random_operand(m, dt, 1);
  const Tensor b = dt == DType::Int8 ? random_operand(m, dt, 2).t() : random_operand(m, dt, 2);
  Tensor c = empty({m, m}, dt == DType::Int8 ? DType::Int32 : dt, g);
  cuda::matmul(c, a, b);  // warm-up: cuBLAS handle, heuristics
  time_gpu_loop(state, [&] { cuda::matmul(c, a, b); });
  const double flop = 2.0 * static_cast<double>(m) * m * m;
  state.counters["flop"] = flop;
  state.counters["flops_per_second"] = benchmark::Counter(flop, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes"] = static_cast<double>(3 * m * m * dtype_size(dt));
}

// One launch timed alone between two events: the fixed cost that Note [Batched GPU
// timing] keeps out of the other rows (a 1-element add_, its kernel a few instructions).
void bm_overhead(benchmark::State& state) {
  SB_REQUIRE_DEVICE(state);
  Tensor a = ones({1}, DType::Float32, Device::cuda(0));
  time_gpu_loop(state, [&] { a.add_(1.0); }, -1, /*batched=*/false);
  state.counters["bytes"] = 8;
}

const bool registered = [] {
  add_gpu_row("baseline/op:overhead/impl:ours/device:cuda:0/dtype:f32/shape:1", bm_overhead);
  for (int64_t n : {int64_t{1} << 20, int64_t{64} << 20, int64_t{256} << 20}) {
    const std::string name = "baseline/op:d2d_copy/impl:ours/device:cuda:0/dtype:f32/shape:" + std::to_string(n);
    add_gpu_row(name, [n](benchmark::State& st) { bm_d2d(st, n); });
  }
  // The ceilings per read:write mix: two L2 sizes, 512 Ki floats (2 MiB an array) and
  // 1.5 Mi (6 MiB an array: an add's three fill 18 MiB, under half the L2 of an A100,
  // H100 or H200, so every mix stays in the L2 regime), whose per-call fixed cost weighs
  // a third as much as at 2 MiB, and 64 Mi (256 MiB) and 256 Mi (1 GiB) in DRAM. An L2
  // row is held to the size nearest its own bytes (pick_ceiling in
  // scripts/stridebench/results.py): with 2 MiB alone, the ceiling of a 25 MB row was
  // mostly a launch's (docs/notes/cuda.md).
  const std::pair<cuda::StreamOp, const char*> stream_ops[] = {{cuda::StreamOp::Read, "read"},
                                                               {cuda::StreamOp::Copy, "copy"},
                                                               {cuda::StreamOp::Scale, "scale"},
                                                               {cuda::StreamOp::Add, "add"},
                                                               {cuda::StreamOp::Triad, "triad"}};
  for (const auto& [op, key] : stream_ops)
    for (int64_t n : {int64_t{512} << 10, int64_t{1536} << 10, int64_t{64} << 20, int64_t{256} << 20}) {
      const std::string name =
          std::string("baseline/op:") + key + "/impl:ours/device:cuda:0/dtype:f32/shape:" + std::to_string(n);
      const cuda::StreamOp o = op;
      add_gpu_row(name, [o, n](benchmark::State& st) { bm_stream(st, o, n); });
    }
  // The read at 64 MiB, the size of a 4096 x 4096 float32 reduction: not a ceiling (a
  // DRAM row takes the largest size's), the rate our read kernel itself reaches there,
  // its fixed cost a call included (Note [Last split finishes] in lib/reduce/reduce.cu).
  add_gpu_row("baseline/op:read/impl:ours/device:cuda:0/dtype:f32/shape:" + std::to_string(int64_t{16} << 20),
              [](benchmark::State& st) { bm_stream(st, cuda::StreamOp::Read, int64_t{16} << 20); });
  struct Type {
    DType dt;
    bool tf32;
    const char* key;
  };
  const Type types[] = {{DType::Float32, false, "f32"}, {DType::Float32, true, "tf32"}, {DType::Float16, false, "f16"},
                        {DType::BFloat16, false, "bf16"}, {DType::Int8, false, "i8"}};
  for (const Type& ty : types) {
    const DType dt = ty.dt;
    const bool tf32 = ty.tf32;
    const char* const key = ty.key;
    for (int64_t m : {int64_t{4096}, int64_t{8192}}) {
      const std::string s = std::to_string(m);
      const std::string name = std::string("baseline/op:gemm_peak/impl:ours/device:cuda:0/dtype:") + key +
                               "/shape:" + s + "x" + s + "x" + s;
      add_gpu_row(name, [=](benchmark::State& st) { bm_gemm(st, dt, tf32, m); });
    }
  }
  return true;
}();

}  // namespace
}  // namespace sb::bench

namespace sb::bench {
// The shared main() (bench_common.cpp) adds the machine context, GPU included; the runs
// above register themselves at static initialisation.
const char* const kFamily = "baseline";
void register_family() {}
}  // namespace sb::bench
