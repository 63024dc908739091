// The seccomp deny-list applied to an agent's runtime just before execve
// (and so to everything it starts: tools, shells, helpers). One table,
// each entry with its reason (docs/seccomp.md prints the same table).
// Denied calls return an errno; nothing is killed, so a program that
// probes for a facility sees it missing and goes on. A deny-list, unlike
// Docker's default profile, because agents run arbitrary runtimes whose
// new calls an allow-list would refuse (docs/seccomp.md, "A deny-list,
// not an allow-list").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ctx::sys {

/// When a rule applies.
enum class SeccompWhen {
  always,         ///< every call
  arg_has_bits,   ///< (argument & value) != 0
  arg_low32_is,   ///< (argument & 0xffffffff) == value (ioctl requests)
  arg_not_query,  ///< personality: anything but PER_LINUX (0) or the query (0xffffffff)
};

/// One entry of the deny-list.
struct SeccompRule {
  const char* syscall;  ///< the name libseccomp resolves
  SeccompWhen when = SeccompWhen::always;
  unsigned arg = 0;  ///< which argument (0-based)
  std::uint64_t value = 0;
  int error = 0;       ///< the errno returned
  const char* reason;  ///< why, for docs/seccomp.md
};

/// The deny-list, in the order it is documented.
const std::vector<SeccompRule>& seccomp_rules();

/// How the program finds a call's rules: a binary tree over the syscall
/// numbers (what a launch loads), or libseccomp's default linear chain
/// (only bench/seccomp's reference). Both refuse and allow the same calls.
enum class SeccompLayout { tree, linear };

/// The filter as a BPF program (struct sock_filter array, as bytes),
/// built by libseccomp: default allow; the rules above; every other
/// architecture than the native one (i386, x32 on x86_64): EPERM. A
/// syscall this libseccomp does not know on this architecture is skipped:
/// it cannot be called by that name here.
Result<std::string> build_seccomp_program(SeccompLayout layout = SeccompLayout::tree);

/// The program build_seccomp_program() makes, built into the binary when
/// it was compiled (sys/seccomp_gen.cpp), so a launch only loads it; a
/// unit test checks that it equals what libseccomp builds now.
std::string_view builtin_seccomp_program();

/// Loads a program from build_seccomp_program into the calling thread
/// (seccomp(SECCOMP_SET_MODE_FILTER)); needs no_new_privs.
Result<void> load_seccomp_program(std::string_view program);

/// Builds and loads the filter (default: allow; the rules above; every other
/// architecture than the native one (i386, x32 on x86_64): EPERM) into
/// the calling thread. Needs no_new_privs (or CAP_SYS_ADMIN). A syscall
/// this libseccomp does not know on this architecture is skipped: it
/// cannot be called by that name here.
Result<void> apply_seccomp_filter();

}  // namespace ctx::sys
