#include "core/tensor.h"
#include "test_util.h"
namespace sb { namespace {
TEST(Tensor, Smoke) {
  Tensor a = arange(12).view({3, 4});
  EXPECT_EQ(a.t().get({1, 2}), 9);
}
}}
