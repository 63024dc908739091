// The sandbox a model runs in (seed 000: "model = pure inference
// endpoint"; issue 12): built from the calling agent's plan, never from
// its mounts. None of the agent's mounts (no project, no agent home, no
// shared space, no CTX tree but the model's own entry), no durable write
// (the root is a fresh tmpfs, read-only once made; /tmp is a small
// scratch tmpfs), no tools (no ctx helper, no tool tier, no supervisor
// socket), its own pid namespace (the agent's processes are not there),
// and no network unless the model's own `cap` names `network`. The
// model's credentials (its .d/env) reach its environment only. Pure.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "launcher/plan/plan.hpp"

namespace ctx::launcher {

/// A model entry as the supervisor found it (beneath the CTX root, by
/// real paths).
struct ModelEntry {
  std::string name;                                      ///< provider/model, after any alias
  std::string rel;                                       ///< the model file below the CTX root
  std::string alias;                                     ///< the alias named, below the CTX root ("" none)
  std::string host_path;                                 ///< the model file
  std::string meta_dir;                                  ///< its .d/ ("" when it has none)
  std::vector<std::pair<std::string, std::string>> env;  ///< its .d/env, in file order
  bool network = false;                                  ///< its .d/cap names `network`
  /// A call over HTTP: the request's CGI variables (launcher/control/http_meta.hpp);
  /// a name its .d/env also sets is the .d/env's.
  std::vector<std::pair<std::string, std::string>> request_env;
};

/// Where the model's entry appears inside its sandbox: its ABI path.
std::string model_inner_path(const std::string& name);

/// The model's sandbox: the agent's ids (the model runs as the agent's
/// runtime does), `anchor` an empty host directory the sandbox mounts its
/// tmpfs root over (its content, and anything written there later, is
/// never seen), `host_dirs` the host directories of the base system that
/// exist (/usr always; /etc/alternatives, /etc/ssl, ... when present),
/// `net_files` the host's resolver files that exist (/etc/resolv.conf,
/// /etc/hosts, /etc/nsswitch.conf: inside path, host path it resolves to),
/// bound read-only only when the model has the network.
LaunchPlan model_plan(const LaunchPlan& agent, const ModelEntry& m, const std::string& anchor,
                      const std::vector<std::string>& host_dirs,
                      const std::vector<std::pair<std::string, std::string>>& net_files);

}  // namespace ctx::launcher
