// System calls made by the program's own instructions: no C library, no
// errno. For code that runs where the C library must not be used: the
// recorder, which shares the supervisor's memory (sys/recorder.hpp), and
// bin/ctx's small program, built without a C library (ctx/call_bare.cpp).
// x86-64 and arm64; elsewhere through syscall(2), for code that may use
// the C library there (kRawSyscalls says which).
#pragma once

#include <sys/syscall.h>

#if !defined(__x86_64__) && !defined(__aarch64__)
#include <unistd.h>

#include <cerrno>
#endif

namespace ctx::sys::raw {

#if defined(__x86_64__) || defined(__aarch64__)
inline constexpr bool kRawSyscalls = true;
#else
inline constexpr bool kRawSyscalls = false;
#endif

/// System call `n`: its result, or -errno. It touches no memory but what
/// its arguments point to.
[[gnu::always_inline]] inline long call(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 asm("x8") = n;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  register long x3 asm("x3") = d;
  register long x4 asm("x4") = e;
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  return x0;
#else
  long r = ::syscall(n, a, b, c, d, e);
  return r < 0 ? -errno : r;
#endif
}

/// A pointer as a system call's argument.
template <class T>
[[gnu::always_inline]] inline long arg(T* p) {
  return reinterpret_cast<long>(p);
}

}  // namespace ctx::sys::raw
