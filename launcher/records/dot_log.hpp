// A gate's record in the `.d/log` of what it decided on (a tool, a model):
// the one writer both gates use, so the rules that keep a supervisor from
// writing where it must not live in one place. The .d/ is opened beneath
// the CTX root with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), the
// log relative to it with O_NOFOLLOW, regular files only (docs/security.md,
// "One writer for a tool's and a model's .d/log").
#pragma once

#include <string>

#include "base/result.hpp"
#include "launcher/plan/plan.hpp"

namespace ctx::launcher {

/// Whose log it is, which decides what may be made and with whose rights.
/// The two differ on purpose (docs/abi.md, "Tool logs"; docs/models.md,
/// "A model's log and floods").
enum class DotLogRule {
  /// A tool's: only a `log` the tool's owner made is written, always with
  /// the agent owner's file-system ids; nothing is made, renamed or
  /// removed in the .d/, so at kMaxLogBytes the log is emptied.
  opt_in,
  /// A model's: the log is made when missing and becomes log.1 at
  /// kMaxLogBytes (append_capped_log); a root supervisor writes as root
  /// only in a .d/ that root owns and nobody else may write (the system
  /// tier), anywhere else with the agent owner's file-system ids.
  shared,
};

/// Appends `line` (one record with its '\n') to <ctx root>/<rel>.d/log by
/// `rule`. ENOENT: no .d/ that can be opened so (missing, a symlink on the
/// way, not the owner's to search; opt_in: or no log), so the object keeps
/// no log; any other error names what failed, for the caller to warn with.
Result<void> append_dot_log(const LaunchPlan& plan, const std::string& rel, const std::string& line, DotLogRule rule);

}  // namespace ctx::launcher
