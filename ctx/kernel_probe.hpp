// `ctx check --env`: the kernel facilities of docs/launcher.md's "Minimum
// kernel" table, each probed for real in a forked child (nothing of the
// caller changes), each result with the minimum kernel and, on failure,
// a remedy.
#pragma once

#include <string>
#include <vector>

#include "ctx/check.hpp"
#include "ctx/container_probe.hpp"

namespace ctx::helper {

/// One facility of the table: its name as the table's first column says
/// it (without backticks) and the first Linux release that has it.
struct KernelFacility {
  std::string name;
  std::string since;
};

/// The facilities, in the table's order. The one list the probes follow.
const std::vector<KernelFacility>& kernel_facilities();

/// What the probe of one facility found.
struct FacilityResult {
  KernelFacility facility;
  enum class State { ok, missing, not_probed } state = State::ok;
  std::string detail = {};  ///< ok: what was seen; missing: the error; not_probed: why
  std::string remedy = {};  ///< missing: what to do
  bool fatal = false;       ///< missing and nothing can launch (an error, not a warning)
};

/// "ok", "missing" or "not probed".
const char* to_string(FacilityResult::State s);

/// The finding a result prints as, with its fields for --json:
///   env ok      <facility> (Linux <since>[; <detail>])
///   env missing <facility> (Linux <since>): <detail>: <remedy>
///   env skip    <facility> (Linux <since>): not probed: <detail>
Finding facility_finding(const FacilityResult& r);

/// Probes every facility of kernel_facilities() for the calling user;
/// `where` (the container, if any) decides the remedies.
std::vector<FacilityResult> probe_kernel_facilities(const ContainerView& where);

}  // namespace ctx::helper
