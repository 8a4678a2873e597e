// cublas_api.h — cuBLAS and cuBLASLt, loaded on first use (Note [cuBLAS loaded on first use]).
//
//   sb::cuda::cublas_api().cublasGemmEx(...)   every cuBLAS / cuBLASLt call of ours, by its
//                                              API name (the headers' _v2 macros apply)
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

#include <string>

// Note [cuBLAS loaded on first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// libcublasLt's static initialisers run at every program start when it is linked, and
// were most of a CPU-only benchmark binary's start-up (docs/notes/bench.md, "cuBLAS
// loaded on first use"): paid by every test, by every benchmark binary each round of
// the re-check, and by every user who never touches a GPU. So no target
// links cuBLAS: the first CUDA op that needs it dlopen()s libcublasLt and libcublas by
// soname (LD_LIBRARY_PATH, the program's RUNPATH, the system's cache), then from the
// toolkit's library directory known at build time, and resolves these entry points.
// A library that will not load, or lacks one of them, is an sb::Error naming it and
// the loader's message. cudart stays linked (device_count() needs it on every path);
// cuDNN is linked too (its own engine libraries load lazily, its start-up is cheap).
namespace sb::cuda {

// Each member has the type and (after the headers' macros, e.g. cublasCreate ->
// cublasCreate_v2) the name of the entry point it points to.
template <class T>
using CublasEntry = T;

struct CublasApi {
#define SB_CUBLAS_ENTRY(fn) decltype(&::fn) fn;
#define SB_CUBLAS_ENTRY_AS(fn, ...) CublasEntry<__VA_ARGS__> fn;
#include "cuda/cublas_entries.inc"
#undef SB_CUBLAS_ENTRY
#undef SB_CUBLAS_ENTRY_AS
};

// Loads the libraries on the first call (thread-safe) and returns the table; throws
// sb::Error when they do not load. Later calls return the same table.
const CublasApi& cublas_api();

namespace detail {
// dlopen()s `soname` (then from the toolkit's library directory); sb::Error naming it and
// the loader's messages when neither loads. RTLD_LAZY | RTLD_LOCAL; never closed.
void* open_cuda_library(const std::string& soname);
}  // namespace detail

}  // namespace sb::cuda
