// Integration-test support for a child about to exec (the before_exec of
// run_command and spawn_command): namespaces of the test's own, set up
// without touching the machine's.
#pragma once

#include <string>

#include "test/support/launch.hpp"

namespace ctx::test {

/// Writes v to path in one write(2), as /proc files want, opening it
/// O_WRONLY | O_CLOEXEC | extra_flags (mode 0644 when created). False on
/// any failure.
bool write_file(const char* path, const std::string& v, int extra_flags = 0);

/// In a child about to exec: a user namespace of its own (and the
/// namespaces extra_flags adds) mapping u's ids to themselves, made
/// dumpable first (dropping from root made its /proc files root's). False
/// on any failure.
bool enter_own_userns(const TestUser& u, int extra_flags = 0);

}  // namespace ctx::test
