// bench_quant_cuda.cpp — bench_quant.cpp's Linear and MLP on cuda:0 (CLAIMS.md P1-P3 on
// the GPU, the Precision table): sb::Linear / sb::Mlp with their weights on the device
// (cuda_backend.h's linear_forward: cuBLASLt SGEMM for f32, float16 and bfloat16 tensor
// cores for f16 and bf16 with x and y in that type, int8 tensor cores with the
// activations' range and quantization on the device for int8_dynamic and int8_static).
//
//   op:linear  shape MxINxOUT: 256x1024x1024 (the CPU's and the peers' shape: a few µs
//              of GEMM, so launches weigh) and 4096x4096x4096 (the tensor cores busy)
//   op:mlp     256x1024x1024x1024x1024, as on the CPU
//   dtype:     f32, f16, bf16, int8_dynamic, int8_static (bench_quant.cpp)
// Names as bench_quant.cpp's with device:cuda:0 and threads:1, so the peers' torch
// cuda:0 rows pair up (PyTorch's int8 quantization is CPU-only: those peer rows skip).
// Counters and cost: bench_quant.h; peak_alloc_bytes / allocs_per_iter from the CUDA
// allocators. Ceiling: the baseline gemm_peak of the row's dtype (f16 against the f16
// peak, bf16 against the bf16 one, int8 against the i8 one; results.py).
#include "bench_quant.h"
#include "cuda_bench_common.h"

namespace sb::bench {

const char* const kFamily = "quant";

namespace {

using Case = QuantCase;

std::string model_key(const Case& c) {
  std::string k = c.op;
  for (int64_t w : c.widths) k += "x" + std::to_string(w);
  return k + "/" + std::to_string(c.m);
}

// The model of an op and shape on cuda:0, its f32 output from the device's f32 layer.
Model& device_model(const Case& c) {
  static std::map<std::string, Model> models;
  const std::string key = model_key(c);
  auto it = models.find(key);
  if (it == models.end()) {
    it = models.emplace(key, model_on(make_model(c.widths, c.m), Device::cuda(0))).first;
    it->second.ref = make_net(it->second, Precision::F32).forward(it->second.x);
  }
  return it->second;
}

void run_case(benchmark::State& st, const Case& c, std::shared_ptr<Net>& net, double& err) {
  SB_REQUIRE_DEVICE(st);
  const Model& md = device_model(c);
  if (!net) {  // first repetition: quantize/convert the weights, calibrate, measure the error
    net = std::make_shared<Net>(make_net(md, c.precision));
    err = relative_error(net->forward(input_of(md, c.precision)), md.ref);
  }
  const Tensor& x = input_of(md, c.precision);
  auto call = [&] {
    Tensor y = net->forward(x);
    benchmark::DoNotOptimize(y);
  };
  const AllocCount allocs = measure_cuda_allocs(call);  // also the warm-up (cuBLAS heuristics)
  time_gpu_loop(st, call);
  const QuantWork w = quant_work(c.m, c.widths, *net, static_cast<int64_t>(dtype_size(activation_dtype(c.precision))));
  set_work(st, w.bytes, w.flop);
  set_alloc_counters(st, allocs);
  set_quant_counters(st, *net, err);
  st.SetLabel(regime_label(w.working_set));
}

}  // namespace

void register_family() {
  struct Op {
    const char* op;
    int64_t m;
    std::vector<int64_t> widths;
  };
  std::vector<Op> ops;
  if (smoke()) {
    ops = {{"linear", 8, {32, 32}}, {"mlp", 8, {60, 48, 40, 36}}};
  } else {
    ops = {{"linear", 256, {1024, 1024}}, {"linear", 4096, {4096, 4096}}, {"mlp", 256, {1024, 1024, 1024, 1024}}};
  }
  for (const Op& o : ops) {
    Shape shape{o.m};
    shape.insert(shape.end(), o.widths.begin(), o.widths.end());
    for (Precision p : {Precision::F32, Precision::F16, Precision::BF16, Precision::Int8Dynamic, Precision::Int8Static}) {
      const Case c{o.op, p, o.m, o.widths};
      const RunName name = gpu_name().op(o.op).set("dtype", precision_name(p)).shape(shape);
      auto net = std::make_shared<std::shared_ptr<Net>>();
      auto err = std::make_shared<double>(0.0);
      add_manual_run(name, [c, net, err](benchmark::State& st) { run_case(st, c, *net, *err); });
    }
  }
}

}  // namespace sb::bench
