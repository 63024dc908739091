// Probes for the kernel and machine facilities that test tags need.
#pragma once

#include <optional>
#include <string>

namespace ctx::test {

/// nullopt when the facility named by a test tag ("unit", "fs", "userns",
/// "root", "cgroup", "fuse", "vm", "agents") is usable here; else why not, in words
/// that say what to change.
std::optional<std::string> facility_missing(const std::string& facility);

/// Where scripts/install-agents put the coding-agent CLIs that the
/// [agents] tests run: $CTX_AGENTS_DIR, else /opt/ctx-test-agents.
std::string agents_dir();

/// The facility tag this run of the runner was started for ("root",
/// "userns", ...), so one test body can run in several modes.
const std::string& current_facility();
void set_current_facility(const std::string& f);

}  // namespace ctx::test
