// cuda_blas_test.cpp — Note [cuBLAS loaded on first use] (lib/cuda/cublas_api.h): the
// libraries load and every entry point resolves without a GPU (loading needs no device);
// a library that is not there is an sb::Error naming it. The GEMMs themselves are tested
// per device in matmul_test, conv_test and quant_test. Compiled out without CUDA.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

#ifdef SB_WITH_CUDA
#include "cuda/cublas_api.h"
#endif

namespace sb {
namespace {

#ifdef SB_WITH_CUDA
TEST(CudaBlas, EveryEntryPointResolvesWithoutADevice) {
  const cuda::CublasApi& api = cuda::cublas_api();
  int n = 0;
#define SB_CUBLAS_ENTRY(fn) \
  EXPECT_NE(api.fn, nullptr) << #fn; \
  ++n;
#define SB_CUBLAS_ENTRY_AS(fn, ...) SB_CUBLAS_ENTRY(fn)
#include "cuda/cublas_entries.inc"
#undef SB_CUBLAS_ENTRY
#undef SB_CUBLAS_ENTRY_AS
  EXPECT_GE(n, 17);
  // a call through the table reaches the library: its own name for a status
  EXPECT_EQ(std::string(api.cublasGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED)), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_EQ(std::string(api.cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_EQ(&cuda::cublas_api(), &api);  // loaded once
}

TEST(CudaBlas, AMissingLibraryIsAnErrorNamingIt) {
  try {
    cuda::detail::open_cuda_library("libsb_no_such_library.so.1");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("libsb_no_such_library.so.1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("LD_LIBRARY_PATH"), std::string::npos) << msg;
  }
}
#else
TEST(CudaBlas, NotInThisBuild) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace sb
