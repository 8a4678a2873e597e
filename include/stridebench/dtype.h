// dtype.h — element types and devices.
//
// DType names the element type of a tensor; Device names where its storage lives
// (`cpu`, or `cuda:N`). SB_DISPATCH_* macros turn a run-time DType into a template
// type `scalar_t` for kernels.
#pragma once
#include <cstdint>
#include <string>

#include "stridebench/error.h"
#include "stridebench/bfloat16.h"
#include "stridebench/half.h"

namespace sb {

// BFloat16 last, so the earlier values keep their numbers.
enum class DType : uint8_t { Float32, Float64, Float16, Int8, Int32, Int64, BFloat16 };

constexpr int kNumDTypes = 7;

inline size_t dtype_size(DType t) {  // bytes per element
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Float16: return 2;
    case DType::Int8: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::BFloat16: return 2;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::Int8: return "int8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

inline bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

// The 16-bit floating dtypes: stored narrow, computed in float32.
inline bool is_reduced_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::Float16; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BFloat16; };

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // CUDA ordinal; 0 for the CPU

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace sb

// Run `__VA_ARGS__` (a lambda body or statement) with `scalar_t` bound to the C++ type
// of DTYPE. NAME is the op, for the error on an unsupported dtype.
#define SB_DTYPE_CASE(DT, T, ...) \
  case DT: {                      \
    using scalar_t = T;           \
    __VA_ARGS__;                  \
    break;                        \
  }

#define SB_DISPATCH_ALL(DTYPE, NAME, ...)                                  \
  switch (DTYPE) {                                                         \
    SB_DTYPE_CASE(::sb::DType::Float32, float, __VA_ARGS__)                \
    SB_DTYPE_CASE(::sb::DType::Float64, double, __VA_ARGS__)               \
    SB_DTYPE_CASE(::sb::DType::Float16, ::sb::Half, __VA_ARGS__)           \
    SB_DTYPE_CASE(::sb::DType::Int8, int8_t, __VA_ARGS__)                  \
    SB_DTYPE_CASE(::sb::DType::Int32, int32_t, __VA_ARGS__)                \
    SB_DTYPE_CASE(::sb::DType::Int64, int64_t, __VA_ARGS__)                \
    SB_DTYPE_CASE(::sb::DType::BFloat16, ::sb::BFloat16, __VA_ARGS__)      \
  }

#define SB_DISPATCH_FLOATING(DTYPE, NAME, ...)                             \
  switch (DTYPE) {                                                         \
    SB_DTYPE_CASE(::sb::DType::Float32, float, __VA_ARGS__)                \
    SB_DTYPE_CASE(::sb::DType::Float64, double, __VA_ARGS__)               \
    SB_DTYPE_CASE(::sb::DType::Float16, ::sb::Half, __VA_ARGS__)           \
    SB_DTYPE_CASE(::sb::DType::BFloat16, ::sb::BFloat16, __VA_ARGS__)      \
    default:                                                               \
      SB_CHECK(false, NAME, ": expected a floating dtype, got ", DTYPE);   \
  }
