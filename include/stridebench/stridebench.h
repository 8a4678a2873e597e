// stridebench.h — the whole public API in one include: tensors and their views,
// allocators, the ops of every family, and the CPU feature controls.
//   #include "stridebench/stridebench.h"   (with -I <stridebench>/include)
#pragma once
#include "stridebench/allocator.h"
#include "stridebench/conv.h"
#include "stridebench/cpu_features.h"
#include "stridebench/dtype.h"
#include "stridebench/elementwise.h"
#include "stridebench/error.h"
#include "stridebench/matmul.h"
#include "stridebench/memory_format.h"
#include "stridebench/parallel.h"
#include "stridebench/quant.h"
#include "stridebench/reduce.h"
#include "stridebench/tensor.h"
