// `ctx tool` decided by the supervisor (seed 000 "Tool as File",
// "Permission check"), from what the launch gave the sandbox: its CTX_PATH
// as planned, the mount flags of the plan and the agent's policy as it is
// now. The runtime's CTX_PATH, CTX_ROOT and CTX_AGENT play no part.
//
// An allowed call is answered with a descriptor of the tool (O_PATH),
// opened without following a symbolic link beneath the detached,
// read-only clone of the CTX root the sandbox made (launcher/sandbox/sandbox.cpp):
// the helper runs it with execveat, so the call needs no path to the tool
// inside the sandbox, and nothing the agent can reach runs a tool
// unrecorded. Every call, allowed or not, is one tool.call event; a call
// reaches the gate only through the control server's rate limit
// (launcher/control/rate_limit.hpp).
//
// Protocol (on the control socket, launcher/control/server.hpp):
//   {"op":"tool","name":"fs.read"[,"dir":"/ctx/tool"]}
// "dir": the tier the runtime named (a direct call of /ctx/tool/fs.read);
// it must be a tier the plan shows, and the call is recorded as an
// exec ("via":"exec"), like one through the FUSE view. Answers:
//   {"ok":true,"op":"tool","name":...,"path":"/ctx/tool/fs.read"} + 1 fd
//   {"ok":false,"op":"tool","code":"EACCES","reason":"agent_policy","message":...}
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/control/request.hpp"
#include "launcher/records/event.hpp"
#include "launcher/plan/plan.hpp"
#include "access/fs_tree.hpp"

namespace ctx::launcher {

/// One tier of the planned CTX_PATH, as the sandbox sees it and where it
/// lies below the CTX root.
struct ToolTier {
  std::string inner;    ///< the CTX_PATH entry ("/ctx/tool")
  std::string rel;      ///< below the CTX root ("tool")
  bool noexec = false;  ///< the mount that shows it is noexec
};

/// The tier at the inner directory `inner`, when the plan shows it from
/// the CTX tree (a view, or a bind of a directory below the CTX root) and
/// no mask hides it. Pure.
std::optional<ToolTier> tier_at(const LaunchPlan& plan, const std::string& inner);

/// The planned CTX_PATH's tiers that lie in the CTX tree, in order; an
/// entry that a mask hides or that the plan shows from outside the CTX
/// root is left out (it holds no tools the view gates). Pure.
std::vector<ToolTier> tool_tiers(const LaunchPlan& plan);

/// What one request gets: the answer, and the tool when allowed.
struct ToolAnswer {
  nlohmann::json answer;
  UniqueFd tool;
};

class ToolGate {
 public:
  /// tree: the sandbox's read-only clone of the CTX root. Every call goes
  /// to both of `records` (the session's events.jsonl, which the agent can
  /// write, and <name>.d/log, which the sandbox sees read-only at most);
  /// one that reached a tool also goes to the tool's own .d/log and
  /// .d/status when they exist (log_tool). plan and records are borrowed.
  ToolGate(const LaunchPlan& plan, UniqueFd tree, RecordSink& records);

  /// Decides a decoded call, records it, and answers it: the tool's
  /// descriptor when allowed.
  ToolAnswer call(const ToolRequest& req);
  /// Records and answers a tool request the decoder refused (e: its
  /// EINVAL, invalid_request).
  ToolAnswer refuse_request(const Error& e);

 private:
  ToolAnswer refuse(const std::string& name, const Error& e, EventStatus status, bool direct = false,
                    const std::string& reached = "");
  void record(const Event& ev, const std::string& reached);
  void log_tool(const std::string& rel, const Event& ev);
  Result<std::optional<ToolAnswer>> find(const std::vector<ToolTier>& tiers, const std::string& name,
                                         const access::Viewer& v, std::string& reached);

  const LaunchPlan& plan_;
  UniqueFd tree_;
  std::vector<ToolTier> tiers_;
  RecordSink& records_;
  std::set<std::pair<std::string, int>> warned_;  ///< (tool .d/ file, errno) already said
  access::LiveViewer live_;
};

}  // namespace ctx::launcher
