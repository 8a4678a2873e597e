// bench_common.cpp — the shared harness (see bench_common.h) and the shared main().
//
// Machine facts come from /proc/cpuinfo, sb::cpu_caches() (sysfs, then sysconf),
// sb::compiled_simd_level(), the build (bench_config.h from meson: compiler, flags,
// default matrix; bench_version.h from vcs_tag: git revision) and gpu_info(). They are
// read once, before any run, and cost nothing inside the timed loops.
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

Tensor nchw_in_layout(Layout l, const Shape& sizes, const std::function<Tensor(const Shape&)>& fill, const char* family) {
  Shape s = sizes;
  switch (l) {
    case Layout::Contiguous: return fill(s);
    case Layout::Transposed: std::swap(s[2], s[3]); return fill(s).transpose(2, 3);
    case Layout::Sliced: s[3] *= 2; return fill(s).slice(3, 0, std::nullopt, 2);
    case Layout::Expanded: s[0] = s[1] = 1; return fill(s).expand(sizes);
    case Layout::ChannelsLast: return fill(s).contiguous(MemoryFormat::ChannelsLast);
    default: SB_INTERNAL_ASSERT(false, family, ": layout ", layout_name(l), " is not measured");
  }
  return Tensor();
}

std::vector<CopyCase> copy_cases(const std::vector<int64_t>& squares, const InputFn& input, const std::string& pool_prefix) {
  std::vector<CopyCase> cases;
  for (int64_t n : squares) {
    cases.push_back({"contiguous", "transposed", {n, n}, [n, input] { return input({n, n}, 11).t(); },
                     [](const Tensor& x) { return x.contiguous(); }});
    cases.push_back({"contiguous", "contiguous", {n, n}, [n, input] { return input({n, n}, 11); },
                     [](const Tensor& x) { return x.clone(); }});
  }
  const Shape nchw = smoke() ? Shape{2, 8, 6, 6} : Shape{32, 64, 56, 56};
  cases.push_back({"nchw_to_nhwc", "contiguous", nchw, [nchw, input] { return input(nchw, 12); },
                   [](const Tensor& x) { return x.contiguous(MemoryFormat::ChannelsLast); }});
  const Shape conv_in = smoke() ? Shape{1, 8, 8, 8} : Shape{8, 64, 56, 56};
  cases.push_back({"nchw_to_nhwc", "contiguous", conv_in, [conv_in, input] { return input(conv_in, 14); },
                   [](const Tensor& x) { return x.contiguous(MemoryFormat::ChannelsLast); }});
  cases.push_back({"contiguous", "channels_last", nchw,
                   [nchw, input, pool_prefix] {
                     return pooled(pool_prefix + "cl", [&] { return input(nchw, 12).contiguous(MemoryFormat::ChannelsLast); });
                   },
                   [](const Tensor& x) { return x.contiguous(); }});
  cases.push_back({"contiguous", "contiguous", nchw, [nchw, input] { return input(nchw, 12); },
                   [](const Tensor& x) { return x.clone(); }});
  return cases;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced";
    case Layout::Expanded: return "expanded";
    case Layout::ChannelsLast: return "channels_last";
    case Layout::ColumnMajor: return "column_major";
    case Layout::ContiguousFirst: return "contiguous_first";
  }
  return "?";
}

const char* style_name(Style s) {
  switch (s) {
    case Style::Inplace: return "inplace";
    case Style::Out: return "out";
    case Style::Outofplace: return "outofplace";
    case Style::OutofplaceSystem: return "outofplace_system";
  }
  return "?";
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

// --sb_repetitions / --sb_min_time replace the matrix's (scripts/recheck: one
// repetition per round, the same window as the peer's); 0: the matrix's
int g_repetitions = 0;
double g_min_time_s = 0;
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

benchmark::internal::Benchmark* add_guarded(const std::string& name, BenchFn fn) {
  return benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& st) {
    try {
      fn(st);
    } catch (const std::exception& e) {
      g_run_failed = true;
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
  b->Repetitions(repetitions())->DisplayAggregatesOnly(true)->UseManualTime()->MinTime(min_time_s())->Unit(unit);
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

// ------------------------------------------------------------------ machine

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

void read_caches(MachineInfo& m) {  // Note [Cache sizes] (include/stridebench/cpu_features.h)
  const CacheSizes& c = cpu_caches();
  m.l1d = c.l1d;
  m.l2 = c.l2;
  m.llc = c.llc;
  m.llc_level = c.llc_level;
}

// /proc/cpuinfo's integer field `key` of the first CPU ("cpu family", "model"); -1 when absent.
int cpuinfo_number(const char* key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || trim(line.substr(0, colon)) != key) continue;
    try {
      return std::stoi(trim(line.substr(colon + 1)));
    } catch (const std::exception&) {
      return -1;
    }
  }
  return -1;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0 || line.rfind("Hardware", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "unknown-cpu";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string openmp_info() {
#ifdef _OPENMP
  std::string s = "OpenMP " + std::to_string(_OPENMP) + ", max " + std::to_string(omp_get_max_threads()) + " threads";
  if (const char* e = std::getenv("OMP_NUM_THREADS")) s += ", OMP_NUM_THREADS=" + std::string(e);
  return s;
#else
  return "off";
#endif
}

}  // namespace

std::string slug_words(const std::string& name) {
  std::string s = name.substr(0, name.find('@'));  // drop the clock
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* junk : {"(r)", "(tm)", "(c)"}) {
    for (size_t p; (p = lower.find(junk)) != std::string::npos;) lower.erase(p, std::strlen(junk));
  }
  std::vector<std::string> words;
  std::string w;
  auto flush = [&] {
    if (!w.empty() && w != "cpu") words.push_back(w);
    w.clear();
  };
  for (char c : lower) {
    if (std::isalnum(static_cast<unsigned char>(c))) w += c;
    else flush();
  }
  flush();
  std::string r;
  for (const auto& x : words) r += (r.empty() ? "" : "-") + x;
  return r;
}

std::string MachineInfo::caches() const {
  return "L1d:" + std::to_string(l1d) + ",L2:" + std::to_string(l2) + ",L" + std::to_string(llc_level) + ":" +
         std::to_string(llc);
}

std::string MachineInfo::slug() const {  // Note [Machine slug] (bench_common.h)
  std::string s = slug_words(cpu_model);
  if (cpu_family >= 0 && cpu_model_number >= 0)
    s += "-f" + std::to_string(cpu_family) + "m" + std::to_string(cpu_model_number);
  if (llc > 0) {
    const bool mib = llc % (int64_t{1} << 20) == 0;
    s += "-l" + std::to_string(llc_level) + "-" + std::to_string(mib ? llc >> 20 : llc >> 10) + (mib ? "m" : "k");
  }
  s += "-" + std::to_string(cores) + "c";
  if (!gpu.name.empty()) s += "-" + slug_words(gpu.name);
  return s;
}

const MachineInfo& machine() {
  static const MachineInfo m = [] {
    MachineInfo r;
    r.cpu_model = cpu_model();
    r.cpu_family = cpuinfo_number("cpu family");
    r.cpu_model_number = cpuinfo_number("model");
    r.cores = std::max<int>(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
    read_caches(r);
    r.simd = std::string(simd_level_name(compiled_simd_level()));
    if (simd_level() != compiled_simd_level()) r.simd += " (lowered to " + std::string(simd_level_name(simd_level())) + ")";
    r.compiler = SB_BENCH_COMPILER;
    r.flags = SB_BENCH_FLAGS;
    r.openmp = openmp_info();
    r.git_revision = SB_GIT_REVISION;
    r.date = utc_now();
    r.gpu = gpu_info();
    return r;
  }();
  return m;
}

int64_t host_rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace sb::bench

// ------------------------------------------------------------------ main

namespace {

void make_parent_dirs(const std::string& file) {
  for (size_t p = file.find('/', 1); p != std::string::npos; p = file.find('/', p + 1)) {
    const std::string dir = file.substr(0, p);
    if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) return;
  }
}

// Note [Progress lines]
// Under `ninja benchmark` (--sb_progress) the terminal gets one line per case: the count
// done, the total, an estimate of the time left (the mean time per case so far times
// the cases left), the run name and its median with ± half the range over the median
// (or, where only the aggregates reach the display, the standard deviation). Google
// Benchmark's own console rows go to the --sb_log file, and every repetition to the
// --benchmark_out JSON as before. The total comes from this binary's own
// --benchmark_list_tests with the same filter, run once before the cases (milliseconds).
class ProgressReporter : public benchmark::BenchmarkReporter {
 public:
  ProgressReporter(size_t total, const std::string& log_path) : total_(total) {
    if (!log_path.empty()) {
      make_parent_dirs(log_path);
      log_file_.open(log_path);
      if (log_file_) {
        log_ = std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_Tabular);
        log_->SetOutputStream(&log_file_);
        log_->SetErrorStream(&log_file_);
      }
    }
  }
  bool ReportContext(const Context& context) override {
    start_ = std::chrono::steady_clock::now();
    if (log_) log_->ReportContext(context);
    return true;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    if (log_) log_->ReportRuns(runs);
    // add_run shows only the aggregates on the display (DisplayAggregatesOnly): a case
    // reaches this reporter as its iterations (one repetition, or an error) or as its
    // aggregates, never both; each is one case.
    std::vector<double> ns;
    std::string name, error;
    double median = -1, stddev = -1;
    const auto to_ns = [](const Run& r) { return r.GetAdjustedRealTime() * 1e9 / benchmark::GetTimeUnitMultiplier(r.time_unit); };
    for (const Run& r : runs) {
      name = r.run_name.str();  // without an aggregate's suffix
      if (r.run_type == Run::RT_Aggregate) {
        if (r.aggregate_name == "median") median = to_ns(r);
        if (r.aggregate_name == "stddev") stddev = to_ns(r);
        continue;
      }
      if (r.error_occurred) error = r.error_message;
      else ns.push_back(to_ns(r));
    }
    if (name.empty()) return;
    ++done_;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = total_ > done_ ? elapsed / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0;
    const std::string shown = name.substr(0, name.find("/min_time:"));
    std::string what = error.empty() ? "" : "error: " + error;
    if (!ns.empty()) {  // the spread as the tables give it: half the range over the median
      std::sort(ns.begin(), ns.end());
      const double med = ns[ns.size() / 2];
      what = fmt_time(med) + " ±" + std::to_string(static_cast<int>(std::lround(50.0 * (ns.back() - ns.front()) / med))) + "%";
    } else if (median > 0) {  // only the aggregates: the standard deviation instead
      what = fmt_time(median) + " (sd " + std::to_string(static_cast<int>(std::lround(100.0 * std::max(stddev, 0.0) / median))) + "%)";
    }
    std::printf("[%*zu/%zu] %s left  %s  %s\n", static_cast<int>(std::to_string(total_).size()), done_, total_,
                fmt_duration(left).c_str(), shown.c_str(), what.c_str());
    std::fflush(stdout);
  }
  void Finalize() override {
    if (log_) log_->Finalize();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::printf("%s: %zu cases in %s\n", sb::bench::kFamily, done_, fmt_duration(elapsed).c_str());
  }

 private:
  static std::string fmt_time(double ns) {
    char buf[32];
    const char* unit = "ns";
    if (ns >= 1e9) ns /= 1e9, unit = "s";
    else if (ns >= 1e6) ns /= 1e6, unit = "ms";
    else if (ns >= 1e3) ns /= 1e3, unit = "us";
    std::snprintf(buf, sizeof buf, "%.3g %s", ns, unit);
    return buf;
  }
  static std::string fmt_duration(double s) {
    char buf[32];
    const long t = std::lround(s);
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
    return buf;
  }
  size_t total_, done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::ofstream log_file_;
  std::unique_ptr<benchmark::ConsoleReporter> log_;
};

// The cases this command line runs: the binary's own --benchmark_list_tests, same
// flags but the output file and our progress flags (Note [Progress lines]).
size_t count_cases(const std::vector<std::string>& args, const std::string& matrix) {
  const auto quote = [](const std::string& a) {
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);  // this binary, not the shell's
  if (len <= 0) return 0;
  self[len] = '\0';
  std::string cmd = quote(self) + " --benchmark_list_tests=true " + quote("--sb_matrix=" + matrix);
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i].rfind("--benchmark_out", 0) == 0) continue;
    cmd += " " + quote(args[i]);
  }
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return 0;
  size_t n = 0;
  for (int c; (c = std::fgetc(p)) != EOF;) n += c == '\n';
  pclose(p);
  return n;
}

}  // namespace

// "full (2.0)", "half (1.0)" or "none": the probed 512-bit FMA rate (cpu_fma512_rate)
static std::string fma512_context() {
  const double r = sb::cpu_fma512_rate();
  if (r <= 0) return "none";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s (%.2f)", sb::fma512_rate_name(r), r);
  return buf;
}

int main(int argc, char** argv) {
  using namespace sb::bench;
  // Take our own flag out before Google Benchmark sees the command line.
  std::string matrix_arg = SB_BENCH_DEFAULT_MATRIX, log_path;
  bool progress = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--sb_matrix=", 0) == 0) {
      matrix_arg = a.substr(12);
      continue;
    }
    if (a == "--sb_keys") {  // the run-name vocabulary, checked against scripts/stridebench/names.py
      std::printf("family:%s\n", kFamily);
      for (const std::string& k : RunName::keys()) std::printf("%s\n", k.c_str());
      return 0;
    }
    if (a == "--sb_progress") {  // Note [Progress lines]
      progress = true;
      continue;
    }
    if (a.rfind("--sb_log=", 0) == 0) {
      log_path = a.substr(9);
      continue;
    }
    if (a.rfind("--sb_repetitions=", 0) == 0 || a.rfind("--sb_min_time=", 0) == 0) {
      const bool reps = a[5] == 'r';
      const std::string v = a.substr(a.find('=') + 1);
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x > 0) || (reps && (x != static_cast<int>(x) || x > 1000)) || x > 100) {
        std::fprintf(stderr, "%s: %s must be a positive %s (got '%s')\n", argv[0], reps ? "--sb_repetitions" : "--sb_min_time",
                     reps ? "integer up to 1000" : "number of seconds up to 100", v.c_str());
        return 2;
      }
      if (reps) g_repetitions = static_cast<int>(x);
      else g_min_time_s = x;
      continue;
    }
    if (a.rfind("--benchmark_out=", 0) == 0) make_parent_dirs(a.substr(16));
    args.push_back(argv[i]);
  }
  if (!parse_matrix(matrix_arg, &g_matrix)) {
    std::fprintf(stderr, "%s: --sb_matrix must be smoke, quick or full (got '%s')\n", argv[0], matrix_arg.c_str());
    return 2;
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);

  try {
    (void)sb::cpu_tuning();  // a malformed SB_TUNING: one message, no run
  } catch (const sb::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  const MachineInfo& m = machine();
  std::string threads;
  for (int t : thread_counts()) threads += (threads.empty() ? "" : ",") + std::to_string(t);
  const std::pair<const char*, std::string> ctx[] = {
      {"sb_machine", m.slug()},
      {"sb_cpu_model", m.cpu_model},
      {"sb_cpu_family", m.cpu_family >= 0 ? std::to_string(m.cpu_family) : ""},
      {"sb_cpu_model_number", m.cpu_model_number >= 0 ? std::to_string(m.cpu_model_number) : ""},
      {"sb_cores", std::to_string(m.cores)},
      {"sb_threads", threads},
      {"sb_simd", m.simd},
      {"sb_cpu_hugepages", sb::cpu_huge_pages_enabled() ? "on" : "off"},
      {"sb_cpu_allocator", sb::cpu_allocator_kind() == sb::AllocatorKind::System ? "system" : "caching"},
      {"sb_caches", m.caches()},
      // Note [Tuning by microarchitecture]: what the kernels chose on this core, in
      // SB_TUNING's syntax, so a run can be repeated with the same choice elsewhere
      {"sb_cpu_arch", sb::cpu_arch_name(sb::cpu_id().arch)},
      {"sb_tuning", sb::describe_tuning(sb::cpu_tuning())},
      {"sb_tuning_basis", sb::cpu_tuning().basis},
      {"sb_fma512", fma512_context()},
      {"sb_compiler", m.compiler},
      {"sb_flags", m.flags},
      {"sb_openmp", m.openmp},
      {"sb_gpu_name", m.gpu.name},
      {"sb_gpu_memory", m.gpu.memory_bytes},
      {"sb_gpu_sms", m.gpu.sms},
      {"sb_gpu_cc", m.gpu.cc},
      {"sb_gpu_l2", m.gpu.l2_bytes},
      {"sb_cuda_driver", m.gpu.driver},
      {"sb_cuda_runtime", m.gpu.runtime},
      {"sb_git_revision", m.git_revision},
      {"sb_date", m.date},
      {"sb_matrix", matrix_name(g_matrix)},
      {"sb_family", kFamily},
  };
  for (const auto& [k, v] : ctx) benchmark::AddCustomContext(k, v);

  register_family();
  const std::vector<std::string> gb_args(args.begin(), args.begin() + n);  // before Initialize takes its flags out
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  std::fprintf(stderr, "%s: matrix %s, machine %s\n", kFamily, matrix_name(g_matrix), m.slug().c_str());
  if (progress) {
    ProgressReporter reporter(count_cases(gb_args, matrix_arg), log_path);
    benchmark::RunSpecifiedBenchmarks(&reporter);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  if (g_run_failed) {
    std::fprintf(stderr, "%s: some runs reported errors (error_occurred in the JSON)\n", kFamily);
    return 1;
  }
  return 0;
}
