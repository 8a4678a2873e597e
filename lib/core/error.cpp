// error.cpp — out-of-line throw helpers, so the checks stay small at their call sites.
#include "stridebench/error.h"

#include <cstdio>
#include <cstdlib>

namespace sb::detail {

void note_throw(const char* file, int line) {
  const char* path = std::getenv("SB_THROW_LOG");
  if (path == nullptr) return;
  if (std::FILE* f = std::fopen(path, "a")) {  // a line per raise; appends from several processes interleave by line
    std::fprintf(f, "%s:%d\n", file, line);
    std::fclose(f);
  }
}

void throw_error(const std::string& msg) { throw Error(msg); }

void throw_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(str_cat("stridebench internal error at ", file, ":", line, ": ", cond,
                              " failed", msg.empty() ? "" : ": ", msg,
                              " (this is a bug in stridebench, please report it)"));
}

}  // namespace sb::detail
