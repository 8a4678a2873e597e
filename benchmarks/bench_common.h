// bench_common.h — the harness every bench_<family> binary shares (docs/BENCHMARKS.md
// is the contract it implements; benchmarks/README.md has a how-to).
//
//   RunName       builds "family/op:…/impl:…/device:…/…/threads:N[/dim|alloc|step|size]"
//                 with the keys always in the contract's order, whatever order they
//                 are set in (unknown keys are a bug: SB_INTERNAL_ASSERT).
//   add_run       registers one run with the matrix's repetitions and min_time,
//                 real time (OpenMP threads are invisible to cpu_time; add_manual_run:
//                 manual time, for the GPU binaries' CUDA events), every
//                 repetition written to the JSON file and only the aggregates shown
//                 on the console (DisplayAggregatesOnly(true)).
//   set_work      the `bytes` and `flop` counters of one iteration, `bytes_per_second`
//                 (SetBytesProcessed) and `flops_per_second` (a rate over real time).
//   set_regime    SetLabel("regime:L1|L2|LLC|DRAM") from the working set.
//   measure_allocs  `peak_alloc_bytes` / `allocs_per_iter`: one representative call,
//                 run OUTSIDE the timed loop (see its comment); warm_up: the same,
//                 once per run rather than per repetition (Note [One warm-up per run]).
//   ThreadScope   sb::set_num_threads for one run, restored after.
//   machine()     CPU model, cores, caches, SIMD level, compiler and flags, OpenMP,
//                 GPU (gpu_info(), bench_gpu.cpp), git revision, date; the
//                 `sb_machine` slug; all written as custom context by main().
//   main()        (bench_common.cpp) parses --sb_matrix=smoke|quick|full (default: the
//                 meson option `matrix`), adds the context, calls the family's
//                 register_family(), then runs Google Benchmark.
//
// A family binary defines kFamily and register_family() and links bench_common.
// Cost of the harness itself: nothing inside the timed loops.
#pragma once
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cases/copy.h"
#include "gpu_sampling.h"
#include "cases/layout.h"
#include "stridebench/allocator.h"
#include "stridebench/dtype.h"
#include "stridebench/memory_format.h"
#include "stridebench/parallel.h"
#include "stridebench/tensor.h"

namespace sb::bench {

// ---- defined by each family binary ----
extern const char* const kFamily;  // "baseline", "views", …: the JSON's sb_family
void register_family();            // called by main() once the matrix is known

// ---- the matrix ----
enum class Matrix : uint8_t { Smoke, Quick, Full };
Matrix matrix();
// main() (bench_main.cpp) sets these from its flags: false from set_matrix when name is
// not smoke, quick or full; a value <= 0 leaves the matrix's repetitions or window.
bool set_matrix(const std::string& name);
void set_run_overrides(int repetitions, double min_time_s);
bool any_run_failed();  // a run's body reported an error (main exits 1)
const char* matrix_name(Matrix m);
inline bool smoke() { return matrix() == Matrix::Smoke; }
inline bool full() { return matrix() == Matrix::Full; }
// One value per matrix, e.g. pick<int64_t>(64, 4096, 16384).
template <typename T>
T pick(T smoke_value, T quick_value, T full_value) {
  return matrix() == Matrix::Smoke ? smoke_value : matrix() == Matrix::Quick ? quick_value : full_value;
}
// The stopping rule of the GPU rows (Note [GPU rows stop on their noise] in
// gpu_sampling.h) for the matrix: smoke takes a few samples, quick and full at least
// ten until the standard error is small, each under its own time cap (the values:
// bench_common.cpp); --sb_gpu_max_rse=PCT, --sb_gpu_max_seconds=S and
// --sb_gpu_min_samples=N override it.
StopRule gpu_stop_rule();
// Samples whose SM clock sits below this share of its maximum are throttled
// (--sb_gpu_throttle=F, default 0.9).
double gpu_throttle_threshold();
// Takes one --sb_gpu_* argument: false (with *error set) when it is malformed, and
// false with an empty *error when `arg` is not one of them.
bool set_gpu_override(const std::string& arg, std::string* error);
int repetitions();           // 1 smoke, 5 quick, 10 full; or --sb_repetitions
double min_time_s();         // per repetition; smoke: tiny; or --sb_min_time
std::vector<int> thread_counts();  // {1, 2} (full adds every core when there are more)

// ---- run names ----
// The contract's keys, in order; values are not checked here (the scripts check the
// vocabulary), keys are.
// The `layout` and `style` values of docs/BENCHMARKS.md, shared by every family (CPU and
// GPU), so a name is spelled in one place. A family uses the subset it measures.
// Layouts are the tests' too (Note [One layout builder] in cases/layout.h).
using cases::Layout;
using cases::layout_name;
using cases::Style;
using cases::style_name;
// An operand of logical `sizes` in layout l: fill(storage sizes) makes the buffer in
// storage order (random values, or a pooled tensor), viewed by cases::view_in; sliced
// takes its step in `sliced_dim` (the last by default; matmul's A slices its rows).
Tensor in_layout(Layout l, const Shape& sizes, const std::function<Tensor(const Shape&)>& fill, int64_t sliced_dim = -1);

// The copy family's cases for CPU and GPU (cases/copy.h): for each n in `squares`,
// contiguous() of a transposed n x n and clone() of it; NCHW->NHWC at the family's NCHW
// shape and at bench_conv's input (the Channels-last table's break-even); contiguous()
// of a channels-last NCHW tensor and clone() of the NCHW one.
std::vector<cases::CopyCase> copy_family_cases(const std::vector<int64_t>& squares);
// The case's source: input(storage sizes) (the device's pooled random tensor) viewed in
// the case's placement.
Tensor copy_source(const cases::CopyCase& c, const std::function<const Tensor&(const Shape&)>& input);

class RunName {
 public:
  explicit RunName(std::string family = kFamily);
  RunName& set(const std::string& key, const std::string& value);
  RunName& op(const std::string& v) { return set("op", v); }
  RunName& impl(const std::string& v) { return set("impl", v); }
  RunName& device(const std::string& v) { return set("device", v); }
  RunName& layout(const std::string& v) { return set("layout", v); }
  RunName& style(const std::string& v) { return set("style", v); }
  RunName& dtype(DType t) { return set("dtype", dtype_key(t)); }
  RunName& shape(const Shape& s) { return set("shape", shape_key(s)); }
  RunName& threads(int n) { return set("threads", std::to_string(n)); }
  RunName& dim(const std::string& v) { return set("dim", v); }
  RunName& alloc(const std::string& v) { return set("alloc", v); }
  RunName& step(int n) { return set("step", std::to_string(n)); }
  RunName& size(int64_t bytes) { return set("size", std::to_string(bytes)); }
  std::string str() const;

  static const std::vector<std::string>& keys();  // op, impl, device, …, size
  static std::string dtype_key(DType t);           // f32, f64, f16, bf16, i8, i32, i64
  static std::string shape_key(const Shape& s);    // 32x64x56x56 ("1" for a 0-d shape)

 private:
  std::string family_;
  std::map<std::string, std::string> values_;
};

// ---- registration ----
using BenchFn = std::function<void(benchmark::State&)>;
// Registers `fn` as `name` with the matrix's repetitions and min_time, UseRealTime,
// every repetition in the JSON file (aggregates only on the console), and the unit. Returns the benchmark to tune further.
benchmark::internal::Benchmark* add_run(const RunName& name, BenchFn fn,
                                        benchmark::TimeUnit unit = benchmark::kMicrosecond);
// The same for a run that times itself (st.SetIterationTime, e.g. with CUDA events):
// the matrix's repetitions and min_time, UseManualTime instead of UseRealTime.
benchmark::internal::Benchmark* add_manual_run(const RunName& name, BenchFn fn,
                                               benchmark::TimeUnit unit = benchmark::kMicrosecond);
// A run that happens once (one iteration, one repetition, manual time: the function
// calls st.SetIterationTime), for state that a repeat would change, e.g. the steps of
// the allocator reuse experiment.
benchmark::internal::Benchmark* add_single_run(const RunName& name, BenchFn fn,
                                               benchmark::TimeUnit unit = benchmark::kMicrosecond);

// A run with no settings of its own: only the guard every helper above has (an
// sb::Error or other exception fails this run and the binary's exit status, the other
// runs and the JSON go on). For binaries that set repetitions and timing themselves.
benchmark::internal::Benchmark* add_guarded(const std::string& name, BenchFn fn);

// ---- counters ----
// bytes: moved by one iteration (inputs read once, outputs written once; see the
// contract); flop: floating-point ops of one iteration (FMA = 2). Call after the loop.
void set_work(benchmark::State& st, int64_t bytes, int64_t flop = 0);

// The allocator traffic of one call of f, through both CPU allocators (whichever f
// uses): peak = the largest rise of allocated bytes above the level before the call
// (reset_peak_stats first), allocs = allocate() calls. Measured on one representative
// call OUTSIDE the timed loop (the first call of a run, which also warms up), so the
// stats reads never land in the timing; the ops are deterministic, so one call is
// representative of every iteration.
struct AllocCount {
  int64_t peak_bytes = 0;
  int64_t allocs = 0;
};
AllocCount measure_allocs(const std::function<void()>& f);
void set_alloc_counters(benchmark::State& st, const AllocCount& a);  // peak_alloc_bytes, allocs_per_iter

// Note [One warm-up per run]: Google Benchmark calls a run's function once per
// repetition, and once more per step of its first repetition's iteration search; the
// run's inputs stay pooled between the calls. warm_up(f) is measure_allocs(f) on the
// first call of a run, and on any call that follows another run's (the re-check
// interleaves runs at random); a call that directly follows a call of the same run
// returns the first call's counts without calling f: the caches and the allocator are
// as that call's timed loop left them, as a warm-up would leave them. A DRAM-size
// row's warm-up costs as much as its one timed iteration, so this halves those rows'
// untimed time (docs/notes/bench.md). repeat_call(): whether this call is such a one.
AllocCount warm_up(const std::function<void()>& f);
bool repeat_call();

// ---- cache regimes ----
// Where `working_set_bytes` (inputs plus outputs, as laid out in memory) fits with
// `threads` threads, a level counting as big enough when the working set takes at most
// half of it: L1/L2 are private (capacity x threads), the last level is shared.
const char* regime(int64_t working_set_bytes, int threads);
void set_regime(benchmark::State& st, int64_t working_set_bytes, int threads);
// Bytes of memory a tensor's elements span (a stepped slice spans twice its elements,
// an expanded tensor only its storage): its share of the working set.
int64_t span_bytes(const Tensor& t);
// Bytes of distinct elements (an expanded input counts its storage once): what the
// `bytes` counter charges for reading t once.
int64_t distinct_bytes(const Tensor& t);

// ---- threads ----
class ThreadScope {
 public:
  explicit ThreadScope(int n) : prev_(get_num_threads()) { set_num_threads(n); }
  ~ThreadScope() { set_num_threads(prev_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int prev_;
};

// ---- inputs shared across runs ----
// One tensor per key, made on first use and kept for the binary's life, so a large
// random input is generated once for all the runs that read it.
const Tensor& pooled(const std::string& key, const std::function<Tensor()>& make);
// Drops every pooled tensor when `group` differs from the last group named (e.g. a
// run of another size or dtype): keeps the full matrix's memory to one group's inputs.
void pool_scope(const std::string& group);

// A tensor of random values, fast at any size: a block of up to 1 Mi elements from
// sb::rand / sb::randn (the same on every machine for a seed), tiled over the tensor
// with one broadcasting copy_ (sb::rand alone builds a float64 vector of the whole
// tensor: seconds at DRAM sizes). Uniform: [0, 1); Normal: mean 0, variance 1; integer
// dtypes get whole numbers in [-100, 100).
enum class Dist : uint8_t { Uniform, Normal };
Tensor random_tensor(const Shape& sizes, uint64_t seed, DType dtype = DType::Float32, Dist dist = Dist::Uniform);

// ---- machine ----
struct GpuInfo {  // empty strings when there is no CUDA backend or no device
  std::string name, memory_bytes, sms, cc, l2_bytes, driver, runtime;
};
GpuInfo gpu_info();  // bench_gpu.cpp: the CUDA backend's hook
// Device 0's clocks and sensors through NVML (Note [GPU clocks from NVML] in
// bench_gpu.cpp); ok false where NVML is absent (every CPU machine), the values then 0.
struct GpuClocks {
  bool ok = false;
  unsigned sm_mhz = 0, sm_max_mhz = 0, temp_c = 0;
  double power_w = 0;
};
GpuClocks gpu_clocks();
// Only the SM clock (one NVML call: what a GPU row checks around each sample); 0 where
// NVML is absent or the call fails.
unsigned gpu_sm_clock_mhz();

struct MachineInfo {
  std::string cpu_model;
  int cpu_family = -1, cpu_model_number = -1;  // /proc/cpuinfo "cpu family", "model" (x86); -1: none (cpuinfo.h)
  int cores = 1;
  int64_t l1d = 0, l2 = 0, llc = 0;  // bytes; per core for L1d/L2, the whole LLC
  int llc_level = 3;
  std::string simd, compiler, flags, openmp, git_revision, date;
  GpuInfo gpu;
  std::string caches() const;  // "L1d:49152,L2:2097152,L3:272629760"
  // Note [Machine slug]: the results folder's name. The CPU model's words, its family
  // and model numbers where the CPU reports them, the last-level cache, the cores and
  // the GPU's words: "amd-epyc-f25m17-l3-32m-2c", "intel-xeon-processor-f6m143-l3-480m-2c
  // -nvidia-h100-80gb-hbm3", "arm-neoverse-v1-l3-32m-64c" (Note [CPU names on Arm] in
  // cpuinfo.h). Two VMs that print the same model name but differ in CPU generation, LLC
  // or GPU get two folders; a re-run on one machine keeps its folder.
  std::string slug() const;
};
const MachineInfo& machine();
// Lowercase words of a hardware name joined by '-', dropping (R), (TM), "CPU" and the
// "@ 2.30GHz" clock: "Intel(R) Xeon(R) Processor" -> "intel-xeon-processor".
std::string slug_words(const std::string& name);
// Resident set size of this process (/proc/self/statm), bytes; 0 when unknown.
int64_t host_rss_bytes();

}  // namespace sb::bench
