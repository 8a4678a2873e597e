// quant.h — a Linear layer (y = x W^T + b, W [out, in]) and a 3-layer MLP in four
// precisions, for the Precision table (CLAIMS.md P1-P3).
//
//   F32          our packed float32 GEMM (W^T packed straight from W's strides).
//   F16          W stored as float16 (half the bytes), converted to float32 while the
//                GEMM packs it (F16C); compute in float32.
//   BF16         W stored as bfloat16 (half the bytes) and x in bfloat16 (rounded per
//                call, a temporary of M x in, when it comes as float32), both read by the
//                bfloat16 GEMM (float32 accumulation: vdpbf16ps where the CPU has
//                AVX512_BF16, else widened to float32 while packing).
//   Note [16-bit activations]: an F16 or BF16 layer takes x in float32 or in its own
//   dtype, and returns y in x's dtype. A 16-bit x is the layer PyTorch runs after
//   module.half() / module.bfloat16() (and the peers' rows): the bias is rounded to
//   that dtype as PyTorch's module rounds it, the sum x W^T + b is formed in float32
//   and rounded once into y, relu after (relu and rounding commute). A float32 x keeps
//   the float32 bias and a float32 y. Every other precision takes float32 only.
//   Int8Dynamic  W quantized once, symmetric per output channel: wq = round(W/sw[n]) in
//                [-127, 127]. Activations quantized per tensor at run time, asymmetric
//                and 7-bit: xq = clamp(round(x/sx) + zp, 0, 127), sx = (max - min)/127 over
//                the tensor (range widened to include 0). Note [7-bit activations]: the
//                AVX2 kernel multiplies u8 x s8 pairs with vpmaddubsw, whose int16 pair sum
//                saturates at 32767; with xq <= 127 and |wq| <= 127 a pair sums to at most
//                2*127*127 = 32258, so it never saturates and the int32 accumulators equal
//                the integer reference exactly (vpmaddwd by ones widens to int32).
//                Epilogue: y = sx*sw[n]*(acc - zp*sum_k wq[n,k]) + b[n] (relu optional).
//   Int8Static   as Int8Dynamic, but sx and zp come from a calibration pass (calibrate()
//                observes min/max over sample inputs) instead of each input.
// weight_bytes(): bytes held for the weights (F32 4*out*in, F16 and BF16 2*out*in, int8 out*in'
// (in rounded up to 4; on CUDA out'*in', out rounded up to 4 too) plus 4-byte scale and
// 4-byte row sum per output channel); the bias (float32, the same in every precision)
// is not counted.
// Cost: 2*M*out*in flop (int8: multiply-adds counted the same way); the int8 path also
// reads x twice (range, then quantize + pack) and writes M*in' bytes of packed activations.
#pragma once
#include <cstdint>
#include <vector>

#include "stridebench/tensor.h"

namespace sb {

// BF16 last, so the earlier values keep their numbers.
enum class Precision : uint8_t { F32, F16, Int8Dynamic, Int8Static, BF16 };
const char* precision_name(Precision p);  // "f32", "f16", "int8_dynamic", "int8_static", "bf16"

// Per output channel int8 weights packed for the int8 kernel: panels of 16 channels,
// k in groups of 4 bytes (in' = in rounded up to 4, zero padded).
struct QuantizedWeight {
  int64_t out = 0, in = 0, in_padded = 0;
  Tensor packed;  // int8 [ceil(out/16)*16 * in_padded]
  Tensor scale;   // float32 [out]
  Tensor row_sum; // int32 [out]: sum_k wq[n, k]
};
QuantizedWeight quantize_weight(const Tensor& w);  // w float32 [out, in], any strides
// int32 accumulators acc[m, n] = sum_k aq[m, k] * wq[n, k] for uint8 activations
// aq (values 0..127, element (m, k) at a[m*a_rs + k]) — the integer core, exposed for
// exact tests. acc is [M, out] contiguous.
void int8_gemm_s32(int64_t M, const uint8_t* a, int64_t a_rs, const QuantizedWeight& qw, int32_t* acc);
Tensor unpack_weight(const QuantizedWeight& qw);  // int8 [out, in]: the quantized values (tests)

// Activation quantization parameters from an observed range (widened to include 0):
// scale = (max - min) / 127 (1 when the range is empty), zero_point = round(-min/scale).
struct ActQParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};
ActQParams act_qparams(float min, float max);
// xq = clamp(round(x / scale) + zero_point, 0, 127) as int8 [M, K] (values fit 7 bits).
Tensor quantize_activations(const Tensor& x, const ActQParams& q);

// On a CUDA device (the weight's), the same four precisions run as cuda_backend.h's
// linear_forward describes: cuBLAS for the products (F16, BF16: x rounded to float16 or
// bfloat16 too, for the tensor cores; int8: int8 x int8 -> int32), the activation range and quantization
// on the device. The weights are quantized on the host, as on the CPU, then uploaded:
// the int8 matrix plain row-major, out and in rounded up to multiples of 4.
class Linear {
 public:
  // weight float32 [out, in], bias float32 [out] or undefined, on one device; any strides.
  Linear(const Tensor& weight, const Tensor& bias, Precision precision);
  // x [M, in], any strides, on the weight's device: float32, or (F16, BF16) the layer's
  // own dtype (Note [16-bit activations]) -> y [M, out] contiguous, in x's dtype.
  Tensor forward(const Tensor& x, bool relu = false) const;
  void observe(const Tensor& x);  // Int8Static calibration: widen the activation range
  bool calibrated() const { return calibrated_; }
  size_t weight_bytes() const;
  Precision precision() const { return precision_; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  Device device() const { return device_; }

 private:
  Precision precision_;
  Device device_;
  int64_t in_, out_;
  Tensor w32_, w16_, bias_;
  Tensor bias16_, bias_rounded_;  // F16, BF16: the bias in the layer's dtype, and those values in float32
  QuantizedWeight qw_;  // CUDA: scale and row_sum on the device, packed empty
  Tensor w8_;           // CUDA int8: [out', in'] row-major
  float act_min_ = 0.0f, act_max_ = 0.0f;
  bool calibrated_ = false;
};

// Three Linear layers with relu after the first two; a 16-bit x keeps the hidden
// activations in its dtype (Note [16-bit activations]).
class Mlp {
 public:
  Mlp(const std::vector<Tensor>& weights, const std::vector<Tensor>& biases, Precision precision);
  // Int8Static: runs x through the layers (dynamic int8), each layer observing its input.
  void calibrate(const Tensor& x);
  Tensor forward(const Tensor& x) const;
  size_t weight_bytes() const;

 private:
  std::vector<Linear> layers_;
};

// ||out - ref||_2 / ||ref||_2 over all elements (0 when both are 0).
double relative_error(const Tensor& out, const Tensor& ref);

}  // namespace sb
