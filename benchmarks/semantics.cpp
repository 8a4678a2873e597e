// semantics.cpp — checks CLAIMS.md V1–V4 on the library at run time and writes
// {"V1": true, "V2": true, "V3": true, "V4": true} to the file named by its argument
// (BUILD/bench-json/semantics.json under `ninja benchmark`; scripts/collect copies it
// to results/<machine>/raw/semantics.json, where the Claims table reads it).
//   V1  a transpose shares storage; a write through either is seen through the other
//   V2  a stepped slice shares storage; an in-place op on it changes the source (and
//       only the sliced elements)
//   V3  clone() and contiguous() of a non-contiguous tensor own new storage, hold the
//       same values, and writes to them leave the source alone
//   V4  broadcasting sizes 3 and 2 is an error (shapes, copy_, and a binary op)
// Exit status 1 when a check fails (the file is written either way), 2 on bad usage.
// Cost: microseconds.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "stridebench/tensor.h"
#include "stridebench/elementwise.h"

namespace {

using sb::Tensor;

bool throws(const std::function<void()>& f) {
  try {
    f();
  } catch (const sb::Error&) {
    return true;
  }
  return false;
}

bool v1() {
  Tensor x = sb::rand({3, 4}, 7);
  Tensor y = x.t();
  if (!y.shares_storage_with(x) || y.size(0) != 4 || y.size(1) != 3) return false;
  y.set({1, 2}, 42.0);
  x.set({0, 3}, -5.0);
  return x.get({2, 1}) == 42.0 && y.get({3, 0}) == -5.0;
}

bool v2() {
  Tensor x = sb::zeros({4, 6});
  Tensor s = x.slice(1, 0, std::nullopt, 2);  // columns 0, 2, 4
  if (!s.shares_storage_with(x) || s.is_contiguous()) return false;
  s.add_(1.0);
  s.mul_(3.0);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j)
      if (x.get({i, j}) != (j % 2 == 0 ? 3.0 : 0.0)) return false;
  return true;
}

bool v3() {
  Tensor base = sb::rand({5, 7}, 9);
  Tensor xt = base.t();  // non-contiguous
  Tensor sl = base.slice(1, 0, std::nullopt, 3);
  for (const Tensor& src : {xt, sl}) {
    if (src.is_contiguous()) return false;
    for (Tensor copy : {src.clone(), src.contiguous()}) {
      if (copy.shares_storage_with(src) || copy.shares_storage_with(base)) return false;
      if (copy.to_vector() != src.to_vector()) return false;
      const double before = src.get({0, 1});
      copy.set({0, 1}, before + 100.0);
      if (src.get({0, 1}) != before) return false;
    }
  }
  return true;
}

bool v4() {
  Tensor a = sb::ones({3}), b = sb::ones({2});
  bool ok = throws([] { sb::broadcast_shapes({3}, {2}, "semantics"); }) && throws([&] { b.copy_(a); });
  ok = ok && throws([&] { sb::add(a, b); }) && throws([&] { a.add_(b); });
  return ok;
}

void make_parent_dirs(const std::string& file) {
  for (size_t p = file.find('/', 1); p != std::string::npos; p = file.find('/', p + 1))
    if (mkdir(file.substr(0, p).c_str(), 0777) != 0 && errno != EEXIST) return;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  const std::vector<std::pair<const char*, std::function<bool()>>> checks = {
      {"V1", v1}, {"V2", v2}, {"V3", v3}, {"V4", v4}};
  std::string json = "{";
  bool all = true;
  for (const auto& [id, f] : checks) {
    bool ok = false;
    try {
      ok = f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: unexpected exception: %s\n", id, e.what());
    }
    all = all && ok;
    std::printf("%s %s\n", id, ok ? "holds" : "DOES NOT HOLD");
    json += std::string(json.size() > 1 ? ", " : "") + "\"" + id + "\": " + (ok ? "true" : "false");
  }
  json += "}\n";
  make_parent_dirs(argv[1]);
  const std::string tmp = std::string(argv[1]) + ".tmp";
  {
    std::ofstream f(tmp);
    f << json;
    if (!f) {
      std::fprintf(stderr, "semantics: cannot write %s\n", tmp.c_str());
      return 2;
    }
  }
  if (std::rename(tmp.c_str(), argv[1]) != 0) {
    std::fprintf(stderr, "semantics: cannot rename %s to %s\n", tmp.c_str(), argv[1]);
    return 2;
  }
  std::printf("semantics: wrote %s\n", argv[1]);
  return all ? 0 : 1;
}
