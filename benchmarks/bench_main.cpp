// bench_main.cpp — the main() every bench_<family> binary shares: our flags (--sb_matrix,
// --sb_progress, --sb_log, --sb_repetitions, --sb_min_time, --sb_gpu_*, --sb_keys), the context every
// JSON carries (docs/BENCHMARKS.md), the progress lines, then Google Benchmark.
#include "bench_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "bench_config.h"
#include "bench_version.h"
#include "stridebench/cpu_features.h"
#include "stridebench/error.h"

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
      set_run_overrides(reps ? static_cast<int>(x) : 0, reps ? 0 : x);
      continue;
    }
    if (a.rfind("--sb_gpu_", 0) == 0) {  // Note [GPU rows stop on their noise]
      std::string error;
      if (set_gpu_override(a, &error)) continue;
      std::fprintf(stderr, "%s: %s\n", argv[0], error.empty() ? ("unknown flag " + a).c_str() : error.c_str());
      return 2;
    }
    if (a.rfind("--benchmark_out=", 0) == 0) make_parent_dirs(a.substr(16));
    args.push_back(argv[i]);
  }
  if (!set_matrix(matrix_arg)) {
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
  const GpuClocks clocks = m.gpu.name.empty() ? GpuClocks() : gpu_clocks();
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
      // Note [GPU clocks from NVML]: the state the GPU rows start from
      {"sb_gpu_sm_clock_mhz", clocks.ok ? std::to_string(clocks.sm_mhz) : ""},
      {"sb_gpu_sm_clock_max_mhz", clocks.ok ? std::to_string(clocks.sm_max_mhz) : ""},
      {"sb_gpu_temp_c", clocks.ok ? std::to_string(clocks.temp_c) : ""},
      {"sb_gpu_power_w", clocks.ok ? sb::detail::str_cat(clocks.power_w) : ""},
      {"sb_git_revision", m.git_revision},
      {"sb_date", m.date},
      {"sb_matrix", matrix_name(matrix())},
      {"sb_family", kFamily},
  };
  for (const auto& [k, v] : ctx) benchmark::AddCustomContext(k, v);

  register_family();
  const std::vector<std::string> gb_args(args.begin(), args.begin() + n);  // before Initialize takes its flags out
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  std::fprintf(stderr, "%s: matrix %s, machine %s\n", kFamily, matrix_name(matrix()), m.slug().c_str());
  if (progress) {
    ProgressReporter reporter(count_cases(gb_args, matrix_arg), log_path);
    benchmark::RunSpecifiedBenchmarks(&reporter);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  if (any_run_failed()) {
    std::fprintf(stderr, "%s: some runs reported errors (error_occurred in the JSON)\n", kFamily);
    return 1;
  }
  return 0;
}
