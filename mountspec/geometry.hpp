// The one geometry of a mount plan: which step shows an inner path, the
// host path behind an inner path, and where the sandbox shows a host path.
// Every host <-> sandbox path question of the launcher, the preflight and
// the gates is answered here. Pure: nothing here touches the file system,
// so an answer is about the plan, not about symlinks in what it mounts.
//
// Paths given may end in '/' and hold empty or "." components; a path
// with a ".." component gets no answer (nullopt or nullptr): resolving it
// needs the file system (a symlink below a mount point changes where ".."
// leads), and a gate must never take "/ctx/tool/.." as a place below
// /ctx/tool.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "mountspec/steps.hpp"

namespace ctx::mountspec {

/// `p` as a strict absolute path (base/path.hpp): trailing '/', empty
/// and "." components dropped. nullopt for a relative path, a ".."
/// component, or what is still not strict then (a control character).
std::optional<std::string> plain_path(std::string_view p);

/// The step that decides what the inner path `inner` shows: among the
/// steps that put something at their target (all but symlink and seal),
/// the deepest target at or above it; a later step wins on an equal
/// target, as it is made later. nullptr when none is, or `inner` is not
/// plain (plain_path).
const MountStep* covering_step(const MountPlan& plan, std::string_view inner);

/// covering_step among the steps of the given kinds only: what would
/// decide if the plan had no others (the agent view's planning asks what
/// is below a mask).
const MountStep* covering_step(const MountPlan& plan, std::string_view inner, std::initializer_list<StepKind> kinds);

/// covering_step among plan[0, end) and the given kinds: what decides
/// there when the step at `end` is made.
const MountStep* covering_step(const MountPlan& plan, std::size_t end, std::string_view inner,
                               std::initializer_list<StepKind> kinds);

/// The host path that shows `inner` in the planned sandbox: through the
/// covering step's source (a root that is not fresh, a bind, a device
/// node) or, for a view, through the CTX root `ctx_root` (a view's source
/// is relative to it; "" and "." are the root itself); through an entry
/// a mask keeps, what the steps before the mask show there. nullopt when
/// a fresh file system, a mask or a socket shows it, or no step does.
std::optional<std::string> host_path_of(const MountPlan& plan, std::string_view ctx_root, std::string_view inner);

/// Where the planned sandbox shows the host path `host`: the step with
/// the deepest host source that holds it and whose inner place shows it
/// (host_path_of gives `host` back: no mask and no deeper step lies over
/// it); on an equal source the earlier step. nullopt when no step shows
/// it.
std::optional<std::string> inner_path_of(const MountPlan& plan, std::string_view ctx_root, std::string_view host);

}  // namespace ctx::mountspec
