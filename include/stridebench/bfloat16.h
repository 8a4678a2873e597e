// bfloat16.h — bfloat16 storage type (the upper 16 bits of a float32) with float
// conversion.
//
// Storage only: arithmetic converts to float, computes, converts back, as PyTorch's
// c10::BFloat16 does. Widening is exact (the bits shifted up). Narrowing rounds to
// nearest even on the dropped 16 bits; a carry out of the mantissa rounds up into the
// exponent, so values past the largest bfloat16 become infinity, as in PyTorch.
//
// Note [bfloat16 NaN and subnormals]
// - A NaN stays a NaN: its sign and upper payload bits are kept and the quiet bit set,
//   as vcvtneps2bf16 does (the rounding bias alone could carry a NaN's low payload into
//   infinity), so every path gives the same bits. PyTorch's scalar conversion returns
//   0x7FC0 for every NaN; both print and compare as NaN.
// - Float32 subnormals round like any other value here (to a bfloat16 subnormal or 0).
//   The AVX512_BF16 instruction vcvtneps2bf16, which the vector kernels use where the
//   CPU has it, treats subnormal inputs as zero (DAZ) and flushes subnormal results
//   (FTZ): values below 2^-126 in magnitude differ by at most that much between the two
//   paths. tests/tensor_test.cpp pins both rules.
#pragma once
#include <cstdint>
#include <cstring>
#include <ostream>

namespace sb {

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a float type
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even on the low 16 bits
    return static_cast<uint16_t>(x >> 16);
  }

  static float to_float(uint16_t b) {
    const uint32_t x = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

inline std::ostream& operator<<(std::ostream& os, BFloat16 v) { return os << static_cast<float>(v); }

}  // namespace sb
