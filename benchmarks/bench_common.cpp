// bench_common.cpp — the shared harness (see bench_common.h): the matrix, run names,
// registration, counters, regimes and the pool; the machine facts are in
// bench_machine.cpp, main() in bench_main.cpp.
#include "bench_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "bench_config.h"
#include "bench_version.h"
#include "stridebench/cpu_features.h"
#include "stridebench/error.h"

namespace sb::bench {

Tensor in_layout(Layout l, const Shape& sizes, const std::function<Tensor(const Shape&)>& fill, int64_t sliced_dim) {
  const cases::Placement p = cases::placement(l, sizes, sliced_dim);
  SB_INTERNAL_ASSERT(p.offset == 0, "in_layout: layout ", layout_name(l), " is not a benchmark layout");
  return cases::view_in(fill(cases::storage_sizes(sizes, p)), sizes, p);
}

std::vector<cases::CopyCase> copy_family_cases(const std::vector<int64_t>& squares) {
  const Shape nchw = smoke() ? Shape{2, 8, 6, 6} : Shape{32, 64, 56, 56};
  const Shape conv_in = smoke() ? Shape{1, 8, 8, 8} : Shape{8, 64, 56, 56};
  return cases::copy_cases(squares, {nchw, conv_in}, nchw);
}

Tensor copy_source(const cases::CopyCase& c, const std::function<const Tensor&(const Shape&)>& input) {
  const cases::Placement p = cases::copy_placement(c);
  return cases::view_in(input(cases::storage_sizes(c.shape, p)), c.shape, p);
}


// ------------------------------------------------------------------ matrix

namespace {
Matrix g_matrix = Matrix::Quick;
bool g_run_failed = false;

bool parse_matrix(const std::string& s, Matrix* m) {
  if (s == "smoke") *m = Matrix::Smoke;
  else if (s == "quick") *m = Matrix::Quick;
  else if (s == "full") *m = Matrix::Full;
  else return false;
  return true;
}
}  // namespace

Matrix matrix() { return g_matrix; }

const char* matrix_name(Matrix m) {
  switch (m) {
    case Matrix::Smoke: return "smoke";
    case Matrix::Quick: return "quick";
    case Matrix::Full: return "full";
  }
  return "?";
}

namespace {
// --sb_repetitions / --sb_min_time replace the matrix's (scripts/recheck: one
// repetition per round, the same window as the peer's); 0: the matrix's
int g_repetitions = 0;
double g_min_time_s = 0;
}  // namespace

bool set_matrix(const std::string& name) { return parse_matrix(name, &g_matrix); }
void set_run_overrides(int reps, double min_time_s) {
  if (reps > 0) g_repetitions = reps;
  if (min_time_s > 0) g_min_time_s = min_time_s;
}
bool any_run_failed() { return g_run_failed; }

namespace {
StopRule g_gpu_rule_override;  // fields at 0: the matrix's
double g_gpu_throttle = 0.9;
}  // namespace

StopRule gpu_stop_rule() {
  StopRule r;
  r.min_samples = pick(3, 10, 10);
  r.max_rse = 0.005;
  r.max_seconds = pick(0.02, 0.5, 2.0);
  if (g_gpu_rule_override.min_samples > 0) r.min_samples = g_gpu_rule_override.min_samples;
  if (g_gpu_rule_override.max_rse > 0) r.max_rse = g_gpu_rule_override.max_rse;
  if (g_gpu_rule_override.max_seconds > 0) r.max_seconds = g_gpu_rule_override.max_seconds;
  return r;
}

double gpu_throttle_threshold() { return g_gpu_throttle; }

bool set_gpu_override(const std::string& arg, std::string* error) {
  error->clear();
  struct Flag {
    const char* prefix;
    double lo, hi;
    bool integer;
  };
  const Flag flags[] = {{"--sb_gpu_max_rse=", 0.01, 50, false},
                        {"--sb_gpu_max_seconds=", 0.001, 600, false},
                        {"--sb_gpu_min_samples=", 1, 100000, true},
                        {"--sb_gpu_throttle=", 0, 1, false}};
  for (const Flag& f : flags) {
    const std::string p = f.prefix;
    if (arg.rfind(p, 0) != 0) continue;
    const std::string v = arg.substr(p.size());
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(x >= f.lo && x <= f.hi) || (f.integer && x != static_cast<int>(x))) {
      *error = p.substr(0, p.size() - 1) + " must be " + (f.integer ? "an integer" : "a number") + " in [" +
               detail::str_cat(f.lo) + ", " + detail::str_cat(f.hi) + "] (got '" + v + "')";
      return false;
    }
    if (p == "--sb_gpu_max_rse=") g_gpu_rule_override.max_rse = x / 100;
    else if (p == "--sb_gpu_max_seconds=") g_gpu_rule_override.max_seconds = x;
    else if (p == "--sb_gpu_min_samples=") g_gpu_rule_override.min_samples = static_cast<int>(x);
    else g_gpu_throttle = x;
    return true;
  }
  return false;
}

int repetitions() { return g_repetitions > 0 ? g_repetitions : pick(1, 5, 10); }
double min_time_s() { return g_min_time_s > 0 ? g_min_time_s : pick(1e-4, 0.02, 0.1); }

std::vector<int> thread_counts() {
  std::vector<int> t{1, 2};
  if (full() && machine().cores > 2) t.push_back(machine().cores);
  return t;
}

// ------------------------------------------------------------------ names

const std::vector<std::string>& RunName::keys() {
  static const std::vector<std::string> k{"op", "impl", "device", "layout", "style", "dtype",
                                          "shape", "threads", "dim", "alloc", "step", "size"};
  return k;
}

RunName::RunName(std::string family) : family_(std::move(family)) {
  values_["impl"] = "ours";
  values_["device"] = "cpu";
}

RunName& RunName::set(const std::string& key, const std::string& value) {
  const auto& k = keys();
  SB_INTERNAL_ASSERT(std::find(k.begin(), k.end(), key) != k.end(), "RunName: key '", key,
                     "' is not in docs/BENCHMARKS.md");
  SB_INTERNAL_ASSERT(!value.empty() && value.find('/') == std::string::npos, "RunName: bad value '", value,
                     "' for key ", key);
  values_[key] = value;
  return *this;
}

std::string RunName::str() const {
  std::string s = family_;
  for (const auto& k : keys()) {
    auto it = values_.find(k);
    if (it != values_.end()) s += "/" + k + ":" + it->second;
  }
  return s;
}

std::string RunName::dtype_key(DType t) {
  switch (t) {
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
    case DType::Float16: return "f16";
    case DType::Int8: return "i8";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::BFloat16: return "bf16";
  }
  return "?";
}

std::string RunName::shape_key(const Shape& s) {
  if (s.empty()) return "1";
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

// ------------------------------------------------------------------ registration

namespace {
// Note [One warm-up per run]: the run whose function was called last, and whether the
// current call directly follows a call of that same run.
const void* g_last_run = nullptr;
bool g_repeat_call = false;
AllocCount g_last_allocs;
}  // namespace

bool repeat_call() { return g_repeat_call; }

AllocCount warm_up(const std::function<void()>& f) {
  if (!g_repeat_call) g_last_allocs = measure_allocs(f);
  return g_last_allocs;
}

benchmark::internal::Benchmark* add_guarded(const std::string& name, BenchFn fn) {
  auto id = std::make_shared<char>();  // the run's identity: the address of this byte
  return benchmark::RegisterBenchmark(name.c_str(), [fn, id](benchmark::State& st) {
    g_repeat_call = g_last_run == id.get();
    g_last_run = id.get();
    try {
      fn(st);
    } catch (const std::exception& e) {
      g_run_failed = true;
      g_last_run = nullptr;  // the next call, of whatever run, warms up again
      st.SkipWithError(e.what());
    }
  });
}

namespace {
// An sb::Error (or any exception) becomes a reported error for this run only; main()
// then exits non-zero after the other runs.
benchmark::internal::Benchmark* register_guarded(const RunName& name, BenchFn fn) {
  return add_guarded(name.str(), std::move(fn));
}
}  // namespace

benchmark::internal::Benchmark* add_run(const RunName& name, BenchFn fn, benchmark::TimeUnit unit) {
  auto* b = register_guarded(name, std::move(fn));
  // Every repetition goes to the JSON file (the scripts use the samples); the console
  // shows the aggregates only (DisplayAggregatesOnly keeps the file complete, unlike
  // ReportAggregatesOnly(true)).
  b->Repetitions(repetitions())->DisplayAggregatesOnly(true)->UseRealTime()->MinTime(min_time_s())->Unit(unit);
  return b;
}

benchmark::internal::Benchmark* add_manual_run(const RunName& name, BenchFn fn, benchmark::TimeUnit unit) {
  auto* b = register_guarded(name, std::move(fn));
  // one iteration: time_gpu_loop samples inside it until the row's noise is measured
  // (Note [GPU rows stop on their noise]); --sb_repetitions repeats that whole
  b->Iterations(1)->Repetitions(g_repetitions > 0 ? g_repetitions : 1)->ReportAggregatesOnly(false)->UseManualTime()->Unit(unit);
  return b;
}

benchmark::internal::Benchmark* add_single_run(const RunName& name, BenchFn fn, benchmark::TimeUnit unit) {
  // Iterations() and MinTime() exclude each other in Google Benchmark: no MinTime here.
  auto* b = register_guarded(name, std::move(fn));
  b->Iterations(1)->Repetitions(1)->ReportAggregatesOnly(false)->UseManualTime()->Unit(unit);
  return b;
}

// ------------------------------------------------------------------ counters

void set_work(benchmark::State& st, int64_t bytes, int64_t flop) {
  const double it = static_cast<double>(st.iterations());
  st.counters["bytes"] = benchmark::Counter(static_cast<double>(bytes));
  st.SetBytesProcessed(static_cast<int64_t>(bytes * it));
  if (flop > 0) {
    st.counters["flop"] = benchmark::Counter(static_cast<double>(flop));
    st.counters["flops_per_second"] = benchmark::Counter(static_cast<double>(flop) * it, benchmark::Counter::kIsRate);
  }
}

AllocCount measure_allocs(const std::function<void()>& f) {
  Allocator* as[2] = {caching_cpu_allocator(), system_cpu_allocator()};
  AllocatorStats before[2];
  for (int i = 0; i < 2; ++i) {
    as[i]->reset_peak_stats();
    before[i] = as[i]->stats();
  }
  f();
  AllocCount r;
  for (int i = 0; i < 2; ++i) {
    const AllocatorStats after = as[i]->stats();
    r.peak_bytes += after.peak_allocated_bytes - before[i].allocated_bytes;
    r.allocs += after.allocation_count - before[i].allocation_count;
  }
  return r;
}

void set_alloc_counters(benchmark::State& st, const AllocCount& a) {
  st.counters["peak_alloc_bytes"] = benchmark::Counter(static_cast<double>(a.peak_bytes));
  st.counters["allocs_per_iter"] = benchmark::Counter(static_cast<double>(a.allocs));
}

// ------------------------------------------------------------------ regimes

const char* regime(int64_t ws, int threads) {
  // A level holds a working set when it fits in half its capacity: the other half
  // goes to associativity conflicts, other data, inclusive copies and (for the LLC)
  // other cores and tenants. A 256 MiB tensor is DRAM-bound with a 260 MiB LLC.
  const MachineInfo& m = machine();
  const int64_t t = std::max(1, std::min(threads, m.cores));
  if (m.l1d > 0 && 2 * ws <= m.l1d * t) return "L1";
  if (m.l2 > 0 && 2 * ws <= m.l2 * (m.llc_level > 2 ? t : 1)) return "L2";
  if (m.llc > 0 && m.llc_level > 2 && 2 * ws <= m.llc) return "LLC";
  return "DRAM";
}

void set_regime(benchmark::State& st, int64_t ws, int threads) {
  st.SetLabel(std::string("regime:") + regime(ws, threads));
}

int64_t span_bytes(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * std::abs(t.stride(d));
  return span * static_cast<int64_t>(t.element_size());
}

int64_t distinct_bytes(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) != 0) n *= t.size(d);
  return t.numel() == 0 ? 0 : n * static_cast<int64_t>(t.element_size());
}

// ------------------------------------------------------------------ pool

namespace {
std::map<std::string, Tensor>& pool() {
  static std::map<std::string, Tensor> p;
  return p;
}
}  // namespace

const Tensor& pooled(const std::string& key, const std::function<Tensor()>& make) {
  auto it = pool().find(key);
  if (it == pool().end()) it = pool().emplace(key, make()).first;
  return it->second;
}

void pool_scope(const std::string& group) {
  static std::string current;
  if (group == current) return;
  pool().clear();
  caching_cpu_allocator()->empty_cache();
  current = group;
}

Tensor random_tensor(const Shape& sizes, uint64_t seed, DType dtype, Dist dist) {
  const int64_t n = checked_numel(sizes, "random_tensor");
  const int64_t block = std::min<int64_t>(n, int64_t{1} << 20);
  Tensor t = empty(sizes, dtype);
  if (n == 0) return t;
  const bool integer = !is_floating(dtype);
  Tensor base;
  if (integer) {
    std::vector<double> v = rand({block}, seed, DType::Float64).to_vector();
    for (auto& x : v) x = std::floor(x * 200.0) - 100.0;
    base = from_vector(v, {block});
  } else {
    base = dist == Dist::Normal ? randn({block}, seed, DType::Float64) : rand({block}, seed, DType::Float64);
  }
  base = base.to(dtype);
  Tensor flat = t.view({n});
  const int64_t whole = (n / block) * block;
  flat.slice(0, 0, whole).view({n / block, block}).copy_(base.view({1, block}));
  if (whole < n) flat.slice(0, whole, n).copy_(base.slice(0, 0, n - whole));
  return t;
}

}  // namespace sb::bench
