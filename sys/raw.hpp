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

// For code that runs beside its starter in the starter's memory (the
// recorder): nothing instrumented, no sanitizer's
// checks, no fuzzer's coverage callbacks (the test build's), no
// -finstrument-functions hooks (scripts/text-order's build), which call
// into their runtimes.
#if defined(__clang__)
#define CTX_RAW_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined", "coverage"), no_instrument_function))
#else
#define CTX_RAW_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined"), no_instrument_function))
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

// The calls of bin/ctx's small program (ctx/call_bare.cpp), by name: each
// returns what call() does, the result or -errno.
inline long write(int fd, const void* p, unsigned long n) { return call(SYS_write, fd, arg(p), static_cast<long>(n)); }
inline long close(int fd) { return call(SYS_close, fd); }
inline long socket(int domain, int type, int protocol) { return call(SYS_socket, domain, type, protocol); }
inline long connect(int fd, const void* addr, unsigned long len) {
  return call(SYS_connect, fd, arg(addr), static_cast<long>(len));
}
inline long sendmsg(int fd, const void* msg, int flags) { return call(SYS_sendmsg, fd, arg(msg), flags); }
inline long recvmsg(int fd, void* msg, int flags) { return call(SYS_recvmsg, fd, arg(msg), flags); }
inline long fcntl(int fd, int cmd, long value = 0) { return call(SYS_fcntl, fd, cmd, value); }
inline long pipe2(int* fds, int flags) { return call(SYS_pipe2, arg(fds), flags); }
inline long openat(int dir, const char* path, int flags) { return call(SYS_openat, dir, arg(path), flags); }
inline long readlinkat(int dir, const char* path, char* buf, unsigned long n) {
  return call(SYS_readlinkat, dir, arg(path), arg(buf), static_cast<long>(n));
}
inline long execve(const char* path, char* const* argv, char* const* envp) {
  return call(SYS_execve, arg(path), arg(argv), arg(envp));
}
inline long execveat(int fd, const char* path, char* const* argv, char* const* envp, int flags) {
  return call(SYS_execveat, fd, arg(path), arg(argv), arg(envp), flags);
}
[[noreturn]] inline void exit_group(int status) {
  call(SYS_exit_group, status);
  __builtin_unreachable();
}

}  // namespace ctx::sys::raw
