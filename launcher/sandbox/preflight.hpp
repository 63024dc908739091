// What a launch of a plan would refuse on this host, found before
// anything is made (issue 13): the root, each bind's source, the cwd and
// the runtime inside the planned tree, and the runtime's `#!` interpreter
// as the sandbox would resolve it (through the root's merged-/usr links
// and the binds). The launcher runs it after make_plan and `ctx check`
// runs the same code, so a tree the check passes does not fail a launch
// for these reasons, and each error names the control file (and line)
// to fix. It is advice, read before the launch: the sandbox's own
// checks still decide (a file can change in between).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "launcher/plan/plan.hpp"

namespace ctx::launcher {

/// What runtime_issue may ask of the world.
struct RuntimeLookup {
  /// Whether a path exists in the sandbox (its own files, or the planned
  /// tree).
  std::function<bool(const std::string&)> in_sandbox;
  /// Whether a path exists on the host; unset inside the sandbox, which
  /// cannot tell.
  std::function<bool(const std::string&)> on_host;
  /// The sandbox's PATH, where `#!/usr/bin/env NAME` looks for NAME.
  std::string path;
};

/// Why the kernel answers ENOENT (or runs nothing) for a runtime whose
/// file exists, or why it would fail at once, from its first bytes
/// (`head`, up to 4 KiB): a `#!` line that ends in CR (DOS line ends), a
/// `#!` interpreter or an ELF loader (PT_INTERP) the sandbox does not
/// have, or the program `#!/usr/bin/env NAME` names in none of the
/// sandbox's PATH directories. Each says whether the host has it (then a
/// mount is missing) or not (then the runtime names something that is
/// nowhere). nullopt when none of these is the cause. Pure: the sandbox
/// asks it after a failed execve, `ctx check` before the launch.
/// `host`: the file on the host, for the fix.
std::optional<Error> runtime_issue(const std::string& prog, const std::string& host, std::string_view head,
                                   const std::string& root, const RuntimeLookup& look);

/// For a runtime the sandbox did not find (exit 127): where the host has
/// the program the plan's argv[0] names (itself, or found through the
/// plan's PATH) though no step of the plan shows it, as the words to add
/// to the error; nullopt when the host has it nowhere either.
std::optional<std::string> runtime_host_hint(const LaunchPlan& plan);

/// The ELF program interpreter (PT_INTERP) named in the first bytes of an
/// executable, or "" (not ELF, 32-bit, or not within `head`). Pure.
std::string elf_interpreter(std::string_view head);

/// Every error of the plan against this host, with the file-system ids
/// the sandbox reads the tree with (a root caller takes the owner's for
/// the reads). Empty when the launch can go ahead.
std::vector<Error> preflight(const LaunchPlan& plan);

}  // namespace ctx::launcher
