// torch_parity.cpp — runs a table of small cases through the library and writes, for
// each, its inputs as they were (whole storages, sizes, strides, offsets), then what the
// op gave: the result, the storage it wrote into, or the error. tests/torch_parity.py
// rebuilds the same tensors in PyTorch, runs PyTorch's op in the same style and compares
// dtype, sizes, strides, values and whether it raised (Note [PyTorch parity]).
//
// Note [PyTorch parity]
// LIBRARY.md says where our semantics are PyTorch's: broadcasting, the result's layout,
// the reductions' dtypes and shapes, rounding to 16-bit floats, NaN through max and
// relu, which overlaps are errors. The gtest suites check those against expectations
// written by hand and values against float64 loops; this program and its checker ask
// the installed PyTorch itself, case by case, in every style (out-of-place, out=, in
// place) and on non-contiguous operands and outputs. Cases where we differ on purpose
// (no type promotion, integer division refused) are not in the table; the checker
// names each documented difference it tolerates.
//
// Usage: torch_parity_dump DIR   (writes DIR/cases.jsonl and DIR/storages.bin); SB_PARITY_DEVICE=
// cpu-staged or cuda runs the ops on copies there (Note [Staged parity runs]).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cases/layout.h"
#include "stridebench/stridebench.h"

namespace {

using namespace sb;

const char* short_name(DType t) {
  switch (t) {
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
    case DType::Float16: return "f16";
    case DType::BFloat16: return "bf16";
    case DType::Int8: return "i8";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
  }
  return "?";
}

std::string shape_json(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::string quoted(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') { r += "\\n"; continue; }
    r += c;
  }
  return r + "\"";
}

// Note [Staged parity runs]: with SB_PARITY_DEVICE set (cpu-staged, cuda), each case's
// operands run as twins: every input storage copied whole to that device (flat), each
// operand the same view of its twin (as_strided: sizes, strides and offset kept), the op
// on the twins; then a result that is new memory comes back by to(cpu) (which keeps dense
// strides), one that is a view of a twin is reported as that view of the input's
// storage, and for out= and in place the twins are copied back into the inputs'
// storages before they are written out. The cases call their op through D(), which hands
// out the twin's view in a staged run and the tensor itself otherwise. cpu-staged copies
// to new CPU storage: it runs the staging on a machine without a GPU; cuda runs the
// table on the device, against the same PyTorch-on-CPU reference.
struct Staging {
  bool on = false;
  Device device = Device::cpu();
  std::map<const Storage*, Tensor> twins;  // an input's storage -> its whole copy on `device`, flat
  std::deque<Tensor> handed;               // what D() handed out in this case (references stay valid)
};
Staging g_stage;

Tensor flat_of(const std::shared_ptr<Storage>& s, DType dt) {
  const int64_t n = static_cast<int64_t>(s->nbytes() / dtype_size(dt));
  return Tensor(s, {n}, {1}, 0, dt);
}

// The operand t as the op in this run sees it (an lvalue, for the out= functions).
Tensor& D(const Tensor& t) {
  if (!g_stage.on || !t.defined()) {
    g_stage.handed.push_back(t);
    return g_stage.handed.back();
  }
  const auto it = g_stage.twins.find(t.storage().get());
  // every operand of a case is one of its inputs, so it has a twin; one without would run
  // on the CPU tensor and the staged pass would check nothing for it
  if (it == g_stage.twins.end()) throw std::logic_error("torch_parity_dump: an operand is not among the case's inputs");
  g_stage.handed.push_back(it->second.as_strided(t.sizes(), t.strides(), t.storage_offset()));
  return g_stage.handed.back();
}

class Writer {
 public:
  explicit Writer(const std::string& dir)
      : lines_(dir + "/cases.jsonl"), data_(dir + "/storages.bin", std::ios::binary) {}
  bool ok() const { return lines_.good() && data_.good(); }

  // One case: ins are the op's operands as they are before it runs (for out= and in
  // place the written tensor first); fn runs the op and returns the result (out-of-place)
  // or the written tensor.
  void run(const std::string& name, const std::string& op, const std::string& style, const std::string& params,
           const std::vector<Tensor>& ins, const std::function<Tensor()>& fn) {
    std::map<const Storage*, int> sid;
    std::string storages = "{", inputs = "[";
    for (size_t i = 0; i < ins.size(); ++i) {
      const Storage* s = ins[i].storage().get();
      if (!sid.count(s)) {
        const int id = static_cast<int>(sid.size());
        sid[s] = id;
        storages += (id ? "," : "") + quoted(std::to_string(id)) + ":" + blob(*ins[i].storage());
      }
      inputs += (i ? "," : "") + tensor_json(ins[i]) + ",\"sid\":" + std::to_string(sid[s]) + "}";
    }
    storages += "}";
    inputs += "]";
    g_stage.twins.clear();
    g_stage.handed.clear();
    if (g_stage.on)  // Note [Staged parity runs]
      for (const Tensor& t : ins) {
        const Storage* s = t.storage().get();
        if (g_stage.twins.count(s)) continue;
        const Tensor flat = flat_of(t.storage(), t.dtype());
        g_stage.twins.emplace(s, g_stage.device.is_cpu() ? flat.clone() : flat.to(g_stage.device));
      }
    std::string tail;
    try {
      Tensor r = fn();
      // shares: the result is a view of the first input's storage (views, and contiguous() or to() of
      // a tensor already so), not new memory; in a staged run, of its twin
      const Tensor* of = nullptr;  // the input whose storage (or twin) r views
      for (const Tensor& t : ins) {
        const auto it = g_stage.twins.find(t.storage().get());
        if (r.shares_storage_with(t) || (it != g_stage.twins.end() && r.shares_storage_with(it->second))) {
          of = &t;
          break;
        }
      }
      const bool shares = of != nullptr && of->storage() == ins[0].storage();
      for (const auto& [s, twin] : g_stage.twins)  // the twins back into the inputs' storages
        for (const Tensor& t : ins)
          if (t.storage().get() == s) {
            Tensor flat = flat_of(t.storage(), t.dtype());
            flat.copy_(twin);
            break;
          }
      if (style == "outofplace") {
        if (of != nullptr) r = Tensor(of->storage(), r.sizes(), r.strides(), r.storage_offset(), r.dtype());
        else r = r.to(Device::cpu());
        tail = "\"result\":" + tensor_json(r) + ",\"storage\":" + blob(*r.storage()) +
               ",\"shares\":" + (shares ? "true" : "false") + "}";
      } else {
        tail = "\"after\":" + blob(*ins[0].storage());
      }
    } catch (const Error& e) {
      // and every input storage as the error left it: a refused call writes nothing
      std::string kept = "{";
      std::map<const Storage*, bool> seen;
      for (size_t i = 0; i < ins.size(); ++i) {
        const Storage* st = ins[i].storage().get();
        if (seen[st]) continue;
        seen[st] = true;
        const auto twin = g_stage.twins.find(st);
        if (twin != g_stage.twins.end()) flat_of(ins[i].storage(), ins[i].dtype()).copy_(twin->second);
        kept += (kept.size() > 1 ? "," : "") + quoted(std::to_string(sid[st])) + ":" + blob(*ins[i].storage());
      }
      tail = "\"error\":" + quoted(e.what()) + ",\"kept\":" + kept + "}";
    }
    g_stage.handed.clear();
    g_stage.twins.clear();
    lines_ << "{\"name\":" << quoted(name) << ",\"op\":" << quoted(op) << ",\"style\":" << quoted(style)
           << ",\"params\":{" << params << "},\"storages\":" << storages << ",\"inputs\":" << inputs << "," << tail
           << "}\n";
    ++count_;
  }
  int count() const { return count_; }

 private:
  std::string tensor_json(const Tensor& t) {
    return std::string("{\"dtype\":\"") + short_name(t.dtype()) + "\",\"sizes\":" + shape_json(t.sizes()) +
           ",\"strides\":" + shape_json(t.strides()) + ",\"offset\":" + std::to_string(t.storage_offset());
  }
  // a storage's bytes appended to storages.bin: {"at": byte offset, "n": bytes}
  std::string blob(const Storage& s) {
    const std::string r = "{\"at\":" + std::to_string(at_) + ",\"n\":" + std::to_string(s.nbytes()) + "}";
    data_.write(static_cast<const char*>(s.data()), static_cast<std::streamsize>(s.nbytes()));
    at_ += static_cast<int64_t>(s.nbytes());
    return r;
  }
  std::ofstream lines_, data_;
  int64_t at_ = 0;
  int count_ = 0;
};

// ---------------------------------------------------------------- operands

uint64_t g_seed = 1;

// Values of dtype dt: normal ones (integers: -20..20), and for floats a few specials
// (NaN, +-inf, -0.0) where `special` says.
Tensor values(const Shape& sizes, DType dt, bool special = false) {
  Tensor x = randn(sizes, g_seed++, DType::Float64);
  if (dt == DType::Int32 || dt == DType::Int64 || dt == DType::Int8) {
    std::vector<double> v = x.to_vector();
    Tensor r = empty(sizes, dt);
    const int64_t n = r.numel();
    Tensor flat = r.view({n});
    for (int64_t i = 0; i < n; ++i) flat.set({i}, std::round(v[static_cast<size_t>(i)] * 8));
    return r;
  }
  Tensor r = x.to(dt);
  if (special && r.numel() >= 8) {
    Tensor flat = r.view({r.numel()});
    const double inf = std::numeric_limits<double>::infinity();
    flat.set({1}, std::nan(""));
    flat.set({3}, inf);
    flat.set({4}, -inf);
    flat.set({6}, -0.0);
  }
  return r;
}

// The view of sizes in placement p (cases/layout.h, Note [One layout builder]) holding
// values(): its distinct elements (a broadcast dim narrowed to one) written, the rest of
// its buffer zero.
Tensor placed_values(const Shape& sizes, const cases::Placement& p, DType dt, bool special = false) {
  const cases::Placed placed = cases::place(sizes, p, dt);
  Tensor(placed.buffer).zero_();
  Tensor distinct = placed.view;
  Shape ds = sizes;
  for (int64_t d : cases::broadcast_dims(p)) {
    ds[static_cast<size_t>(d)] = std::min<int64_t>(1, sizes[static_cast<size_t>(d)]);
    distinct = distinct.narrow(d, 0, ds[static_cast<size_t>(d)]);
  }
  distinct.copy_(values(ds, dt, special));
  return placed.view;
}

// sizes laid out as the named layout of cases/layout.h says:
//   c   contiguous    t   transposed    s   sliced (every other element of the last dim)
//   cl  channels_last x   expanded      o   offset (one element into its buffer)
Tensor laid_out(const std::string& layout, const Shape& sizes, DType dt, bool special = false) {
  using cases::Layout;
  const Layout l = layout == "t"    ? Layout::Transposed
                   : layout == "s"  ? Layout::Sliced
                   : layout == "cl" ? Layout::ChannelsLast
                   : layout == "x"  ? Layout::Expanded
                   : layout == "o"  ? Layout::Offset
                                    : Layout::Contiguous;
  return placed_values(sizes, cases::placement(l, sizes), dt, special);
}

// An output to write into, poisoned with values every op result differs from.
Tensor out_like(const std::string& layout, const Shape& sizes, DType dt) {
  Tensor o = laid_out(layout, sizes, dt);
  const bool integral = dt == DType::Int32 || dt == DType::Int64 || dt == DType::Int8;
  o.fill_(integral ? 77 : 1234.5);
  return o;
}

std::string p_num(const char* k, double v) {
  std::ostringstream s;
  s.precision(17);
  s << "\"" << k << "\":" << v;
  return s.str();
}
std::string p_str(const char* k, const std::string& v) { return std::string("\"") + k + "\":" + quoted(v); }
std::string p_shape(const char* k, const Shape& v) { return std::string("\"") + k + "\":" + shape_json(v); }
std::string join(std::initializer_list<std::string> parts) {
  std::string r;
  for (const auto& p : parts)
    if (!p.empty()) r += (r.empty() ? "" : ",") + p;
  return r;
}

// ---------------------------------------------------------------- the table

void elementwise_cases(Writer& w) {
  const std::vector<std::pair<std::string, BinaryOp>> bin = {{"add", BinaryOp::Add},         {"sub", BinaryOp::Sub},
                                                             {"mul", BinaryOp::Mul},         {"div", BinaryOp::Div},
                                                             {"maximum", BinaryOp::Maximum}, {"minimum", BinaryOp::Minimum}};
  const std::vector<DType> dts = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32};
  // (a's layout, a's sizes, b's layout, b's sizes): broadcasting and layouts
  struct Pair {
    const char* la;
    Shape sa;
    const char* lb;
    Shape sb;
  };
  const std::vector<Pair> pairs = {
      {"c", {5, 7}, "c", {5, 7}},          {"t", {5, 7}, "c", {5, 7}},          {"c", {5, 7}, "t", {5, 7}},
      {"c", {5, 7}, "c", {1, 7}},          {"c", {5, 7}, "c", {5, 1}},          {"c", {5, 7}, "c", {7}},
      {"s", {4, 6}, "c", {4, 6}},          {"c", {3, 4, 5}, "x", {3, 4, 5}},    {"cl", {2, 3, 4, 5}, "c", {2, 3, 4, 5}},
      {"c", {2, 3, 4, 5}, "cl", {2, 3, 4, 5}}, {"cl", {2, 3, 4, 5}, "cl", {2, 3, 4, 5}}, {"cl", {2, 3, 4, 5}, "c", {1, 3, 1, 1}},
      {"c", {2, 3, 1, 5}, "c", {4, 1}},    {"o", {3, 8}, "t", {3, 8}},          {"c", {4, 6}, "c", {}},
      // past the vector widths, the tiles and the row blocks: the kernels' main loops and their tails
      {"t", {37, 129}, "c", {37, 129}},    {"cl", {2, 16, 9, 31}, "c", {2, 16, 9, 31}}, {"s", {33, 70}, "c", {1, 70}},
  };
  for (const auto& entry : bin)
    for (DType dt : dts) {
      const std::string& name = entry.first;
      const BinaryOp op = entry.second;  // named: C++17 lambdas capture no bindings
      if (dt == DType::Int32 && op == BinaryOp::Div) continue;  // refused on purpose (LIBRARY.md)
      const bool fl = dt != DType::Int32;
      for (const Pair& p : pairs) {
        const std::string tag = name + "/" + short_name(dt) + "/" + p.la + shape_json(p.sa) + "," + p.lb + shape_json(p.sb);
        {
          const Tensor a = laid_out(p.la, p.sa, dt, fl), b = laid_out(p.lb, p.sb, dt);
          w.run(tag, name, "outofplace", "", {a, b}, [&] { return binary(op, D(a), D(b)); });
        }
        // out=: contiguous, and transposed where 2-D or more; the broadcast shape
        const Shape bs = broadcast_shapes(p.sa, p.sb, "torch_parity");
        for (const char* lo : {"c", "t"}) {
          if (std::string(lo) == "t" && bs.size() < 2) continue;
          Tensor o = out_like(lo, bs, dt);
          const Tensor a = laid_out(p.la, p.sa, dt, fl), b = laid_out(p.lb, p.sb, dt);
          w.run(tag + "/out:" + lo, name, "out", "", {o, a, b}, [&] { return binary_out(op, D(o), D(a), D(b)); });
        }
        if (std::string(p.la) != "x") {  // in place: a is written (an error where b's shape would grow it)
          Tensor a = laid_out(p.la, p.sa, dt, fl);
          const Tensor b = laid_out(p.lb, p.sb, dt);
          w.run(tag + "/inplace", name, "inplace", "", {a, b}, [&]() -> Tensor {
            switch (op) {
              case BinaryOp::Add: return D(a).add_(D(b));
              case BinaryOp::Sub: return D(a).sub_(D(b));
              case BinaryOp::Mul: return D(a).mul_(D(b));
              case BinaryOp::Div: return D(a).div_(D(b));
              case BinaryOp::Maximum: return D(a).maximum_(D(b));
              case BinaryOp::Minimum: return D(a).minimum_(D(b));
            }
            return D(a);
          });
        }
      }
      // tensor-scalar (PyTorch has no maximum/minimum with a Python scalar)
      if (op == BinaryOp::Maximum || op == BinaryOp::Minimum) continue;
      for (double s : {0.3, -2.0, 1e-3}) {
        if (!fl && s != -2.0) continue;
        for (const char* la : {"c", "t"}) {
          const Tensor a = laid_out(la, {6, 5}, dt, fl);
          const std::string tag = name + "/" + short_name(dt) + "/" + la + "[6,5]/scalar" + std::to_string(s);
          w.run(tag, name, "outofplace", p_num("scalar", s), {a}, [&] { return binary(op, D(a), s); });
          Tensor o = out_like("t", {6, 5}, dt);
          w.run(tag + "/out:t", name, "out", p_num("scalar", s), {o, a}, [&] { return binary_out(op, D(o), D(a), s); });
        }
      }
    }

  const std::vector<std::pair<std::string, UnaryOp>> un = {{"neg", UnaryOp::Neg},
                                                           {"abs", UnaryOp::Abs},
                                                           {"relu", UnaryOp::Relu},
                                                           {"exp", UnaryOp::Exp},
                                                           {"sqrt", UnaryOp::Sqrt}};
  for (const auto& entry : un)
    for (DType dt : dts) {
      const std::string& name = entry.first;
      const UnaryOp op = entry.second;  // named: C++17 lambdas capture no bindings
      if (dt == DType::Int32 && (op == UnaryOp::Exp || op == UnaryOp::Sqrt)) continue;  // refused on purpose
      const bool fl = dt != DType::Int32;
      for (const char* la : {"c", "t", "s", "cl", "o", "T"}) {
        // T: a transposed operand past the tiles' sizes
        const std::string l = la;
        const Shape sizes = l == "cl" ? Shape{2, 3, 4, 5} : l == "T" ? Shape{67, 140} : Shape{6, 9};
        la = l == "T" ? "t" : la;
        const std::string tag = name + "/" + short_name(dt) + "/" + la + shape_json(sizes);
        {
          const Tensor a = laid_out(la, sizes, dt, fl);
          w.run(tag, name, "outofplace", "", {a}, [&] { return unary(op, D(a)); });
        }
        for (const char* lo : {"c", "t"}) {
          Tensor o = out_like(lo, sizes, dt);
          const Tensor a = laid_out(la, sizes, dt, fl);
          w.run(tag + "/out:" + lo, name, "out", "", {o, a}, [&] { return unary_out(op, D(o), D(a)); });
        }
        Tensor a = laid_out(la, sizes, dt, fl);
        w.run(tag + "/inplace", name, "inplace", "", {a}, [&]() -> Tensor {
          switch (op) {
            case UnaryOp::Neg: return D(a).neg_();
            case UnaryOp::Abs: return D(a).abs_();
            case UnaryOp::Relu: return D(a).relu_();
            case UnaryOp::Exp: return D(a).exp_();
            case UnaryOp::Sqrt: return D(a).sqrt_();
          }
          return D(a);
        });
      }
    }

  // normalize along the last dim is PyTorch's layer_norm without an affine part
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16})
    for (const char* la : {"c", "t", "s"}) {
      const Shape sizes = {7, 33};
      const std::string tag = std::string("normalize/") + short_name(dt) + "/" + la + shape_json(sizes);
      const Tensor a = laid_out(la, sizes, dt);
      w.run(tag, "normalize", "outofplace", p_num("eps", 1e-5), {a}, [&] { return normalize(D(a), -1, 1e-5); });
      Tensor o = out_like("t", sizes, dt);
      w.run(tag + "/out:t", "normalize", "out", p_num("eps", 1e-5), {o, a}, [&] { return normalize_out(D(o), D(a), -1, 1e-5); });
      Tensor x = laid_out(la, sizes, dt);
      w.run(tag + "/inplace", "normalize", "inplace", p_num("eps", 1e-5), {x}, [&]() -> Tensor { return D(x).normalize_(-1, 1e-5); });
    }
}

void reduce_cases(Writer& w) {
  const std::vector<DType> dts = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32};
  const std::vector<Shape> dimsets = {{}, {0}, {1}, {-1}, {0, 2}};
  for (const char* name : {"sum", "mean", "max", "var", "std"})
    for (DType dt : dts) {
      const std::string n = name;
      if (dt == DType::Int32 && n != "sum" && n != "max") continue;  // mean, var, std refuse integers on purpose
      for (const char* la : {"c", "t", "s"}) {  // past the vector widths and the column blocks
        const Tensor x = laid_out(la, {130, 257}, dt);
        for (const Shape& dims : std::vector<Shape>{{0}, {1}, {}}) {
          const std::string tag = n + "/" + short_name(dt) + "/" + la + "[130,257]/dims" + shape_json(dims);
          const std::string params = join({p_shape("dims", dims), "\"keepdim\":false",
                                            (n == "var" || n == "std") ? p_num("correction", 1) : ""});
          w.run(tag, n, "outofplace", params, {x}, [&] {
            if (n == "sum") return sum(D(x), dims, false);
            if (n == "mean") return mean(D(x), dims, false);
            if (n == "max") return max(D(x), dims, false);
            if (n == "var") return var(D(x), dims, 1, false);
            return sb::std(D(x), dims, 1, false);
          });
        }
      }
      for (const char* la : {"c", "t", "s", "o"})
        for (const Shape& dims : dimsets)
          for (bool keep : {false, true}) {
            if (n == "max" && dims.empty() && keep) continue;  // PyTorch's max() of all takes no keepdim
            for (int64_t corr : {int64_t{1}, int64_t{0}}) {
              if ((n != "var" && n != "std") && corr == 0) continue;
              const Tensor x = laid_out(la, {4, 5, 6}, dt);
              std::string tag = n + "/" + short_name(dt) + "/" + la + "[4,5,6]/dims" + shape_json(dims) + (keep ? "/keep" : "");
              if (n == "var" || n == "std") tag += "/corr" + std::to_string(corr);
              const std::string params = join({p_shape("dims", dims), keep ? "\"keepdim\":true" : "\"keepdim\":false",
                                                (n == "var" || n == "std") ? p_num("correction", static_cast<double>(corr)) : ""});
              w.run(tag, n, "outofplace", params, {x}, [&] {
                if (n == "sum") return sum(D(x), dims, keep);
                if (n == "mean") return mean(D(x), dims, keep);
                if (n == "max") return max(D(x), dims, keep);
                if (n == "var") return var(D(x), dims, corr, keep);
                return sb::std(D(x), dims, corr, keep);
              });
            }
          }
    }
  // out=: a transposed out, keepdim or not
  for (DType dt : {DType::Float32, DType::BFloat16})
    for (bool keep : {false, true}) {
      const Tensor x = laid_out("t", {6, 5, 7}, dt);
      const Shape os = keep ? Shape{6, 1, 7} : Shape{6, 7};
      const std::string params = join({p_shape("dims", {1}), keep ? "\"keepdim\":true" : "\"keepdim\":false"});
      const std::string tag = std::string("/") + short_name(dt) + "/t[6,5,7]/dims[1]" + (keep ? "/keep" : "") + "/out:t";
      Tensor o1 = out_like("t", os, dt), o2 = out_like("t", os, dt), o3 = out_like("t", os, dt);
      w.run("sum" + tag, "sum", "out", params, {o1, x}, [&] { return sum_out(D(o1), D(x), {1}, keep); });
      w.run("max" + tag, "max", "out", params, {o2, x}, [&] { return max_out(D(o2), D(x), {1}, keep); });
      w.run("mean" + tag, "mean", "out", params, {o3, x}, [&] { return mean_out(D(o3), D(x), {1}, keep); });
    }
  // NaN through max; an empty reduction
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    const Tensor x = values({4, 9}, dt, true);
    w.run(std::string("max/") + short_name(dt) + "/nan", "max", "outofplace", join({p_shape("dims", {1}), "\"keepdim\":false"}), {x},
          [&] { return max(D(x), {1}, false); });
    w.run(std::string("sum/") + short_name(dt) + "/nan", "sum", "outofplace", join({p_shape("dims", {1}), "\"keepdim\":false"}), {x},
          [&] { return sum(D(x), {1}, false); });
  }
  const Tensor e = empty({0, 3});
  w.run("sum/f32/empty", "sum", "outofplace", join({p_shape("dims", {0}), "\"keepdim\":false"}), {e}, [&] { return sum(D(e), {0}, false); });
  w.run("max/f32/empty", "max", "outofplace", join({p_shape("dims", {0}), "\"keepdim\":false"}), {e}, [&] { return max(D(e), {0}, false); });
}

void matmul_cases(Writer& w) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    struct M {
      const char* la;
      Shape sa;
      const char* lb;
      Shape sb;
    };
    for (const M& m : std::vector<M>{{"c", {9, 17}, "c", {17, 13}},
                                     {"t", {9, 17}, "c", {17, 13}},
                                     {"c", {9, 17}, "t", {17, 13}},
                                     {"s", {9, 17}, "t", {17, 13}},
                                     {"c", {3, 9, 17}, "c", {3, 17, 13}},
                                     {"t", {3, 9, 17}, "c", {3, 17, 13}},
                                     {"c", {9, 17}, "c", {17, 1}},
                                     {"c", {65, 130}, "t", {130, 33}},
                                     {"t", {70, 300}, "c", {300, 50}},
                                     // batches that broadcast, vectors, 4-D
                                     {"c", {1, 9, 17}, "c", {3, 17, 13}},
                                     {"c", {3, 9, 17}, "c", {17, 13}},
                                     {"c", {9, 17}, "t", {3, 17, 13}},
                                     {"c", {17}, "c", {17, 13}},
                                     {"c", {9, 17}, "c", {17}},
                                     {"c", {17}, "c", {17}},
                                     {"c", {2, 3, 9, 17}, "c", {2, 3, 17, 13}},
                                     {"c", {9, 17}, "c", {18, 13}}}) {
      const Tensor a = laid_out(m.la, m.sa, dt), b = laid_out(m.lb, m.sb, dt);
      const std::string tag = std::string("matmul/") + short_name(dt) + "/" + m.la + shape_json(m.sa) + "," + m.lb + shape_json(m.sb);
      w.run(tag, "matmul", "outofplace", "", {a, b}, [&] { return matmul(D(a), D(b)); });
      if (m.sa.size() == 2 && m.sb.size() == 2 && m.sb[0] == m.sa[1]) {
        Tensor o = out_like("t", {m.sa[0], m.sb[1]}, dt);
        w.run(tag + "/out:t", "matmul", "out", "", {o, a, b}, [&] { return matmul_out(D(o), D(a), D(b)); });
      }
    }
  }
}

void conv_cases(Writer& w) {
  for (DType dt : {DType::Float32, DType::BFloat16})
    for (const char* lx : {"c", "cl"})
      for (const char* lw : {"c", "cl"}) {
        struct C {
          Shape x, w;
          int64_t stride, padding, dilation, groups;
          bool bias, relu;
        };
        for (const C& c : std::vector<C>{{{2, 4, 9, 8}, {6, 4, 3, 3}, 1, 1, 1, 1, true, false},
                                         {{2, 4, 9, 8}, {6, 4, 3, 3}, 2, 0, 1, 1, false, true},
                                         {{1, 6, 11, 10}, {6, 2, 3, 3}, 1, 2, 2, 3, true, false},
                                         {{2, 4, 7, 7}, {4, 1, 3, 3}, 1, 1, 1, 4, true, true},
                                         {{2, 8, 5, 6}, {3, 8, 1, 1}, 1, 0, 1, 1, false, false}}) {
          const Tensor x = laid_out(lx, c.x, dt), wt = laid_out(lw, c.w, dt);
          const Tensor b = c.bias ? values({c.w[0]}, dt) : Tensor();
          const Conv2dParams p{c.stride, c.padding, c.dilation, c.groups};
          const std::string tag = std::string("conv2d/") + short_name(dt) + "/" + lx + shape_json(c.x) + "," + lw +
                                  shape_json(c.w) + "/s" + std::to_string(c.stride) + "p" + std::to_string(c.padding) +
                                  "d" + std::to_string(c.dilation) + "g" + std::to_string(c.groups) +
                                  (c.bias ? "/bias" : "") + (c.relu ? "/relu" : "");
          const std::string params = join({p_num("stride", c.stride), p_num("padding", c.padding), p_num("dilation", c.dilation),
                                           p_num("groups", c.groups), c.relu ? "\"relu\":true" : "\"relu\":false"});
          std::vector<Tensor> ins = {x, wt};
          if (c.bias) ins.push_back(b);
          w.run(tag, "conv2d", "outofplace", params, ins, [&] { return conv2d(D(x), D(wt), D(b), p, c.relu); });
          // out=: into the other layout than the one conv2d would give
          Tensor o = out_like(std::string(lx) == "cl" ? "c" : "cl", conv2d_output_sizes(x, wt, b, p), dt);
          std::vector<Tensor> oins = {o, x, wt};
          if (c.bias) oins.push_back(b);
          w.run(tag + "/out", "conv2d", "out", params, oins, [&] { return conv2d_out(D(o), D(x), D(wt), D(b), p, c.relu); });
        }
      }
  for (const char* name : {"max_pool2d", "avg_pool2d"})
    for (const char* lx : {"c", "cl", "t"})
      for (const Pool2dParams& p : {Pool2dParams{2, 0, 0}, Pool2dParams{3, 2, 1}, Pool2dParams{3, 1, 1}}) {
        const Tensor x = laid_out(lx, {2, 3, 9, 10}, DType::Float32, std::string(name) == "max_pool2d");
        const std::string tag = std::string(name) + "/f32/" + lx + "[2,3,9,10]/k" + std::to_string(p.kernel) + "s" +
                                std::to_string(p.stride) + "p" + std::to_string(p.padding);
        const std::string params = join({p_num("kernel", p.kernel), p_num("stride", p.stride ? p.stride : p.kernel),
                                         p_num("padding", p.padding)});
        const bool mx = std::string(name) == "max_pool2d";
        w.run(tag, name, "outofplace", params, {x}, [&] { return mx ? max_pool2d(D(x), p) : avg_pool2d(D(x), p); });
        const int64_t oh = (9 + 2 * p.padding - p.kernel) / (p.stride ? p.stride : p.kernel) + 1,
                      ow = (10 + 2 * p.padding - p.kernel) / (p.stride ? p.stride : p.kernel) + 1;
        Tensor o = out_like("t", {2, 3, oh, ow}, DType::Float32);
        w.run(tag + "/out:t", name, "out", params, {o, x},
              [&] { return mx ? max_pool2d_out(D(o), D(x), p) : avg_pool2d_out(D(o), D(x), p); });
      }
}

void copy_cases(Writer& w) {
  const std::vector<DType> all = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                  DType::Int8,    DType::Int32,   DType::Int64};
  for (DType from : all)
    for (DType to : all) {
      const bool ffrom = from == DType::Float32 || from == DType::Float64 || from == DType::Float16 || from == DType::BFloat16;
      const bool fto = to == DType::Float32 || to == DType::Float64 || to == DType::Float16 || to == DType::BFloat16;
      for (const char* la : {"c", "t"}) {
        // float -> integer: NaN, infinities and values past the range are undefined in
        // C++ and implementation-defined in PyTorch: the values here are in range
        const Tensor x = laid_out(la, {5, 6}, from, ffrom && fto);
        const std::string tag = std::string("to/") + short_name(from) + "->" + short_name(to) + "/" + la + "[5,6]";
        w.run(tag, "to", "outofplace", p_str("dtype", short_name(to)), {x}, [&] { return D(x).to(to); });
        Tensor o = out_like("t", {5, 6}, to);
        w.run(tag + "/copy_:t", "copy_", "inplace", "", {o, x}, [&] { return D(o).copy_(D(x)); });
      }
    }
  // copy_ broadcasting its source, across dtypes, into stepped and transposed dsts
  for (const char* lo : {"c", "t", "s"})
    for (const Shape& src : {Shape{6}, Shape{1, 6}, Shape{5, 1}, Shape{}}) {
      Tensor o = out_like(lo, {5, 6}, DType::BFloat16);
      const Tensor x = values(src, DType::Float32);
      w.run(std::string("copy_/broadcast/") + lo + "[5,6]<-f32" + shape_json(src), "copy_", "inplace", "", {o, x},
            [&] { return D(o).copy_(D(x)); });
    }
  // rounding to the 16-bit floats at their halfway points, subnormals and overflow
  {
    std::vector<float> v = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                            -(1.0f + 1.0f / 256), 65504.0f, 65520.0f, 65536.0f,
                            3.3895314e38f, 3.4e38f, 1e-40f, -1e-42f,
                            6e-8f, 3e-8f, 1e-5f, 0.1f};
    const Tensor x = from_vector<float>(v, {16});
    for (DType to : {DType::BFloat16, DType::Float16})
      w.run(std::string("to/f32->") + short_name(to) + "/rounding", "to", "outofplace", p_str("dtype", short_name(to)),
            {x}, [&] { return D(x).to(to); });
  }
  // layouts of contiguous() and clone()
  for (const char* la : {"c", "t", "s", "cl", "x"}) {
    const Shape sizes = {2, 3, 4, 5};
    const Tensor x = laid_out(la, sizes, DType::Float32);
    const std::string tag = std::string("[2,3,4,5]/") + la;
    w.run("contiguous" + tag, "contiguous", "outofplace", "", {x}, [&] { return D(x).contiguous(); });
    w.run("contiguous_cl" + tag, "contiguous_cl", "outofplace", "", {x}, [&] { return D(x).contiguous(MemoryFormat::ChannelsLast); });
    w.run("clone" + tag, "clone", "outofplace", "", {x}, [&] { return D(x).clone(); });
  }
}

// View ops and the copies PyTorch's rules make instead: sizes, strides, offset and
// whether the result shares the input's storage. args are the PyTorch method's.
void view_cases(Writer& w) {
  struct V {
    const char* op;
    const char* args;
    std::function<Tensor(const Tensor&)> f;
  };
  const std::vector<V> views = {
      {"view", "[[-1]]", [](const Tensor& x) { return x.view({-1}); }},
      {"view", "[[6, 20]]", [](const Tensor& x) { return x.view({6, 20}); }},
      {"view", "[[2, 3, 20]]", [](const Tensor& x) { return x.view({2, 3, 20}); }},
      {"reshape", "[[-1]]", [](const Tensor& x) { return x.reshape({-1}); }},
      {"reshape", "[[6, 20]]", [](const Tensor& x) { return x.reshape({6, 20}); }},
      {"reshape", "[[2, 60]]", [](const Tensor& x) { return x.reshape({2, 60}); }},
      {"reshape", "[[4, 3, 10]]", [](const Tensor& x) { return x.reshape({4, 3, 10}); }},
      {"flatten", "[0, -1]", [](const Tensor& x) { return x.flatten(0, -1); }},
      {"flatten", "[1, 2]", [](const Tensor& x) { return x.flatten(1, 2); }},
      {"flatten", "[2, 3]", [](const Tensor& x) { return x.flatten(2, 3); }},
      {"permute", "[[0, 2, 3, 1]]", [](const Tensor& x) { return x.permute({0, 2, 3, 1}); }},
      {"transpose", "[1, 3]", [](const Tensor& x) { return x.transpose(1, 3); }},
      {"slice", "[3, 1, null, 2]", [](const Tensor& x) { return x.slice(3, 1, std::nullopt, 2); }},
      {"slice", "[1, 0, 2, 1]", [](const Tensor& x) { return x.slice(1, 0, 2); }},
      {"select", "[2, 1]", [](const Tensor& x) { return x.select(2, 1); }},
      {"narrow", "[3, 1, 3]", [](const Tensor& x) { return x.narrow(3, 1, 3); }},
      {"unsqueeze", "[2]", [](const Tensor& x) { return x.unsqueeze(2); }},
      {"unflatten", "[3, [5, 1]]", [](const Tensor& x) { return x.unflatten(3, {5, 1}); }},
      // negative dims and indices, as PyTorch counts them from the end
      {"select", "[-1, -2]", [](const Tensor& x) { return x.select(-1, -2); }},
      {"narrow", "[-2, -3, 2]", [](const Tensor& x) { return x.narrow(-2, -3, 2); }},
      {"slice", "[-1, -4, -1, 1]", [](const Tensor& x) { return x.slice(-1, -4, -1); }},
      {"slice", "[2, -10, 10, 3]", [](const Tensor& x) { return x.slice(2, -10, 10, 3); }},
      {"transpose", "[-1, -3]", [](const Tensor& x) { return x.transpose(-1, -3); }},
      {"permute", "[[-1, 0, -2, 1]]", [](const Tensor& x) { return x.permute({-1, 0, -2, 1}); }},
      {"flatten", "[-3, -2]", [](const Tensor& x) { return x.flatten(-3, -2); }},
      {"unsqueeze", "[-1]", [](const Tensor& x) { return x.unsqueeze(-1); }},
      {"unsqueeze", "[-5]", [](const Tensor& x) { return x.unsqueeze(-5); }},
      {"unflatten", "[-1, [-1, 5]]", [](const Tensor& x) { return x.unflatten(-1, {-1, 5}); }},
      {"contiguous", "[]", [](const Tensor& x) { return x.contiguous(); }},
      {"to", "[\"f32\"]", [](const Tensor& x) { return x.to(DType::Float32); }},
  };
  for (const char* la : {"c", "t", "s", "cl", "x", "o"})
    for (const V& v : views) {
      const Tensor x = laid_out(la, {2, 3, 4, 5}, DType::Float32);
      const std::string tag = std::string("view/") + v.op + v.args + "/" + la + "[2,3,4,5]";
      w.run(tag, v.op, "outofplace", std::string("\"args\":") + v.args, {x}, [&] { return v.f(D(x)); });
    }
  // expand and squeeze of size-1 dims
  for (const char* la : {"c", "t"}) {
    const Tensor x = laid_out(la, {1, 3, 1, 5}, DType::Float32);
    const std::string tag = std::string("[1,3,1,5]/") + la;
    w.run("view/expand" + tag, "expand", "outofplace", "\"args\":[[2, 3, 4, 5]]", {x}, [&] { return D(x).expand({2, 3, 4, 5}); });
    w.run("view/expand_new_dim" + tag, "expand", "outofplace", "\"args\":[[6, 1, 3, 2, 5]]", {x},
          [&] { return D(x).expand({6, 1, 3, 2, 5}); });
    w.run("view/squeeze" + tag, "squeeze", "outofplace", "\"args\":[]", {x}, [&] { return D(x).squeeze(); });
    w.run("view/squeeze0" + tag, "squeeze", "outofplace", "\"args\":[0]", {x}, [&] { return D(x).squeeze(0); });
    w.run("view/squeeze1" + tag, "squeeze", "outofplace", "\"args\":[1]", {x}, [&] { return D(x).squeeze(1); });
  }
}

// Factories: arange's element count and values with fractional steps, in each dtype
void factory_cases(Writer& w) {
  struct A {
    double start, end, step;
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32})
    for (const A& a : {A{0, 1, 0.1}, A{1, 2.5, 0.5}, A{-3, 3, 0.7}, A{10, 0, -1.5}, A{0, 100, 3}, A{0.5, 0.5, 1}}) {
      const bool integral = dt == DType::Int32;
      if (integral && (a.step != std::floor(a.step) || a.start != std::floor(a.start))) continue;
      std::ostringstream tag;
      tag << "arange/" << short_name(dt) << "/" << a.start << "," << a.end << "," << a.step;
      w.run(tag.str(), "arange", "outofplace",
            join({p_num("start", a.start), p_num("end", a.end), p_num("step", a.step), p_str("dtype", short_name(dt))}), {},
            [&] { return arange(a.start, a.end, a.step, dt, g_stage.on ? g_stage.device : Device::cpu()); });
    }
}

// Linear in float32 and in the 16-bit precisions with a 16-bit x (PyTorch's
// module.half() / module.bfloat16() layer: weight and bias rounded to that dtype)
void linear_cases(Writer& w) {
  for (Precision pr : {Precision::F32, Precision::F16, Precision::BF16})
    for (bool relu : {false, true})
      for (bool bias : {true, false}) {
        const DType xd = pr == Precision::F32 ? DType::Float32 : pr == Precision::F16 ? DType::Float16 : DType::BFloat16;
        const Tensor wt = values({37, 70}, DType::Float32), b = bias ? values({37}, DType::Float32) : Tensor();
        const Tensor x = laid_out("t", {9, 70}, xd);
        const std::string tag = std::string("linear/") + precision_name(pr) + "/x:" + short_name(xd) +
                                (bias ? "/bias" : "") + (relu ? "/relu" : "");
        std::vector<Tensor> ins = {x, wt};
        if (bias) ins.push_back(b);
        w.run(tag, "linear", "outofplace", join({p_str("precision", precision_name(pr)), relu ? "\"relu\":true" : "\"relu\":false"}),
              ins, [&] { return Linear(D(wt), D(b), pr).forward(D(x), relu); });
      }
}

// Zero-size operands, and views whose elements interleave without sharing any
void edge_cases(Writer& w) {
  {  // int32 past its range: add, sub, mul, neg and abs wrap around (two's complement), as PyTorch's do
    const std::vector<int32_t> v = {INT32_MIN, INT32_MAX, -1, 0, 1, INT32_MIN + 1, 46341, -46341, 65536, 123456789};
    const Tensor x = from_vector<int32_t>(v, {10}), y = from_vector<int32_t>({INT32_MAX, 1, INT32_MIN, -1, INT32_MAX,
                                                                               -2, 46341, 46341, 65536, 987654321}, {10});
    for (const auto& entry : std::vector<std::pair<std::string, BinaryOp>>{
             {"add", BinaryOp::Add}, {"sub", BinaryOp::Sub}, {"mul", BinaryOp::Mul}}) {
      const BinaryOp op = entry.second;
      w.run("edge/" + entry.first + "/i32_wraps", entry.first, "outofplace", "", {x, y},
            [&] { return binary(op, D(x), D(y)); });
    }
    w.run("edge/neg/i32_wraps", "neg", "outofplace", "", {x}, [&] { return neg(D(x)); });
    w.run("edge/abs/i32_wraps", "abs", "outofplace", "", {x}, [&] { return abs(D(x)); });
    w.run("edge/sum/i32_wraps", "sum", "outofplace", join({p_shape("dims", {}), "\"keepdim\":false"}), {x},
          [&] { return sum(D(x)); });
  }
  {
    const Tensor a = values({0, 5}, DType::Float32), b = values({0, 5}, DType::Float32);
    w.run("edge/add/empty", "add", "outofplace", "", {a, b}, [&] { return add(D(a), D(b)); });
    w.run("edge/relu/empty", "relu", "outofplace", "", {a}, [&] { return relu(D(a)); });
  }
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    const Tensor a = values({0, 4}, dt), b = values({4, 3}, dt);
    w.run(std::string("edge/matmul/m0/") + short_name(dt), "matmul", "outofplace", "", {a, b}, [&] { return matmul(D(a), D(b)); });
    const Tensor c = values({3, 0}, dt), d = values({0, 4}, dt);
    w.run(std::string("edge/matmul/k0/") + short_name(dt), "matmul", "outofplace", "", {c, d}, [&] { return matmul(D(c), D(d)); });
  }
  {
    const Tensor x = values({0}, DType::Float32);
    w.run("edge/sum/empty_all", "sum", "outofplace", join({p_shape("dims", {}), "\"keepdim\":false"}), {x}, [&] { return sum(D(x)); });
    w.run("edge/mean/empty_all", "mean", "outofplace", join({p_shape("dims", {}), "\"keepdim\":false"}), {x}, [&] { return mean(D(x)); });
  }
  {  // x[:, 0::2] += x[:, 1::2]: the two views share no element
    const Tensor base = values({4, 10}, DType::Float32);
    Tensor even = base.slice(1, 0, std::nullopt, 2);
    const Tensor odd = base.slice(1, 1, std::nullopt, 2);
    w.run("edge/add_/interleaved", "add", "inplace", "", {even, odd}, [&]() -> Tensor { return D(even).add_(D(odd)); });
  }
  {  // neg_out(x[1:], x[:-1]): out and x share elements at other positions
    const Tensor base = values({8}, DType::Float32);
    Tensor o = base.slice(0, 1, std::nullopt);
    const Tensor x = base.slice(0, 0, 7);
    w.run("error/neg_out/shifted", "neg", "out", "", {o, x}, [&] { return neg_out(D(o), D(x)); });
  }
}

// A placement of `sizes` in a random memory order: dims stored in a random permutation,
// sometimes every other element of one dim, sometimes one dim broadcast (step 0).
cases::Placement random_placement(std::mt19937& rng, const Shape& sizes) {
  const int nd = static_cast<int>(sizes.size());
  cases::Placement p = cases::dense(sizes);
  std::shuffle(p.order.begin(), p.order.end(), rng);
  if (nd > 0 && rng() % 3 == 0) p.step[rng() % nd] = 2;
  if (nd > 0 && rng() % 4 == 0) p.step[rng() % nd] = 0;
  return p;
}

// Random layouts of both operands (and broadcast shapes): the layout rules of
// out-of-place results (PyTorch's TensorIterator order: the first input's strides,
// ties broken by the next, broadcast dims last) and of clone() and to(), on draws no
// table lists.
void random_layout_cases(Writer& w) {
  std::mt19937 rng(20261203);
  for (int i = 0; i < 300; ++i) {
    const int nd = 1 + static_cast<int>(rng() % 4);
    Shape sa(static_cast<size_t>(nd)), sb;
    for (auto& v : sa) v = 1 + static_cast<int64_t>(rng() % 4);
    sb = sa;
    if (rng() % 3 == 0)  // b broadcasts: some of its dims 1, maybe fewer leading dims
      for (auto& v : sb)
        if (rng() % 2 == 0) v = 1;
    if (rng() % 4 == 0 && nd > 1) sb.erase(sb.begin());
    const std::string tag = "random/" + std::to_string(i) + "/" + shape_json(sa) + "," + shape_json(sb);
    const Tensor a = placed_values(sa, random_placement(rng, sa), DType::Float32),
                 b = placed_values(sb, random_placement(rng, sb), DType::Float32);
    w.run(tag + "/add", "add", "outofplace", "", {a, b}, [&] { return add(D(a), D(b)); });
    w.run(tag + "/add_ba", "add", "outofplace", "", {b, a}, [&] { return add(D(b), D(a)); });
    w.run(tag + "/relu", "relu", "outofplace", "", {a}, [&] { return relu(D(a)); });
    w.run(tag + "/mul_scalar", "mul", "outofplace", p_num("scalar", 0.5), {a}, [&] { return mul(D(a), 0.5); });
    w.run(tag + "/clone", "clone", "outofplace", "", {a}, [&] { return D(a).clone(); });
    w.run(tag + "/to_bf16", "to", "outofplace", p_str("dtype", "bf16"), {a}, [&] { return D(a).to(DType::BFloat16); });
  }
}

void error_cases(Writer& w) {
  // broadcasting 3 with 2; an in-place op whose result would be larger than self
  {
    const Tensor a = values({3}, DType::Float32), b = values({2}, DType::Float32);
    w.run("error/add/broadcast", "add", "outofplace", "", {a, b}, [&] { return add(D(a), D(b)); });
  }
  {
    Tensor a = values({3, 1}, DType::Float32);
    const Tensor b = values({1, 4}, DType::Float32);
    w.run("error/add_/grows", "add", "inplace", "", {a, b}, [&]() -> Tensor { return D(a).add_(D(b)); });
  }
  // writing into an expanded tensor; an input overlapping the output elsewhere
  {
    Tensor o = values({1, 4}, DType::Float32).expand({3, 4});
    const Tensor a = values({3, 4}, DType::Float32);
    w.run("error/relu_out/expanded", "relu", "out", "", {o, a}, [&] { return relu_out(D(o), D(a)); });
  }
  {
    Tensor a = values({4, 4}, DType::Float32);
    const Tensor at = a.t();
    w.run("error/add_/overlap", "add", "inplace", "", {a, at}, [&]() -> Tensor { return D(a).add_(D(at)); });
  }
  {
    Tensor a = values({4, 4}, DType::Float32);
    w.run("ok/add_/self", "add", "inplace", "", {a, a}, [&]() -> Tensor { return D(a).add_(D(a)); });
  }
  // matmul with inner sizes that differ; conv2d with groups that do not divide
  {
    const Tensor a = values({3, 4}, DType::Float32), b = values({5, 2}, DType::Float32);
    w.run("error/matmul/inner", "matmul", "outofplace", "", {a, b}, [&] { return matmul(D(a), D(b)); });
  }
  {
    const Tensor x = values({1, 4, 5, 5}, DType::Float32), wt = values({6, 2, 3, 3}, DType::Float32);
    const Conv2dParams p{1, 0, 1, 3};
    w.run("error/conv2d/groups", "conv2d", "outofplace",
          join({p_num("stride", 1), p_num("padding", 0), p_num("dilation", 1), p_num("groups", 3), "\"relu\":false"}), {x, wt},
          [&] { return conv2d(D(x), D(wt), Tensor(), p, false); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  if (const char* d = std::getenv("SB_PARITY_DEVICE"); d != nullptr && *d) {  // Note [Staged parity runs]
    const std::string dev = d;
    g_stage.on = true;
    if (dev == "cuda") {
      g_stage.device = Device::cuda(0);
      try {
        (void)empty({1}, DType::Float32, g_stage.device);
      } catch (const Error& e) {
        std::printf("torch_parity_dump: no CUDA device here (%s)\n", e.what());
        return 77;
      }
    } else if (dev != "cpu-staged") {
      std::fprintf(stderr, "torch_parity_dump: SB_PARITY_DEVICE is cpu-staged or cuda, not %s\n", d);
      return 2;
    }
  }
  Writer w(argv[1]);
  if (!w.ok()) {
    std::fprintf(stderr, "torch_parity_dump: cannot write %s/cases.jsonl\n", argv[1]);
    return 2;
  }
  elementwise_cases(w);
  reduce_cases(w);
  matmul_cases(w);
  conv_cases(w);
  copy_cases(w);
  view_cases(w);
  factory_cases(w);
  linear_cases(w);
  edge_cases(w);
  random_layout_cases(w);
  error_cases(w);
  std::printf("%d cases\n", w.count());
  return 0;
}
