// bench_machine.cpp — the machine facts every result carries (MachineInfo, the slug of
// Note [Machine slug], host_rss_bytes): /proc/cpuinfo (cpuinfo.h), sb::cpu_caches() (sysfs, then
// sysconf), sb::compiled_simd_level(), the build (bench_config.h from meson: compiler,
// flags; bench_version.h from vcs_tag: git revision) and gpu_info(). Read once, before
// any run; they cost nothing inside the timed loops.
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
#include "cpuinfo.h"
#include "stridebench/cpu_features.h"
#include "stridebench/error.h"

namespace sb::bench {

// ------------------------------------------------------------------ machine

namespace {

void read_caches(MachineInfo& m) {  // Note [Cache sizes] (include/stridebench/cpu_features.h)
  const CacheSizes& c = cpu_caches();
  m.l1d = c.l1d;
  m.l2 = c.l2;
  m.llc = c.llc;
  m.llc_level = c.llc_level;
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
    std::ifstream cpuinfo("/proc/cpuinfo");
    const CpuInfoFields f = parse_cpuinfo(cpuinfo);  // Note [CPU names on Arm]
    r.cpu_model = f.name;
    r.cpu_family = f.family;
    r.cpu_model_number = f.model;
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
