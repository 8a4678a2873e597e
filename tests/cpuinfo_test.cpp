// cpuinfo_test.cpp — the CPU's name and numbers from /proc/cpuinfo's text (Note [CPU
// names on Arm], benchmarks/cpuinfo.h), on the texts of an x86 VM, Arm servers and a
// board: the first CPU's values, names from the Arm numbers where no name is printed,
// each design its own name.
#include "cpuinfo.h"

#include <gtest/gtest.h>

#include <sstream>

namespace sb::bench {
namespace {

CpuInfoFields parse(const std::string& text) {
  std::istringstream in(text);
  return parse_cpuinfo(in);
}

const char* kXeon =
    "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n"
    "model name\t: Intel(R) Xeon(R) Processor\nstepping\t: 1\nflags\t\t: fpu vme avx512f amx_tile\n\n"
    "processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
    "model name\t: Another Name\n\n";

// Graviton3's text: no model name; CPU part 0xd40
const char* kGraviton3 =
    "processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 sve bf16\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd40\nCPU revision\t: 1\n\n"
    "processor\t: 1\nBogoMIPS\t: 2100.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n\n";

TEST(CpuInfo, X86TakesTheFirstCpusNameFamilyAndModel) {
  const CpuInfoFields f = parse(kXeon);
  EXPECT_EQ(f.name, "Intel(R) Xeon(R) Processor");
  EXPECT_EQ(f.family, 6);
  EXPECT_EQ(f.model, 167);
}

TEST(CpuInfo, ArmServersAreNamedByTheirPart) {
  const CpuInfoFields f = parse(kGraviton3);
  EXPECT_EQ(f.name, "ARM Neoverse-V1");
  EXPECT_EQ(f.family, -1);  // family and model are x86's numbers
  EXPECT_EQ(f.model, -1);
  EXPECT_EQ(parse("CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n").name, "ARM Neoverse-N1");
  EXPECT_EQ(parse("CPU implementer\t: 0x41\nCPU part\t: 0xd4f\n").name, "ARM Neoverse-V2");
}

TEST(CpuInfo, UnnamedArmDesignsKeepTheirNumbers) {
  EXPECT_EQ(parse("CPU implementer\t: 0xc0\nCPU part\t: 0xac3\n").name, "Ampere part 0xac3");
  EXPECT_EQ(parse("CPU implementer\t: 0x41\nCPU part\t: 0xd4a\n").name, "ARM part 0xd4a");
  EXPECT_EQ(parse("CPU implementer\t: 0x99\nCPU part\t: 0x4\n").name, "implementer 0x99 part 0x4");
  EXPECT_EQ(parse("CPU implementer\t: 0x61\n").name, "Apple");
  // two designs of one maker never share a name (Note [Machine slug])
  EXPECT_NE(parse("CPU implementer\t: 0xc0\nCPU part\t: 0xac3\n").name,
            parse("CPU implementer\t: 0xc0\nCPU part\t: 0xac4\n").name);
}

TEST(CpuInfo, BoardsNameThemselvesAfterTheCpuBlocks) {
  const CpuInfoFields f = parse(
      "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd08\n\nprocessor\t: 1\nCPU implementer\t: 0x41\n"
      "CPU part\t: 0xd08\n\nHardware\t: BCM2835\nRevision\t: c03111\nModel\t\t: Raspberry Pi 4 Model B Rev 1.1\n");
  EXPECT_EQ(f.name, "BCM2835");  // the first of the name fields, as before Arm names
}

TEST(CpuInfo, TextWithoutNamesOrNumbers) {
  EXPECT_EQ(parse("").name, "unknown-cpu");
  const CpuInfoFields f = parse("processor : 0\ncpu family : six\nmodel : 0x1z\n");
  EXPECT_EQ(f.name, "unknown-cpu");
  EXPECT_EQ(f.family, -1);
  EXPECT_EQ(f.model, -1);
}

}  // namespace
}  // namespace sb::bench
