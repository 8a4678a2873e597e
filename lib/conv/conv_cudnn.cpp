// conv_cudnn.cpp — conv2d on CUDA through cuDNN's graph API (the backend descriptors of
// cudnn_graph.h: an operation graph, the engine heuristics, execution plans), built
// when meson finds cuDNN (SB_WITH_CUDNN). conv.cu's sb::cuda::conv2d checks the call
// and comes here; its im2col path is compiled only where cuDNN is absent.
//
// Note [cuDNN conv plans]
// One call, forward, cross-correlation:
//  - Layout: channels-last when x or w suggests it (PyTorch's rule), else NCHW. x and w
//    are made dense in it (a copy only when they are not already), the bias contiguous;
//    out is written in place when it is dense in that layout, else through a temporary
//    that is copied into it (as the CPU paths do).
//  - Graph: conv_fwd with float32 compute writing y in the call's dtype; fused (a bias
//    or relu asked, plans timed: below), it writes a virtual float32 tensor instead,
//    followed by a pointwise add of the bias [1, O, 1, 1] and a relu, each when asked,
//    the last op writing y.
//  - Precision: every engine config whose numerical notes break what the dtype
//    promises is dropped: down-converted inputs and reduced-precision (16-bit)
//    reductions always, tensor cores for float32 unless set_allow_tf32 (the graph API's
//    counterpart of the legacy math type, and the filter PyTorch applies; one flag for
//    matmul and conv, where PyTorch has two). Winograd and FFT engines stay, as in
//    PyTorch: their float32 error is stated with the tests.
//  - Choice: the heuristics (mode A, then the fallback list when none of A's configs
//    builds) rank the configs; the first kAutotunePlans that finalize into a plan are
//    each timed on the legacy default stream into a scratch output (Note [cuDNN plan
//    timing]), and the fastest median is kept (PyTorch's cudnn.benchmark,
//    which PyTorch leaves off by default; SB_CUDNN_AUTOTUNE=0 takes the first plan that
//    builds). When the fused graph has no engine, or with autotuning off (the fused
//    graph's engines compile at run time), the conv alone is planned and the bias and
//    relu run as elementwise passes on y, as PyTorch's conv2d does. set_conv_engine_prefix() keeps only
//    the engines whose tag starts with a prefix (the tests use it to see a refusal).
//  - Cache: one plan per (device, dtype, TF32, layout, sizes, stride, padding,
//    dilation, groups, bias, relu, the byte alignment of each pointer), kept for the
//    process; the graph's descriptors live as long as the plan. The workspace comes
//    from the device's CUDA allocator on every call (the caching one by default).
//  - Record: conv2d_last_plan() names the engine the last call ran as cudnn-frontend
//    tags it (eng<global index>_k<knob>=<value>...), with its workspace, whether the
//    epilogue was fused and how many plans were timed; cudnn_version() is the
//    library's version at run time (the header's may be newer).
// Errors: a cuDNN status other than success throws sb::Error naming conv2d, the sizes,
// the dtype and layout, the call that failed and cuDNN's own message; a graph no
// engine takes says so. out is written only by a plan's execution, after every check.
#include <cudnn.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"

namespace sb::cuda {
namespace {

constexpr int kAutotunePlans = 8;  // plans timed per new key (the heuristics' first that build)
constexpr int64_t kMaxWorkspace = int64_t{1} << 30;  // bytes: larger plans are skipped

// Unique ids of the graph's tensors (the variant pack names them).
enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3, kUidB = 4, kUidConv = 5, kUidBiased = 6 };

[[noreturn]] void throw_cudnn(cudnnStatus_t st, const char* call, const std::string& ctx) {
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof last);
  throw Error(sb::detail::str_cat("conv2d (cuDNN): ", call, " failed for ", ctx, ": ", cudnnGetErrorString(st),
                                  last[0] ? " (" : "", last, last[0] ? ")" : ""));
}

// A backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    const cudnnStatus_t st = cudnnBackendCreateDescriptor(type, &d_);
    if (st != CUDNN_STATUS_SUCCESS) throw_cudnn(st, "cudnnBackendCreateDescriptor", "a descriptor");
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&&) = delete;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};
using DescPtr = std::shared_ptr<Desc>;

// The call's sizes and choices: the plan cache's key, and the text of its errors.
struct Spec {
  cudnnDataType_t dt;
  bool tf32, nhwc, bias, relu;
  int64_t N, C, H, W, O, Cg, KH, KW, OH, OW, s, pad, d;
  int64_t ax, aw, ay, ab;  // byte alignment of each pointer (ab 0 without a bias)

  std::vector<int64_t> key(int dev) const {
    return {dev, static_cast<int64_t>(dt), tf32, nhwc, bias, relu, N, C, H, W, O, Cg, KH, KW, OH, OW, s, pad, d,
            ax, aw, ay, ab};
  }
  std::string str() const {
    return sb::detail::str_cat(
        "x [", N, ", ", C, ", ", H, ", ", W, "], w [", O, ", ", Cg, ", ", KH, ", ", KW, "], stride ", s, ", padding ",
        pad, ", dilation ", d, ", groups ", C / std::max<int64_t>(Cg, 1),
        dt == CUDNN_DATA_HALF ? ", float16" : dt == CUDNN_DATA_BFLOAT16 ? ", bfloat16" : ", float32",
        tf32 && dt == CUDNN_DATA_FLOAT ? " (tf32)" : "", nhwc ? ", channels_last" : ", NCHW", bias ? ", bias" : "",
        relu ? ", relu" : "");
  }
};

class Builder {  // sets attributes and finalizes, each failure naming the call's spec
 public:
  explicit Builder(std::string ctx) : ctx_(std::move(ctx)) {}
  void set(const Desc& d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const void* v,
           const char* what) const {
    const cudnnStatus_t st = cudnnBackendSetAttribute(d.get(), a, t, n, v);
    if (st != CUDNN_STATUS_SUCCESS) throw_cudnn(st, what, ctx_);
  }
  void set_desc(const Desc& d, cudnnBackendAttributeName_t a, const Desc& v, const char* what) const {
    cudnnBackendDescriptor_t h = v.get();
    set(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &h, what);
  }
  void finalize(const Desc& d, const char* what) const {
    const cudnnStatus_t st = cudnnBackendFinalize(d.get());
    if (st != CUDNN_STATUS_SUCCESS) throw_cudnn(st, what, ctx_);
  }
  const std::string& ctx() const { return ctx_; }

 private:
  std::string ctx_;
};

// A 4-D tensor [d0, d1, d2, d3] (logical NCHW order), dense in NCHW or NHWC.
DescPtr tensor(const Builder& b, int64_t uid, cudnnDataType_t dt, const int64_t (&dims)[4], bool nhwc, int64_t align,
               bool is_virtual) {
  const int64_t strides_nchw[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  const int64_t strides_nhwc[4] = {dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]};
  auto t = std::make_shared<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  b.set(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
  b.set(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dimensions");
  b.set(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, nhwc ? strides_nhwc : strides_nchw, "tensor strides");
  b.set(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id");
  b.set(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
  const bool v = is_virtual;
  b.set(*t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v, "tensor virtual flag");
  b.finalize(*t, "tensor descriptor");
  return t;
}

DescPtr pointwise_op(const Builder& b, std::vector<DescPtr>& keep, cudnnPointwiseMode_t mode, const DescPtr& x,
                     const DescPtr& bias, const DescPtr& y) {
  auto pw = std::make_shared<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  b.set(*pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
  b.set(*pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision");
  b.finalize(*pw, "pointwise descriptor");
  auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  b.set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw, "pointwise op");
  b.set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x, "pointwise input");
  if (bias) b.set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *bias, "pointwise bias");
  b.set_desc(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y, "pointwise output");
  b.finalize(*op, "pointwise operation");
  keep.push_back(pw);
  return op;
}

// The operations of `sp`'s graph, conv alone (fused = false) or with the bias and relu,
// every descriptor finalized (none needs a device); `keep` holds what they refer to.
std::vector<DescPtr> build_ops(const Builder& b, const Spec& sp, bool fused, std::vector<DescPtr>& keep) {
  const int64_t xd[4] = {sp.N, sp.C, sp.H, sp.W}, wd[4] = {sp.O, sp.Cg, sp.KH, sp.KW}, yd[4] = {sp.N, sp.O, sp.OH, sp.OW};
  const bool epilogue = fused && (sp.bias || sp.relu);
  const DescPtr x = tensor(b, kUidX, sp.dt, xd, sp.nhwc, sp.ax, false);
  const DescPtr w = tensor(b, kUidW, sp.dt, wd, sp.nhwc, sp.aw, false);
  const DescPtr y = tensor(b, kUidY, sp.dt, yd, sp.nhwc, sp.ay, false);
  keep.insert(keep.end(), {x, w, y});

  auto conv = std::make_shared<Desc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2, pads[2] = {sp.pad, sp.pad}, strides[2] = {sp.s, sp.s}, dil[2] = {sp.d, sp.d};
  b.set(*conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "conv compute type");
  b.set(*conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "conv mode");
  b.set(*conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims, "conv spatial dims");
  b.set(*conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads, "conv padding");
  b.set(*conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads, "conv padding");
  b.set(*conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides, "conv stride");
  b.set(*conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "conv dilation");
  b.finalize(*conv, "convolution descriptor");
  keep.push_back(conv);

  // the conv's output: y itself, or a virtual float32 tensor the epilogue reads
  DescPtr conv_y = y;
  if (epilogue) {
    conv_y = tensor(b, kUidConv, CUDNN_DATA_FLOAT, yd, sp.nhwc, 16, true);
    keep.push_back(conv_y);
  }
  auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.0f, beta = 0.0f;
  b.set_desc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *x, "conv x");
  b.set_desc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, *w, "conv w");
  b.set_desc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, *conv_y, "conv y");
  b.set_desc(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, *conv, "conv descriptor");
  b.set(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, "conv alpha");
  b.set(*op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, "conv beta");
  b.finalize(*op, "convolution forward operation");
  std::vector<DescPtr> ops = {op};

  if (epilogue) {
    DescPtr cur = conv_y;
    if (sp.bias) {
      const int64_t bd[4] = {1, sp.O, 1, 1};
      const DescPtr bt = tensor(b, kUidB, sp.dt, bd, sp.nhwc, sp.ab, false);  // y's stride order
      const DescPtr out = sp.relu ? tensor(b, kUidBiased, CUDNN_DATA_FLOAT, yd, sp.nhwc, 16, true) : y;
      keep.insert(keep.end(), {bt, out});
      ops.push_back(pointwise_op(b, keep, CUDNN_POINTWISE_ADD, cur, bt, out));
      cur = out;
    }
    if (sp.relu) ops.push_back(pointwise_op(b, keep, CUDNN_POINTWISE_RELU_FWD, cur, nullptr, y));
  }
  keep.insert(keep.end(), ops.begin(), ops.end());
  return ops;
}

// The operation graph of `ops` on handle h.
DescPtr build_graph(const Builder& b, cudnnHandle_t h, const std::vector<DescPtr>& ops) {
  auto graph = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const DescPtr& o : ops) raw.push_back(o->get());
  b.set(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "graph handle");
  b.set(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()),
        raw.data(), "graph ops");
  b.finalize(*graph, "operation graph");
  return graph;
}

// An engine config the heuristics proposed: its tag and whether its notes fit the precision.
struct Candidate {
  DescPtr cfg;
  std::string tag;
  bool allowed = true;
};

// A config whose engine, index or notes cannot be read is not a candidate (allowed =
// false), as one that breaks the precision; an unreadable knob is left out of the tag.
Candidate describe(DescPtr cfg, const Spec& sp) {
  Candidate c{std::move(cfg), "", false};
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t eh = engine.get();
  int64_t n = 0, index = -1, nn = 0;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(c.cfg->get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eh) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nn, notes) != CUDNN_STATUS_SUCCESS)
    return c;
  c.allowed = true;
  for (int64_t i = 0; i < nn; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS || notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
      c.allowed = false;
    if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && sp.dt == CUDNN_DATA_FLOAT && !sp.tf32) c.allowed = false;
  }
  c.tag = sb::detail::str_cat("eng", index);
  std::vector<Desc> knobs;
  std::vector<cudnnBackendDescriptor_t> kh;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    knobs.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    kh.push_back(knobs.back().get());
  }
  int64_t nk = 0;
  if (cudnnBackendGetAttribute(c.cfg->get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               static_cast<int64_t>(kh.size()), &nk, kh.data()) != CUDNN_STATUS_SUCCESS)
    nk = 0;
  for (int64_t i = 0; i < nk; ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0, m = 0;
    if (cudnnBackendGetAttribute(kh[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &m, &type) ==
            CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(kh[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &m, &value) ==
            CUDNN_STATUS_SUCCESS)
      c.tag += sb::detail::str_cat("_k", static_cast<int>(type), "=", value);
  }
  return c;
}

// The heuristics' configs for `graph` in `mode`, in their order.
std::vector<Candidate> candidates(const Builder& b, const Desc& graph, cudnnBackendHeurMode_t mode, const Spec& sp) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  b.set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristics graph");
  b.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
  if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) return {};  // no engine for this graph in this mode
  int64_t count = 0;
  cudnnStatus_t st =
      cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
  if (st != CUDNN_STATUS_SUCCESS) throw_cudnn(st, "heuristics result count", b.ctx());
  std::vector<DescPtr> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(cfgs.back()->get());
  }
  int64_t got = 0;
  st = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                raw.data());
  if (st != CUDNN_STATUS_SUCCESS) throw_cudnn(st, "heuristics results", b.ctx());
  std::vector<Candidate> out;
  for (int64_t i = 0; i < std::min(got, count); ++i) out.push_back(describe(cfgs[static_cast<size_t>(i)], sp));
  return out;
}

struct Plan {
  std::vector<DescPtr> keep;  // the graph's descriptors
  DescPtr plan;
  ConvPlanInfo info;
};

// A finalized plan for candidate `c`, or none when cuDNN does not build it (or its
// workspace is over kMaxWorkspace).
std::unique_ptr<Plan> make_plan(cudnnHandle_t h, const Candidate& c, const std::vector<DescPtr>& keep, bool fused) {
  auto plan = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  cudnnBackendDescriptor_t cfg = c.cfg->get();
  if (cudnnBackendSetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnBackendSetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                               &cfg) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS)
    return nullptr;
  int64_t ws = 0, n = 0;
  if (cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws) !=
          CUDNN_STATUS_SUCCESS ||
      ws < 0 || ws > kMaxWorkspace)
    return nullptr;
  auto p = std::make_unique<Plan>();
  p->keep = keep;
  p->keep.push_back(c.cfg);
  p->plan = plan;
  p->info.engine = c.tag;
  p->info.workspace_bytes = ws;
  p->info.fused = fused;
  return p;
}

// The tensors' device pointers for one execution.
struct Pointers {
  void* x;
  void* w;
  void* y;
  void* b;
};

// The variant pack of one execution of `p` (nullptr and the status when cuDNN refuses it).
std::pair<std::unique_ptr<Desc>, cudnnStatus_t> variant_pack(const Plan& p, const Pointers& ptr, void* ws) {
  std::vector<int64_t> uids = {kUidX, kUidW, kUidY};
  std::vector<void*> data = {ptr.x, ptr.w, ptr.y};
  if (p.info.fused && ptr.b) {
    uids.push_back(kUidB);
    data.push_back(ptr.b);
  }
  auto vp = std::make_unique<Desc>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  cudnnStatus_t st = cudnnBackendSetAttribute(vp->get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                              static_cast<int64_t>(uids.size()), uids.data());
  if (st == CUDNN_STATUS_SUCCESS)
    st = cudnnBackendSetAttribute(vp->get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                  static_cast<int64_t>(data.size()), data.data());
  if (st == CUDNN_STATUS_SUCCESS)
    st = cudnnBackendSetAttribute(vp->get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp->get());
  if (st != CUDNN_STATUS_SUCCESS) vp.reset();
  return {std::move(vp), st};
}

cudnnStatus_t execute(cudnnHandle_t h, const Plan& p, const Pointers& ptr, void* ws) {
  const auto [vp, st] = variant_pack(p, ptr, ws);
  return vp ? cudnnBackendExecute(h, p.plan->get(), vp->get()) : st;
}

Tensor workspace(int64_t bytes, Device dev) {
  return bytes > 0 ? empty({bytes}, DType::Int8, dev) : Tensor();
}

// Note [cuDNN plan timing]
// A candidate plan is timed as the benchmarks time a call (Note [Batched GPU timing]):
// back to back, kPlanRuns executions between two events, so that the host's part of an
// execution (cudnnBackendExecute, and an engine's own launches) overlaps the device's
// work instead of being counted once per interval; the median of kPlanSamples such
// intervals, after one warm-up execution (which also compiles a run-time engine), ranks
// the plans. One variant pack serves every timed execution.
constexpr int kPlanRuns = 5, kPlanSamples = 3;

// The median time per execution of `p`, in ms; a negative number when it fails to run.
float time_plan(cudnnHandle_t h, const Plan& p, const Pointers& ptr, Device dev) {
  Tensor ws;
  try {
    ws = workspace(p.info.workspace_bytes, dev);
  } catch (const Error&) {
    return -1;  // the device cannot hold this plan's workspace now
  }
  void* wp = ws.defined() ? ws.data_ptr() : nullptr;
  const auto [vp, st] = variant_pack(p, ptr, wp);
  if (!vp || cudnnBackendExecute(h, p.plan->get(), vp->get()) != CUDNN_STATUS_SUCCESS) return -1;
  cudaEvent_t e0, e1;
  SB_CUDA_CHECK(cudaEventCreate(&e0));
  SB_CUDA_CHECK(cudaEventCreate(&e1));
  float ms[kPlanSamples] = {};
  bool ok = true;
  for (float& t : ms) {
    SB_CUDA_CHECK(cudaEventRecord(e0, 0));
    for (int r = 0; r < kPlanRuns && ok; ++r) ok = cudnnBackendExecute(h, p.plan->get(), vp->get()) == CUDNN_STATUS_SUCCESS;
    SB_CUDA_CHECK(cudaEventRecord(e1, 0));
    SB_CUDA_CHECK(cudaEventSynchronize(e1));
    SB_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    t /= kPlanRuns;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms, ms + kPlanSamples);
  return ok ? ms[kPlanSamples / 2] : -1;
}

bool autotune() {  // read when a plan is chosen, so a process (or a test) may change it
  const char* v = std::getenv("SB_CUDNN_AUTOTUNE");
  return !(v && std::strcmp(v, "0") == 0);
}

std::mutex g_mu;  // the plan cache, the handles, the engine filter and the last plan's record
std::map<std::vector<int64_t>, std::unique_ptr<Plan>> g_plans;
ConvPlanInfo g_last;
std::string g_engine_prefix;  // set_conv_engine_prefix

// The plan for `sp`: the fused graph's when one builds, else the conv's alone.
std::unique_ptr<Plan> choose_plan(cudnnHandle_t h, const Spec& sp, const Pointers& ptr, Device dev) {
  const Builder b(sp.str());
  // the fused graph only when plans are timed: its engines compile at run time (NVRTC),
  // seconds per new layer that the first-plan mode is there to avoid
  const bool want_fused = (sp.bias || sp.relu) && autotune();
  for (const bool fused : want_fused ? std::vector<bool>{true, false} : std::vector<bool>{false}) {
    std::vector<DescPtr> keep;
    DescPtr graph;
    try {
      graph = build_graph(b, h, build_ops(b, sp, fused, keep));
    } catch (const Error&) {
      if (fused) continue;  // an epilogue cuDNN cannot express here: the conv alone
      throw;
    }
    keep.push_back(graph);
    std::vector<std::unique_ptr<Plan>> plans;
    for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      for (const Candidate& c : candidates(b, *graph, mode, sp)) {
        if (!c.allowed || c.tag.compare(0, g_engine_prefix.size(), g_engine_prefix) != 0) continue;
        if (auto p = make_plan(h, c, keep, fused)) plans.push_back(std::move(p));
        if (static_cast<int>(plans.size()) >= (autotune() ? kAutotunePlans : 1)) break;
      }
      if (!plans.empty()) break;
    }
    if (plans.empty()) continue;
    size_t best = 0;
    if (plans.size() > 1) {
      float best_ms = -1;
      for (size_t i = 0; i < plans.size(); ++i) {
        const float t = time_plan(h, *plans[i], ptr, dev);
        if (t >= 0 && (best_ms < 0 || t < best_ms)) best = i, best_ms = t;
      }
    }
    plans[best]->info.candidates = static_cast<int>(plans.size());
    return std::move(plans[best]);
  }
  throw Error(sb::detail::str_cat("conv2d (cuDNN): no engine takes ", sp.str(),
                                  " (every config the heuristics proposed was refused or breaks the precision asked)"));
}

cudnnHandle_t handle(int device) {  // one per device, never destroyed (as cuBLAS's)
  static std::vector<cudnnHandle_t> handles;
  if (handles.empty()) handles.assign(static_cast<size_t>(device_count()), nullptr);
  cudnnHandle_t& h = handles[static_cast<size_t>(device)];
  if (!h) {
    const cudnnStatus_t st = cudnnCreate(&h);
    if (st != CUDNN_STATUS_SUCCESS) throw_cudnn(st, "cudnnCreate", sb::detail::str_cat("device ", device));
  }
  return h;
}

int64_t alignment(const void* p, int64_t elem) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t al = 16;
  while (al > elem && a % static_cast<uintptr_t>(al) != 0) al /= 2;
  return al;
}

cudnnDataType_t cudnn_type(DType dt) {
  switch (dt) {
    case DType::Float16: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

// The call's plan key from the tensors cuDNN reads (x, w and bias dense in the layout,
// res the output it writes).
Spec make_spec(const Tensor& res, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
               bool relu, bool nhwc, const Pointers& ptr) {
  const int64_t elem = static_cast<int64_t>(dtype_size(x.dtype()));
  Spec sp{};
  sp.dt = cudnn_type(x.dtype());
  sp.tf32 = x.dtype() == DType::Float32 && allow_tf32();
  sp.nhwc = nhwc;
  sp.bias = bias.defined();
  sp.relu = relu;
  sp.N = x.size(0); sp.C = x.size(1); sp.H = x.size(2); sp.W = x.size(3);
  sp.O = w.size(0); sp.Cg = w.size(1); sp.KH = w.size(2); sp.KW = w.size(3);
  sp.OH = res.size(2); sp.OW = res.size(3);
  sp.s = p.stride; sp.pad = p.padding; sp.d = p.dilation;
  sp.ax = alignment(ptr.x, elem);
  sp.aw = alignment(ptr.w, elem);
  sp.ay = alignment(ptr.y, elem);
  sp.ab = ptr.b ? alignment(ptr.b, elem) : 0;
  return sp;
}

bool channels_last(const Tensor& x, const Tensor& w) {  // PyTorch's rule
  return x.suggest_memory_format() == MemoryFormat::ChannelsLast ||
         w.suggest_memory_format() == MemoryFormat::ChannelsLast;
}

}  // namespace

void conv2d_cudnn(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p,
                  bool relu) {
  const bool nhwc = channels_last(x, w);
  const MemoryFormat fmt = nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  const Tensor xd = x.contiguous(fmt), wd = w.contiguous(fmt);
  const Tensor bd = bias.defined() ? bias.contiguous() : Tensor();
  Tensor res = out.is_contiguous(fmt) ? out : empty(out.sizes(), out.dtype(), out.device(), fmt);
  const int dev = x.device().index;
  const Pointers ptr{xd.data_ptr(), wd.data_ptr(), res.data_ptr(), bd.defined() ? bd.data_ptr() : nullptr};
  const Spec sp = make_spec(res, xd, wd, bd, p, relu, nhwc, ptr);
  bool fused = true;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (sp.Cg == 0) {  // no input channels: an empty sum (cuDNN takes no such graph)
      fill(res, 0.0);
      fused = false;
      g_last = ConvPlanInfo{};
    } else {
      const cudnnHandle_t h = handle(dev);
      std::unique_ptr<Plan>& plan = g_plans[sp.key(dev)];
      if (!plan) {  // the candidates are timed into a scratch y: out is written once, below
        const Tensor scratch = empty(res.sizes(), res.dtype(), res.device(), fmt);
        Pointers trial = ptr;
        trial.y = scratch.data_ptr();
        plan = choose_plan(h, sp, trial, x.device());
      }
      const Tensor ws = workspace(plan->info.workspace_bytes, x.device());
      const cudnnStatus_t st = execute(h, *plan, ptr, ws.defined() ? ws.data_ptr() : nullptr);
      if (st != CUDNN_STATUS_SUCCESS) throw_cudnn(st, "cudnnBackendExecute", sp.str());
      fused = plan->info.fused;
      g_last = plan->info;
    }
  }
  if (!fused && bias.defined()) binary(BinaryOp::Add, res, res, bd.as_strided(res.sizes(), {0, 1, 0, 0}));
  if (!fused && relu) unary(UnaryOp::Relu, res, res);
  if (!res.shares_storage_with(out)) copy(out, res);
}

ConvPlanInfo conv2d_last_plan() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_last;
}

int cudnn_conv_ops_for_tests(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias,
                             const Conv2dParams& p, bool relu, bool fused) {
  const bool nhwc = channels_last(x, w);
  const Pointers ptr{x.data_ptr(), w.data_ptr(), out.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr};
  const Spec sp = make_spec(out, x, w, bias, p, relu, nhwc, ptr);
  std::vector<DescPtr> keep;
  return static_cast<int>(build_ops(Builder(sp.str()), sp, fused, keep).size());
}

void set_conv_engine_prefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (prefix != g_engine_prefix) g_plans.clear();
  g_engine_prefix = prefix;
}

int cudnn_version() { return static_cast<int>(cudnnGetVersion()); }

const char* conv2d_backend() { return "cudnn"; }

}  // namespace sb::cuda
