// bench_quant.cpp — a Linear layer and a 3-layer MLP in five precisions (CLAIMS.md
// P1–P3, the Precision table): sb::Linear / sb::Mlp of include/stridebench/quant.h.
//
//   op:linear  y = x W^T + b, shape MxINxOUT = 256x1024x1024 (smoke 8x32x32, as scripts/peers.py)
//   op:mlp     three layers 1024-1024-1024-1024, relu after the first two, batch 256:
//              shape MxD0xD1xD2xD3 = 256x1024x1024x1024x1024 (smoke 8x60x48x40x36)
//   dtype:     f32, f16 (float16 weights and activations, float32 compute), bf16
//              (bfloat16 weights and activations, float32 accumulation): x and y in the
//              row's dtype, as PyTorch's module.half() / .bfloat16() and the peers'
//              rows (Note [16-bit activations] in stridebench/quant.h), int8_dynamic (int8 weights
//              per output channel, activations quantized per call), int8_static
//              (activation ranges from a calibration batch: another batch drawn from
//              the same distribution as the timed input, never the timed input itself)
//   No layout or style key (always contiguous inputs, forward() returns a new tensor):
//   the names match scripts/peers.py's torch/numpy linear rows. Threads 1, 2.
// Counters: weight_bytes (Linear/Mlp::weight_bytes(): what the weights hold in this
//   precision, scales and row sums included, bias not), rel_error = ||y - y_f32|| /
//   ||y_f32|| against the f32 model's output on the same input (computed once, outside
//   the timed loop), flop, bytes, peak_alloc_bytes, allocs_per_iter.
// Data: x ~ N(0, 1), W ~ N(0, 2/in) (He init: activations keep their scale through
//   the relus), b ~ N(0, 0.01).
//
// Cost: flop = 2*M*in*out per layer (int8 multiply-adds counted the same way):
// linear 0.54 GFLOP, mlp 1.6 GFLOP.
// bytes = x + weight_bytes + biases + y, plus for the MLP its two hidden activations
// written and read once each, activations at 2 bytes in f16 and bf16 (bench_quant.h).
#include <cmath>
#include <memory>

#include "bench_common.h"
#include "bench_quant.h"

namespace sb::bench {

const char* const kFamily = "quant";

namespace {

using Case = QuantCase;

// The model of an op (shared by its precisions and thread counts) and its f32 output.
Model& model(const Case& c) {
  static std::map<std::string, Model> models;
  auto it = models.find(c.op);
  if (it == models.end()) {
    it = models.emplace(c.op, make_model(c.widths, c.m)).first;
    it->second.ref = make_net(it->second, Precision::F32).forward(it->second.x);
  }
  return it->second;
}

void run_case(benchmark::State& st, const Case& c, std::shared_ptr<Net>& net, double& err) {
  ThreadScope ts(c.threads);
  const Model& md = model(c);
  if (!net) {  // first repetition: quantize/convert the weights, calibrate, measure the error
    net = std::make_shared<Net>(make_net(md, c.precision));
    err = relative_error(net->forward(input_of(md, c.precision)), md.ref);
  }
  const Tensor& x = input_of(md, c.precision);
  const AllocCount allocs = warm_up([&] { Tensor y = net->forward(x); });  // also the warm-up (Note [One warm-up per run])
  for (auto _ : st) {
    Tensor y = net->forward(x);
    benchmark::DoNotOptimize(y);
  }
  const QuantWork w = quant_work(c.m, c.widths, *net, static_cast<int64_t>(dtype_size(activation_dtype(c.precision))));
  set_work(st, w.bytes, w.flop);
  set_alloc_counters(st, allocs);
  set_quant_counters(st, *net, err);
  set_regime(st, w.working_set, c.threads);
}

}  // namespace

void register_family() {
  const int64_t m = smoke() ? 8 : 256;
  const std::vector<int64_t> lin = smoke() ? std::vector<int64_t>{32, 32} : std::vector<int64_t>{1024, 1024};
  const std::vector<int64_t> mlp =
      smoke() ? std::vector<int64_t>{60, 48, 40, 36} : std::vector<int64_t>{1024, 1024, 1024, 1024};
  for (int t : thread_counts()) {
    for (const auto& [op, widths] : {std::pair{"linear", lin}, std::pair{"mlp", mlp}}) {
      Shape shape{m};
      shape.insert(shape.end(), widths.begin(), widths.end());
      for (Precision p : {Precision::F32, Precision::F16, Precision::BF16, Precision::Int8Dynamic, Precision::Int8Static}) {
        const Case c{op, p, m, widths, t};
        const RunName name = RunName()
                                 .op(op)
                                 .set("dtype", precision_name(p))
                                 .shape(shape)
                                 .threads(t);
        auto net = std::make_shared<std::shared_ptr<Net>>();
        auto err = std::make_shared<double>(0.0);
        add_run(name, [c, net, err](benchmark::State& st) { run_case(st, c, *net, *err); }, benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace sb::bench
