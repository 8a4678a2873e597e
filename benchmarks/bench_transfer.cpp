// bench_transfer.cpp — host <-> device copies, pageable vs pinned host memory (claim H1).
//
// Rows: transfer/op:h2d|d2h/impl:ours/device:cuda:0/dtype:f32/shape:<n>/alloc:pinned|pageable/size:<bytes>.
// One iteration = one Tensor::copy_ between a contiguous host tensor (pageable from the
// CPU allocator, or pinned from sb::cuda::pinned_empty) and a contiguous device tensor:
// a single cudaMemcpy. bytes = the tensor's bytes (read once on one side, written once
// on the other; the link carries them once). Timed with CUDA events on stream 0.
// Pageable memory goes through the driver's staging buffer, typically half the pinned
// rate or less; small sizes are latency bound (back-of-envelope figures for PCIe 5:
// docs/notes/cuda.md).
#include <vector>

#include "cuda_bench_common.h"

namespace sb::bench {
namespace {

void bm_transfer(benchmark::State& state, bool h2d, bool pinned, int64_t bytes) {
  SB_REQUIRE_DEVICE(state);
  const int64_t n = bytes / 4;
  Tensor host = pinned ? cuda::pinned_empty({n}) : empty({n});
  host.fill_(1.0);  // touch every page before timing
  Tensor dev = zeros({n}, DType::Float32, Device::cuda(0));
  time_gpu_loop(state, [&] {
    if (h2d) dev.copy_(host);
    else host.copy_(dev);
  });
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(state.iterations() * bytes);
}

const std::vector<int64_t>& sizes() {
  static const std::vector<int64_t> quick = {4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
  static const std::vector<int64_t> full = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20,
                                            16 << 20, 64 << 20, 256 << 20, 1 << 30};
#ifdef SB_MATRIX_FULL
  return full;
#else
  (void)full;
  return quick;
#endif
}

const bool registered = [] {
  for (bool h2d : {true, false})
    for (bool pinned : {false, true})
      for (int64_t b : sizes()) {
        const std::string name = std::string("transfer/op:") + (h2d ? "h2d" : "d2h") +
                                 "/impl:ours/device:cuda:0/dtype:f32/shape:" + std::to_string(b / 4) +
                                 "/alloc:" + (pinned ? "pinned" : "pageable") + "/size:" + std::to_string(b);
        add_gpu_row(name, [=](benchmark::State& st) { bm_transfer(st, h2d, pinned, b); });
      }
  return true;
}();

}  // namespace
}  // namespace sb::bench

namespace sb::bench {
// The shared main() (bench_common.cpp) adds the machine context, GPU included; the runs
// above register themselves at static initialisation.
const char* const kFamily = "transfer";
void register_family() {}
}  // namespace sb::bench
