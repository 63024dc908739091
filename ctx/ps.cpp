#include "ctx/ps.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "agentdir/load.hpp"
#include "agentdir/tier.hpp"
#include "base/text.hpp"
#include "cgroup/discover.hpp"
#include "ctx/check.hpp"
#include "sys/file.hpp"

namespace ctx::helper {

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// Seconds since the process started: /proc/<pid>/stat field 22 (start
// time in clock ticks since boot) against /proc/uptime.
double uptime_of(int pid) {
  std::string stat = sys::read_or_empty("/proc/" + std::to_string(pid), "stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && in >> field; ++i) {
  }
  double start_ticks = std::atof(field.c_str());
  double boot_uptime = std::atof(sys::read_or_empty("/proc", "uptime").c_str());
  double up = boot_uptime - start_ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return up < 0 ? 0 : up;
}

// The cgroup of the sandbox: the supervisor's child that lives in a
// ".../runtime" cgroup (its other children, the watchdog and owned
// children's supervisors, stay in the supervisor's own cgroup).
std::string cgroup_of(int supervisor) {
  std::string task = "/proc/" + std::to_string(supervisor) + "/task/" + std::to_string(supervisor);
  std::istringstream children(sys::read_or_empty(task, "children"));
  for (int child = 0; children >> child;) {
    auto path = cgroup::v2_path(sys::read_or_empty("/proc/" + std::to_string(child), "cgroup"));
    if (path && path->size() > 8 && path->compare(path->size() - 8, 8, "/runtime") == 0) return *path;
  }
  return "-";
}

std::string format_uptime(double s) {
  long t = static_cast<long>(s);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  } else if (t >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", t);
  }
  return buf;
}

// The instances of one agent (<name>.d/instance/<session>/, docs/abi.md,
// "Instances") whose status is not dead and whose pid is a live process,
// by session name.
std::vector<PsRow> running_instances(const std::string& d) {
  std::vector<PsRow> out;
  auto dir = sys::open(sys::at_cwd, d + "/instance", sys::Open::directory);
  if (!dir) return out;
  auto sessions = sys::list_dir(dir->get());
  if (!sessions) return out;
  std::sort(sessions->begin(), sessions->end());
  for (const auto& s : *sessions) {
    const std::string i = d + "/instance/" + s;
    std::string status = first_line(sys::read_or_empty(i, "status"));
    int pid = std::atoi(first_line(sys::read_or_empty(i, "pid")).c_str());
    if (status.empty() || status == "dead" || pid <= 0) continue;
    if (!sys::open(sys::at_cwd, "/proc/" + std::to_string(pid), sys::Open::directory))
      continue;  // a stale pid file: not running
    PsRow r;
    r.session = s;
    // Most runtimes never send READY=1: once exec'd, `start` would say the
    // launch hangs.
    r.status = status == "start" && !sys::read_or_empty(i, "exec").empty() ? "running" : status;
    r.pid = pid;
    r.uptime_s = uptime_of(pid);
    r.cgroup = cgroup_of(pid);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Result<std::vector<PsRow>> running_agents(const std::string& ctx_root) {
  // An empty table would say "nothing runs" of a tree that is not there.
  if (auto agents = sys::open(sys::at_cwd, ctx_root + "/agent", sys::Open::directory); !agents)
    return fail(agents.error().code,
                ctx_root + ": " + errno_name(agents.error().code) +
                    ": no CTX root here (it has no agent/ directory); pass --ctx-root DIR or set CTX_ROOT "
                    "(ctx init makes a tree)");
  std::vector<PsRow> rows;
  std::vector<std::pair<std::string, agentdir::Tier>> all;
  for (const auto& name : agent_names(ctx_root)) all.emplace_back(name, agentdir::Tier());
  for (const auto& [u, name] : user_agent_names(ctx_root)) all.emplace_back(name, agentdir::Tier(u));
  for (const auto& [name, tier] : all) {
    std::string d = ctx_root + "/" + agentdir::agents_rel(tier) + "/" + name + ".d";
    std::string parent = first_line(sys::read_or_empty(d, "parent"));
    if (parent.rfind("agent:", 0) == 0)
      parent = parent.substr(6, parent.find(' ') == std::string::npos ? std::string::npos : parent.find(' ') - 6);
    else
      parent.clear();
    for (PsRow& r : running_instances(d)) {
      r.name = agentdir::tier_display(name, tier);
      r.parent = parent;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::string format_ps(const std::vector<PsRow>& rows) {
  std::map<std::string, std::vector<const PsRow*>> children;
  std::map<std::string, const PsRow*> by_name;
  for (const auto& r : rows) by_name[r.name] = &r;
  std::vector<const PsRow*> top;
  for (const auto& r : rows) {
    if (!r.parent.empty() && by_name.count(r.parent) != 0 && r.parent != r.name) {
      children[r.parent].push_back(&r);
    } else {
      top.push_back(&r);
    }
  }
  char head[160];
  std::snprintf(head, sizeof head, "%-24s %-12s %-9s %8s %8s  %s\n", "AGENT", "SESSION", "STATUS", "PID", "UPTIME",
                "CGROUP");
  std::string out = head;
  // A parent with several instances shows its children once, under the
  // first; a parent cycle is drawn once, not forever.
  std::set<const PsRow*> shown;
  std::function<void(const PsRow*, int)> emit = [&](const PsRow* r, int depth) {
    if (!shown.insert(r).second) return;
    std::string name = std::string(static_cast<std::size_t>(depth) * 2, ' ') + (depth > 0 ? "`-" : "") + r->name;
    char line[512];
    std::snprintf(line, sizeof line, "%-24s %-12s %-9s %8d %8s  %s\n", name.c_str(), r->session.c_str(),
                  r->status.c_str(), r->pid, format_uptime(r->uptime_s).c_str(), r->cgroup.c_str());
    out += line;
    for (const PsRow* c : children[r->name]) emit(c, depth + 1);
  };
  for (const PsRow* r : top) emit(r, 0);
  return out;
}

std::optional<std::string> root_status(const std::string& ctx_root, std::string& error) {
  auto d = sys::open(sys::at_cwd, ctx_root, sys::Open::directory);
  if (!d) {
    error = d.error().with_context(ctx_root).msg;
    return std::nullopt;
  }
  auto f = sys::read_small_file(d->get(), "status", kMaxControlFileSize);
  if (!f) {
    error = ctx_root + "/status: " + f.error().msg;
    return std::nullopt;
  }
  if (!*f) {
    error = ctx_root +
            "/status: ENOENT: missing: the CTX root's status (docs/abi.md, \"The root's status file\") is written by whatever mounts "
            "the root; a tree made by hand has none (write one line, e.g. \"ok\", or check the --ctx-root)";
    return std::nullopt;
  }
  return (*f)->data;
}

}  // namespace ctx::helper
