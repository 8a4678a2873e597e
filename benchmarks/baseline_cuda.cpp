// baseline_cuda.cpp — the GPU's own ceilings, measured in the same run as the rows they
// bound: device-to-device copy bandwidth (memory-bound rows) and cuBLAS GEMM peak
// (compute-bound rows). Rows of the `baseline` family with device:cuda:0.
//
//   baseline/op:d2d_copy/.../dtype:f32/shape:<n>   one cudaMemcpy (Tensor::copy_ of two
//       contiguous tensors); bytes = 2 n 4 (read + write). Ceiling: HBM bandwidth
//       (H100 SXM ~3.35 TB/s nominal, ~2.6-3.0 TB/s reachable by a copy).
//   baseline/op:gemm_peak/.../dtype:f32|f16|i8/shape:MxNxK   cuBLAS on square row-major
//       operands; flop = 2 M N K. H100 SXM nominal: 67 TF/s fp32 (no TF32), ~990 TF/s
//       fp16 dense tensor cores, ~1980 TOPS int8. TF32 (set_allow_tf32) has no dtype
//       key in the naming contract yet, so it is not a row here (see docs/NOTES-cuda.md).
#include "cuda_bench_common.h"

namespace sb::bench {
namespace {

void bm_d2d(benchmark::State& state, int64_t n) {
  SB_REQUIRE_DEVICE(state);
  Tensor a = ones({n}, DType::Float32, Device::cuda(0));
  Tensor b = zeros({n}, DType::Float32, Device::cuda(0));
  EventTimer timer;
  for (auto _ : state) {
    timer.start();
    b.copy_(a);
    state.SetIterationTime(timer.stop_seconds());
  }
  const int64_t bytes = 2 * n * 4;
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetLabel(regime_label(bytes));
}

void bm_gemm(benchmark::State& state, DType dt, int64_t m) {
  SB_REQUIRE_DEVICE(state);
  const Device g = Device::cuda(0);
  Tensor a = rand({m, m}, 1, dt == DType::Int8 ? DType::Float32 : dt, g);
  Tensor b = rand({m, m}, 2, dt == DType::Int8 ? DType::Float32 : dt, g);
  if (dt == DType::Int8) {
    a = zeros({m, m}, DType::Int8, g);
    b = zeros({m, m}, DType::Int8, g);
    a.fill_(3);
    b.fill_(-2);
  }
  Tensor c = empty({m, m}, dt == DType::Int8 ? DType::Int32 : dt, g);
  cuda::matmul(c, a, b);  // warm-up: cuBLAS handle, heuristics
  EventTimer timer;
  for (auto _ : state) {
    timer.start();
    cuda::matmul(c, a, b);
    state.SetIterationTime(timer.stop_seconds());
  }
  const double flop = 2.0 * static_cast<double>(m) * m * m;
  state.counters["flop"] = flop;
  state.counters["flops_per_second"] = benchmark::Counter(flop, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes"] = static_cast<double>(3 * m * m * dtype_size(dt));
}

const bool registered = [] {
  for (int64_t n : {int64_t{1} << 20, int64_t{64} << 20, int64_t{256} << 20}) {
    const std::string name = "baseline/op:d2d_copy/impl:ours/device:cuda:0/dtype:f32/shape:" + std::to_string(n);
    benchmark::RegisterBenchmark(name.c_str(), bm_d2d, n)->UseManualTime()->Repetitions(5);
  }
  const std::pair<DType, const char*> types[] = {{DType::Float32, "f32"}, {DType::Float16, "f16"}, {DType::Int8, "i8"}};
  for (auto [dt, key] : types) {
    for (int64_t m : {int64_t{4096}, int64_t{8192}}) {
      const std::string s = std::to_string(m);
      const std::string name = std::string("baseline/op:gemm_peak/impl:ours/device:cuda:0/dtype:") + key +
                               "/shape:" + s + "x" + s + "x" + s;
      benchmark::RegisterBenchmark(name.c_str(), bm_gemm, dt, m)->UseManualTime()->Repetitions(5);
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
