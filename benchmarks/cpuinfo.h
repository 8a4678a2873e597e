// cpuinfo.h — the CPU's name and numbers from /proc/cpuinfo's text, for MachineInfo
// (bench_machine.cpp) and its test. Header-only, standard library only.
//
// Note [CPU names on Arm]: x86 kernels print "model name" (and "cpu family", "model"),
// some boards "Model" or "Hardware". Arm servers print none of them, only "CPU
// implementer" and "CPU part" (hex); without a name every Arm machine of one LLC size and
// core count would share a results folder (Note [Machine slug]). There the name comes
// from those two numbers, as lscpu names them: the designs the tables are likely to meet
// by name ("ARM Neoverse-N1": Graviton2 and Ampere Altra; "ARM Neoverse-V1": Graviton3;
// "ARM Neoverse-V2": Graviton4 and Grace; the names are util-linux lscpu's), any other
// by its maker and numbers ("Ampere part 0xac3", "implementer 0x99 part 0x4"), so two
// designs never share a folder. Boards print "Hardware" and "Model" after every CPU's
// block, so the whole text is read, each field's first value kept.
#pragma once
#include <cctype>
#include <cstdio>
#include <istream>
#include <string>

namespace sb::bench {

struct CpuInfoFields {
  std::string name;                 // "model name", "Model" or "Hardware"; else from the Arm numbers
  int family = -1, model = -1;      // "cpu family", "model" (x86); -1: absent
};

namespace cpuinfo_detail {

inline std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// a decimal or 0x-prefixed value; -1 when it is not one
inline long number(const std::string& v) {
  try {
    size_t used = 0;
    const long x = std::stol(v, &used, 0);
    return used == v.size() && x >= 0 ? x : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

inline std::string hex(long x) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%lx", x);
  return buf;
}

// Note [CPU names on Arm]
inline std::string arm_name(long implementer, long part) {
  struct Part {
    long implementer, part;
    const char* name;
  };
  static const Part kParts[] = {
      {0x41, 0xd03, "ARM Cortex-A53"},   {0x41, 0xd07, "ARM Cortex-A57"},   {0x41, 0xd08, "ARM Cortex-A72"},
      {0x41, 0xd0b, "ARM Cortex-A76"},   {0x41, 0xd0c, "ARM Neoverse-N1"},  {0x41, 0xd40, "ARM Neoverse-V1"},
      {0x41, 0xd49, "ARM Neoverse-N2"},  {0x41, 0xd4f, "ARM Neoverse-V2"},  {0x41, 0xd84, "ARM Neoverse-V3"},
      {0x41, 0xd8e, "ARM Neoverse-N3"},
  };
  for (const Part& p : kParts)
    if (p.implementer == implementer && p.part == part) return p.name;
  struct Maker {
    long implementer;
    const char* name;
  };
  static const Maker kMakers[] = {{0x41, "ARM"},      {0x42, "Broadcom"}, {0x46, "Fujitsu"}, {0x48, "HiSilicon"},
                                  {0x4e, "NVIDIA"},   {0x51, "Qualcomm"}, {0x61, "Apple"},   {0x6d, "Microsoft"},
                                  {0xc0, "Ampere"}};
  std::string maker = "implementer " + hex(implementer);
  for (const Maker& m : kMakers)
    if (m.implementer == implementer) maker = m.name;
  return part >= 0 ? maker + " part " + hex(part) : maker;
}

}  // namespace cpuinfo_detail

// /proc/cpuinfo's text: each field's first value (the first CPU's).
inline CpuInfoFields parse_cpuinfo(std::istream& in) {
  using namespace cpuinfo_detail;
  CpuInfoFields f;
  long implementer = -1, part = -1;
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (f.name.empty() && (key == "model name" || key == "Model" || key == "Hardware")) f.name = value;
    else if (key == "cpu family" && f.family < 0) f.family = static_cast<int>(number(value));
    else if (key == "model" && f.model < 0) f.model = static_cast<int>(number(value));
    else if (key == "CPU implementer" && implementer < 0) implementer = number(value);
    else if (key == "CPU part" && part < 0) part = number(value);
  }
  if (f.name.empty() && implementer >= 0) f.name = arm_name(implementer, part);
  if (f.name.empty()) f.name = "unknown-cpu";
  return f;
}

}  // namespace sb::bench
