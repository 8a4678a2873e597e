// bench_quant.h — the model of bench_quant.cpp and bench_quant_cuda.cpp: one op's
// weights, biases, timed input and calibration batch (made on the CPU; the CUDA binary
// uploads them), and forward() of a Linear or an Mlp behind one interface.
// Data: x ~ N(0, 1), W ~ N(0, 2/in) (He init: activations keep their scale through
// the relus), b ~ N(0, 0.01); the calibration batch is another draw of x's distribution.
#pragma once
#include <cmath>
#include <memory>

#include "bench_common.h"
#include "stridebench/elementwise.h"
#include "stridebench/quant.h"

namespace sb::bench {

struct QuantCase {  // one row: an op of some widths and batch, a precision
  const char* op;
  Precision precision;
  int64_t m;
  std::vector<int64_t> widths;
  int threads = 1;  // CPU rows; the GPU's are driven by one host thread
};

struct Model {  // one op in every precision, made once per binary
  std::vector<Tensor> weights, biases;
  Tensor x, calib, ref;  // ref: the f32 model's output on x
  Tensor x16, xbf16;     // x as float16 and bfloat16: the f16 and bf16 rows' input
  std::vector<int64_t> widths;
};

// The dtype of a precision's activations (Note [16-bit activations] in
// stridebench/quant.h): f16 and bf16 layers take and give their own dtype, as PyTorch's
// module.half() / module.bfloat16() and the peers' rows; the others float32.
inline DType activation_dtype(Precision p) {
  return p == Precision::F16 ? DType::Float16 : p == Precision::BF16 ? DType::BFloat16 : DType::Float32;
}
inline const Tensor& input_of(const Model& md, Precision p) {
  return p == Precision::F16 ? md.x16 : p == Precision::BF16 ? md.xbf16 : md.x;
}

inline Model make_model(const std::vector<int64_t>& widths, int64_t m) {
  Model md;
  md.widths = widths;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const int64_t in = widths[i], out = widths[i + 1];
    md.weights.push_back(mul(random_tensor({out, in}, 60 + i, DType::Float32, Dist::Normal), std::sqrt(2.0 / in)));
    md.biases.push_back(mul(random_tensor({out}, 70 + i, DType::Float32, Dist::Normal), 0.1));
  }
  md.x = random_tensor({m, widths[0]}, 51, DType::Float32, Dist::Normal);
  md.x16 = md.x.to(DType::Float16);
  md.xbf16 = md.x.to(DType::BFloat16);
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

inline Net make_net(const Model& md, Precision p) {
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

// Cost of one forward(): flop = 2*M*in*out per layer (int8 multiply-adds counted the
// same way); bytes = x + weight_bytes + biases (float32) + y, plus for the MLP its two
// hidden activations written and read once each, the activations at act_size bytes an
// element (activation_dtype); working_set counts those once.
struct QuantWork {
  int64_t flop = 0, bytes = 0, working_set = 0;
};
inline QuantWork quant_work(int64_t m, const std::vector<int64_t>& widths, const Net& net, int64_t act_size) {
  int64_t flop = 0, act = 0, bias = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    flop += 2 * m * widths[i] * widths[i + 1];
    bias += 4 * widths[i + 1];
    if (i > 0) act += 2 * act_size * m * widths[i];  // hidden activation: written, then read
  }
  const int64_t wb = static_cast<int64_t>(net.weight_bytes());
  const int64_t io = act_size * m * (widths.front() + widths.back());
  return {flop, io + wb + bias + act, io + wb + bias + act / 2};
}

// weight_bytes (what the weights hold in this precision, scales and row sums included,
// bias not) and rel_error (against the f32 model's output on the same input).
inline void set_quant_counters(benchmark::State& st, const Net& net, double rel_error) {
  st.counters["weight_bytes"] = benchmark::Counter(static_cast<double>(net.weight_bytes()));
  st.counters["rel_error"] = benchmark::Counter(rel_error);
}

// The model's tensors on `device` (the CPU's own model when it is the CPU).
inline Model model_on(const Model& md, Device device) {
  if (device.is_cpu()) return md;
  Model d;
  d.widths = md.widths;
  for (const Tensor& w : md.weights) d.weights.push_back(w.to(device));
  for (const Tensor& b : md.biases) d.biases.push_back(b.to(device));
  d.x = md.x.to(device);
  d.x16 = md.x16.to(device);
  d.xbf16 = md.xbf16.to(device);
  d.calib = md.calib.to(device);
  if (md.ref.defined()) d.ref = md.ref.to(device);
  return d;
}

}  // namespace sb::bench
