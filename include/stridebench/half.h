// half.h — IEEE 754 binary16 storage type with float conversion.
//
// Storage only: arithmetic converts to float, computes, converts back (round to
// nearest even), as PyTorch's CPU half does. Conversions are branchy scalar code;
// SIMD kernels use F16C (vcvtph2ps / vcvtps2ph) instead where it is built in.
#pragma once
#include <cstdint>
#include <cstring>

namespace sb {

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a float type
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)  // inf or nan
      return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (absx < 0x38800000u) {  // subnormal half or zero
      if (absx < 0x33000000u) return static_cast<uint16_t>(sign);  // rounds to 0
      const uint32_t e = absx >> 23;
      const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
      const uint32_t shift = 126 - e;  // value / 2^-24 = m * 2^(e-150+24) = m >> (126 - e)
      uint32_t r = m >> shift;
      const uint32_t rem = m & ((1u << shift) - 1);
      const uint32_t half = 1u << (shift - 1);
      if (rem > half || (rem == half && (r & 1u))) ++r;
      return static_cast<uint16_t>(sign | r);
    }
    // normal: rebias exponent 127 -> 15, round mantissa 23 -> 10 bits to nearest even
    uint32_t r = absx - 0x38000000u;
    const uint32_t rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into exponent: fine
    return static_cast<uint16_t>(sign | r);
  }

  static float to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    uint32_t x;
    if (e == 0x1f) {
      x = sign | 0x7f800000u | (m << 13);
    } else if (e == 0) {
      if (m == 0) {
        x = sign;
      } else {  // subnormal: normalise
        int ee = -1;
        do { m <<= 1; ++ee; } while (!(m & 0x400u));
        x = sign | static_cast<uint32_t>(127 - 15 - ee) << 23 | ((m & 0x3ffu) << 13);
      }
    } else {
      x = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

}  // namespace sb
