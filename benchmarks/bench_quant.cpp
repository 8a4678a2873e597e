// bench_quant.cpp — a Linear layer and a 3-layer MLP in four precisions (CLAIMS.md
// P1–P3, the Precision table): sb::Linear / sb::Mlp of include/stridebench/quant.h.
//
//   op:linear  y = x W^T + b, shape MxINxOUT = 256x1024x1024 (smoke 8x32x32, as scripts/peers.py)
//   op:mlp     three layers 1024-1024-1024-1024, relu after the first two, batch 256:
//              shape MxD0xD1xD2xD3 = 256x1024x1024x1024x1024 (smoke 8x60x48x40x36)
//   dtype:     f32, f16 (float16 weights, float32 compute), int8_dynamic (int8 weights
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
// written and read once each.
#include <cmath>
#include <memory>

#include "bench_common.h"
#include "stridebench/elementwise.h"
#include "stridebench/quant.h"

namespace sb::bench {

const char* const kFamily = "quant";

namespace {

struct Model {  // one op in every precision, made once per binary
  std::vector<Tensor> weights, biases;
  Tensor x, calib, ref;  // ref: the f32 model's output on x
  std::vector<int64_t> widths;
};

Model make_model(const std::vector<int64_t>& widths, int64_t m) {
  Model md;
  md.widths = widths;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const int64_t in = widths[i], out = widths[i + 1];
    md.weights.push_back(mul(random_tensor({out, in}, 60 + i, DType::Float32, Dist::Normal), std::sqrt(2.0 / in)));
    md.biases.push_back(mul(random_tensor({out}, 70 + i, DType::Float32, Dist::Normal), 0.1));
  }
  md.x = random_tensor({m, widths[0]}, 51, DType::Float32, Dist::Normal);
  md.calib = random_tensor({m, widths[0]}, 52, DType::Float32, Dist::Normal);
  return md;
}

// forward() of a Linear or an Mlp behind one interface.
struct Net {
  std::unique_ptr<Linear> linear;
  std::unique_ptr<Mlp> mlp;
  Tensor forward(const Tensor& x) const { return linear ? linear->forward(x) : mlp->forward(x); }
  size_t weight_bytes() const { return linear ? linear->weight_bytes() : mlp->weight_bytes(); }
};

Net make_net(const Model& md, Precision p) {
  Net n;
  if (md.weights.size() == 1) {
    n.linear = std::make_unique<Linear>(md.weights[0], md.biases[0], p);
    if (p == Precision::Int8Static) n.linear->observe(md.calib);
  } else {
    n.mlp = std::make_unique<Mlp>(md.weights, md.biases, p);
    if (p == Precision::Int8Static) n.mlp->calibrate(md.calib);
  }
  return n;
}

struct Case {
  const char* op;
  Precision precision;
  int64_t m;
  std::vector<int64_t> widths;
  int threads;
};

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
    err = relative_error(net->forward(md.x), md.ref);
  }
  const AllocCount allocs = measure_allocs([&] { Tensor y = net->forward(md.x); });  // also the warm-up
  for (auto _ : st) {
    Tensor y = net->forward(md.x);
    benchmark::DoNotOptimize(y);
  }
  const int64_t m = c.m;
  int64_t flop = 0, act = 0, bias = 0;
  for (size_t i = 0; i + 1 < c.widths.size(); ++i) {
    flop += 2 * m * c.widths[i] * c.widths[i + 1];
    bias += 4 * c.widths[i + 1];
    if (i > 0) act += 2 * 4 * m * c.widths[i];  // hidden activation: written, then read
  }
  const int64_t wb = static_cast<int64_t>(net->weight_bytes());
  const int64_t io = 4 * m * (c.widths.front() + c.widths.back());
  set_work(st, io + wb + bias + act, flop);
  set_alloc_counters(st, allocs);
  st.counters["weight_bytes"] = benchmark::Counter(static_cast<double>(wb));
  st.counters["rel_error"] = benchmark::Counter(err);
  set_regime(st, io + wb + bias + act / 2, c.threads);
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
      for (Precision p : {Precision::F32, Precision::F16, Precision::Int8Dynamic, Precision::Int8Static}) {
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
