// error.h — the two checks of stridebench.
//
//   SB_CHECK(cond, parts...)           a user error: throws sb::Error whose message
//                                      names the op and the offending values.
//   SB_INTERNAL_ASSERT(cond, parts...) one of our own invariants: throws
//                                      sb::InternalError (a bug in stridebench).
//
// The message parts are streamed with operator<<, so sizes (std::vector<int64_t>)
// print as [2, 3, 4]. Both check before any work is done, so a failed check leaves
// every tensor as it was.
#pragma once
#include <cstdint>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace sb {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

template <typename T>
std::ostream& operator<<(std::ostream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << ']';
}

namespace detail {
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (void)(os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const std::string& msg);
void note_throw(const char* file, int line);  // Note [Raised checks recorded]
[[noreturn]] void throw_internal(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace detail

}  // namespace sb

// Note [Raised checks recorded]: built with -DSB_NOTE_THROWS (scripts/check_errors), a
// failing SB_CHECK first appends its file and line to the file SB_THROW_LOG names, so a
// test run tells which checks some test raised. Other builds compile the plain check.
#ifdef SB_NOTE_THROWS
#define SB_NOTE_THROW_SITE() ::sb::detail::note_throw(__FILE__, __LINE__)
#else
#define SB_NOTE_THROW_SITE() ((void)0)
#endif

#define SB_CHECK(cond, ...)                                          \
  do {                                                               \
    if (__builtin_expect(!(cond), 0)) {                              \
      SB_NOTE_THROW_SITE();                                          \
      ::sb::detail::throw_error(::sb::detail::str_cat(__VA_ARGS__)); \
    }                                                                \
  } while (0)

#define SB_INTERNAL_ASSERT(cond, ...)                                                 \
  do {                                                                                \
    if (__builtin_expect(!(cond), 0))                                                 \
      ::sb::detail::throw_internal(__FILE__, __LINE__, #cond,                         \
                                   ::sb::detail::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
