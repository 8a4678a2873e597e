// error.cpp — out-of-line throw helpers, so the checks stay small at their call sites.
#include "stridebench/error.h"

namespace sb::detail {

void throw_error(const std::string& msg) { throw Error(msg); }

void throw_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(str_cat("stridebench internal error at ", file, ":", line, ": ", cond,
                              " failed", msg.empty() ? "" : ": ", msg,
                              " (this is a bug in stridebench, please report it)"));
}

}  // namespace sb::detail
