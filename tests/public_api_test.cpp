// public_api_test.cpp — the public API through its one include root: this file is
// compiled with -I include only (tests/meson.build), so an internal header reached
// from a public one fails the build; and a first program a user would write runs.
#include "stridebench/stridebench.h"

#include <gtest/gtest.h>

namespace {

TEST(PublicApi, OneIncludeRootIsEnough) {
  sb::Tensor a = sb::ones({2, 3});
  sb::Tensor b = sb::ones({3, 2}).t();  // a transposed view
  sb::Tensor c = sb::add(a, b);
  EXPECT_EQ(c.sizes(), sb::Shape({2, 3}));
  EXPECT_DOUBLE_EQ(sb::sum(c, {0, 1}).get({}), 12.0);
  EXPECT_THROW(sb::add(sb::ones({3}), sb::ones({2})), sb::Error);
}

}  // namespace
