#include "launcher/children.hpp"

#include <fcntl.h>

#include <csignal>

#include "agentdir/child.hpp"
#include "agentdir/load.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "launcher/child_request.hpp"
#include "launcher/sandbox.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxRequest = 64 * 1024;
constexpr std::size_t kMaxConns = 32;

// <ctx>/home/<owner>/agent/<name>/session/default/output.log, for appending.
Result<UniqueFd> open_output(const agentdir::AgentSpec& child, std::optional<sys::Ownership> owner) {
  CTX_TRY_ASSIGN(UniqueFd home, sys::open_dir(child.ctx_root + "/home", true));
  CTX_TRY_ASSIGN(UniqueFd dir,
                 sys::open_or_make_dirs(home.get(), session_rel(child.owner, child.name, "default"), 0755, owner));
  return sys::open_append(dir.get(), "output.log", 0644);
}

}  // namespace

int parent_dead_signal() { return SIGRTMIN + 2; }
int stop_signal() { return SIGRTMIN + 3; }

Children::Children(ChildrenConfig cfg, UniqueFd control_listen)
    : cfg_(std::move(cfg)), listen_(std::move(control_listen)) {}

void Children::add_poll_fds(std::vector<struct pollfd>& fds) const {
  if (listen_.valid()) fds.push_back({listen_.get(), POLLIN, 0});
  for (const auto& [id, c] : conns_) fds.push_back({c.fd.get(), POLLIN, 0});
  for (const auto& [name, c] : children_) {
    if (c.exit_status) continue;
    fds.push_back({c.pidfd.get(), POLLIN, 0});
    if (c.status.valid()) fds.push_back({c.status.get(), POLLIN, 0});
  }
}

void Children::handle(const std::vector<struct pollfd>& fds) {
  auto ready = [&](int fd) {
    for (const auto& p : fds)
      if (p.fd == fd) return (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    return false;
  };
  for (auto& [name, c] : children_) {
    if (c.exit_status) continue;
    if (c.status.valid() && ready(c.status.get())) read_status(c, name);
    if (ready(c.pidfd.get())) {
      if (c.status.valid()) read_status(c, name);
      auto st = sys::wait_pid(c.pid);
      exited(name, c, st ? exit_code_of(*st) : kExitLaunchFailed);
    }
  }
  std::vector<int> ids;
  for (const auto& [id, c] : conns_)
    if (ready(c.fd.get())) ids.push_back(id);
  for (int id : ids) read_conn(id);
  if (listen_.valid() && ready(listen_.get())) accept_all();
}

void Children::accept_all() {
  while (true) {
    auto c = sys::accept_nonblock(listen_.get());
    if (!c || !*c) return;
    if (conns_.size() >= kMaxConns) continue;                            // dropped: the peer sees EOF
    if (cfg_.peer_allowed && !cfg_.peer_allowed((*c)->get())) continue;  // not of our sandbox
    conns_[next_conn_++] = Conn{std::move(**c), {}};
  }
}

void Children::read_conn(int id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  auto data = sys::read_available(it->second.fd.get(), 8192);
  if (!data) {
    conns_.erase(it);
    return;
  }
  if (!*data) return;
  if ((*data)->empty()) {  // EOF: a waiter that gave up
    conns_.erase(it);
    for (auto& [n, ch] : children_) {
      std::erase(ch.start_waiters, id);
      std::erase_if(ch.exit_waiters, [id](const auto& w) { return w.first == id; });
    }
    return;
  }
  std::size_t scanned = it->second.buf.size();
  it->second.buf += **data;
  // Every complete line is a request; only the new bytes are searched.
  for (auto nl = it->second.buf.find('\n', scanned); nl != std::string::npos; nl = it->second.buf.find('\n')) {
    std::string line = it->second.buf.substr(0, nl);
    it->second.buf.erase(0, nl + 1);
    request(id, line);
    it = conns_.find(id);
    if (it == conns_.end()) return;
  }
  if (it->second.buf.size() > kMaxRequest) {
    deny(id, "", bad_request("request longer than 64 KiB"));
    conns_.erase(id);
  }
}

void Children::answer(int id, const json& j) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::string s = j.dump() + "\n";
  (void)sys::write_all(it->second.fd.get(), s.data(), s.size());
}

void Children::deny(int id, const std::string& op, const Error& e) {
  json j{{"ok", false}, {"code", errno_name(e.code)}, {"message", e.msg}};
  if (!op.empty()) j["op"] = op;
  if (!e.reason.empty()) j["reason"] = e.reason;
  answer(id, j);
}

void Children::request(int id, const std::string& line) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("op") || !j["op"].is_string())
    return deny(id, "", bad_request("a request is one JSON object with \"op\" (create, start, stop, wait)"));
  std::string op = j["op"].get<std::string>();
  if (op == "create") {
    if (!j.contains("request")) return deny(id, op, bad_request("create needs \"request\""));
    auto r = create(j["request"]);
    if (!r) return deny(id, op, r.error());
    return answer(id, *r);
  }
  if (op == "start") {
    auto r = start(id, j);
    if (!r) return deny(id, op, r.error());
    return;  // answered once the child's runtime runs (or fails)
  }
  if (op == "stop" || op == "wait") {
    auto name = own_child(j, op == "stop" ? "stop" : nullptr);
    if (!name) return deny(id, op, name.error());
    auto it = children_.find(*name);
    if (it == children_.end())
      return deny(id, op, Error{ESRCH, *name + ": ESRCH: this supervisor has not started it", "not_started"});
    Child& c = it->second;
    if (c.exit_status) return answer(id, {{"ok", true}, {"op", op}, {"name", *name}, {"exit_status", *c.exit_status}});
    if (op == "stop") {
      // Not a plea: the child's supervisor runs SIGTERM, grace, cgroup.kill.
      (void)sys::signal_pidfd(c.pidfd.get(), stop_signal());
      cfg_.event({{"type", "agent.child.stop"}, {"parent", cfg_.parent->name}, {"child", *name}, {"status", "ok"}});
    }
    c.exit_waiters.emplace_back(id, op);
    return;
  }
  deny(id, op, bad_request("unknown op '" + op + "' (create, start, stop, wait)"));
}

Result<std::string> Children::own_child(const json& req, const char* perm) {
  if (!req.contains("name") || !req["name"].is_string()) return fail(bad_request("\"name\" is required"));
  std::string name = req["name"].get<std::string>();
  if (auto issue = agent_name_issue(name)) return fail(Error{EACCES, name + ": EACCES: " + *issue, "invalid_name"});
  const std::string subject = cfg_.parent->subject();
  if (perm != nullptr && (subject.empty() || !cfg_.parent->policy.allows(subject, policy::Class::agent, name, perm)))
    return fail(Error{EACCES,
                      name + ": EACCES: the policy of " + cfg_.parent->name + " lacks " +
                          policy::missing_rule(subject, policy::Class::agent, name, perm),
                      "agent_policy"});
  return name;
}

Result<json> Children::create(const json& req) {
  CTX_TRY_ASSIGN(agentdir::ChildRequest r, decode_child_request(req));
  CTX_TRY_ASSIGN(agentdir::ChildPlan plan,
                 agentdir::plan_child(*cfg_.parent, r, {cfg_.session, cfg_.run}, agentdir::passwd_primary_gid()));
  CTX_TRY(agentdir::write_child(*cfg_.parent, plan, cfg_.session, r.handoff, cfg_.owner));
  cfg_.event({{"type", "agent.child.create"}, {"parent", cfg_.parent->name}, {"child", r.name}, {"status", "ok"}});
  return json{{"ok", true},
              {"op", "create"},
              {"name", r.name},
              {"context", agentdir::child_context_dir(*cfg_.parent, cfg_.session, r.name)}};
}

Result<std::string> Children::start(int id, const json& req) {
  CTX_TRY_ASSIGN(std::string name, own_child(req, "start"));
  std::vector<std::string> command;
  if (req.contains("command")) {
    CTX_TRY_ASSIGN(command, string_list(req["command"], "command"));
  }
  for (const auto& [k, v] : req.items())
    if (k != "op" && k != "name" && k != "command") return fail(bad_request("unknown key '" + k + "' in start"));
  auto it = children_.find(name);
  if (it != children_.end() && !it->second.exit_status)
    return fail(Error{EBUSY, name + ": EBUSY: already running", "running"});
  // Only an owned child of this agent, still within it (its files may
  // have changed since create, or it may be another owner's agent that
  // names us), is ours to start.
  auto spec = agentdir::load(cfg_.parent->ctx_root, name, {::geteuid() == 0});
  if (!spec) return fail(spec.error());
  CTX_TRY(agentdir::check_child(*cfg_.parent, *spec));

  std::vector<std::string> argv{cfg_.self_exe,
                                "--ctx-root",
                                cfg_.parent->ctx_root,
                                "--owned-by",
                                std::to_string(::getpid()),
                                "--cancel-grace-ms",
                                std::to_string(cfg_.cancel_grace_ms),
                                "--json-status-fd",
                                "3"};
  if (!cfg_.agent_cgroup.empty()) {
    // <agent>/child/<name>: beside runtime/, so the no-internal-process
    // rule holds at every level.
    CTX_TRY_ASSIGN(UniqueFd base, sys::open_dir(cfg_.agent_cgroup));
    if (auto st = sys::stat_at(base.get(), "child"); !st || !*st) CTX_TRY(sys::make_dir_at(base.get(), "child", 0755));
    argv.insert(argv.end(), {"--cgroup-base", cfg_.agent_cgroup + "/child", "--cgroup-leaf", name});
  }
  if (cfg_.require_cgroup) argv.push_back("--require-cgroup");
  argv.push_back(name);
  if (!command.empty()) {
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
  }
  if (cfg_.before_first_child) CTX_TRY(cfg_.before_first_child());
  // The child's output is its own, not its parent's: stdin /dev/null,
  // stdout and stderr appended to its session's output.log (made beneath
  // the CTX root, never through a symlink).
  CTX_TRY_ASSIGN(UniqueFd devnull, sys::open_path("/dev/null", O_RDONLY));
  CTX_TRY_ASSIGN(UniqueFd out, open_output(*spec, cfg_.owner));
  CTX_TRY_ASSIGN(auto pipe, sys::make_pipe());
  CTX_TRY_ASSIGN(sys::Child proc, sys::spawn_owned(cfg_.self_exe, argv, cfg_.env, parent_dead_signal(),
                                                   {pipe.second.get()}, {devnull.get(), out.get(), out.get()}));
  pipe.second.reset();
  CTX_TRY(sys::set_nonblocking(pipe.first.get()));
  Child c;
  c.pid = proc.pid;
  c.pidfd = std::move(proc.pidfd);
  c.status = std::move(pipe.first);
  c.start_waiters.push_back(id);
  children_.insert_or_assign(name, std::move(c));
  cfg_.event({{"type", "agent.child.start"}, {"parent", cfg_.parent->name}, {"child", name}, {"status", "ok"}});
  return name;
}

void Children::read_status(Child& c, const std::string& name) {
  while (c.status.valid()) {
    auto data = sys::read_available(c.status.get(), 4096);
    if (!data || !*data) return;
    if ((*data)->empty()) {
      c.status.reset();
      return;
    }
    c.status_buf += **data;
    for (auto nl = c.status_buf.find('\n'); nl != std::string::npos; nl = c.status_buf.find('\n')) {
      json j = json::parse(c.status_buf.substr(0, nl), nullptr, false);
      c.status_buf.erase(0, nl + 1);
      if (j.is_object() && j.value("event", "") == "started") {
        c.runtime_pid = j.value("pid", 0);
        for (int w : c.start_waiters)
          answer(w, {{"ok", true}, {"op", "start"}, {"name", name}, {"pid", *c.runtime_pid}});
        c.start_waiters.clear();
      }
    }
  }
}

void Children::exited(const std::string& name, Child& c, int status) {
  c.exit_status = status;
  c.status.reset();
  for (int w : c.start_waiters)
    deny(w, "start",
         Error{EIO,
               name + ": EIO: its launch failed with exit status " + std::to_string(status) + " (its log: " + name +
                   ".d/log; its output: home/" + std::to_string(cfg_.parent->owner) + "/agent/" + name +
                   "/session/default/output.log)",
               "launch_failed"});
  for (const auto& [w, op] : c.exit_waiters)
    answer(w, {{"ok", true}, {"op", op}, {"name", name}, {"exit_status", status}});
  c.start_waiters.clear();
  c.exit_waiters.clear();
  cfg_.event({{"type", "agent.child.exit"}, {"parent", cfg_.parent->name}, {"child", name}, {"exit_status", status}});
}

void Children::close_control() {
  listen_.reset();
  for (auto& [name, c] : children_) {
    for (int w : c.start_waiters) deny(w, "start", Error{ECANCELED, name + ": ECANCELED: the parent is stopping"});
    for (const auto& [w, op] : c.exit_waiters)
      deny(w, op, Error{ECANCELED, name + ": ECANCELED: the parent is stopping"});
    c.start_waiters.clear();
    c.exit_waiters.clear();
  }
  conns_.clear();
}

void Children::cancel_all() {
  for (auto& [name, c] : children_)
    if (!c.exit_status) (void)sys::signal_pidfd(c.pidfd.get(), parent_dead_signal());
}

std::size_t Children::running() const {
  std::size_t n = 0;
  for (const auto& [name, c] : children_) n += c.exit_status ? 0 : 1;
  return n;
}

void Children::wait_all(int timeout_ms, bool kill_left) {
  std::uint64_t deadline = sys::now_us() + static_cast<std::uint64_t>(timeout_ms) * 1000;
  while (running() > 0) {
    std::uint64_t now = sys::now_us();
    if (now >= deadline) break;
    std::vector<struct pollfd> fds;
    std::vector<std::string> names;
    for (auto& [name, c] : children_)
      if (!c.exit_status) {
        fds.push_back({c.pidfd.get(), POLLIN, 0});
        names.push_back(name);
      }
    if (!sys::poll_fds(fds, static_cast<int>((deadline - now + 999) / 1000))) break;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0) {
        Child& c = children_[names[i]];
        auto st = sys::wait_pid(c.pid);
        exited(names[i], c, st ? exit_code_of(*st) : kExitLaunchFailed);
      }
  }
  if (!kill_left) return;
  for (auto& [name, c] : children_)
    if (!c.exit_status) {
      (void)sys::signal_pidfd(c.pidfd.get(), SIGKILL);
      auto st = sys::wait_pid(c.pid);
      exited(name, c, st ? exit_code_of(*st) : kExitLaunchFailed);
    }
}

}  // namespace ctx::launcher
