// convert.h — element conversion between dtypes, as PyTorch converts: floating to
// integer truncates toward zero (out-of-range values are undefined there; here they
// wrap through int64), float16 and bfloat16 go through float.
#pragma once
#include <cstdint>
#include <type_traits>

#include "stridebench/bfloat16.h"
#include "stridebench/half.h"

namespace sb {

template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace sb
