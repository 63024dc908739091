#include "launcher/control/server.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "agentdir/child.hpp"
#include "agentdir/load.hpp"
#include "base/names.hpp"
#include "launcher/control/child_request.hpp"
#include "launcher/control/request.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "sys/fault.hpp"
#include "sys/process.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxRequest = 64 * 1024;
constexpr std::uint64_t kIdleTimeoutUs = static_cast<std::uint64_t>(kIdleTimeoutMs) * 1000;

// The answer past the rate limit; the request is neither decoded nor
// recorded.
json rate_limited_answer() {
  return json{
      {"ok", false},
      {"code", errno_name(EAGAIN)},
      {"reason", "rate_limited"},
      {"message", "EAGAIN: more than " + std::to_string(kRequestBurst) + " requests at once, or " +
                      std::to_string(kRequestsPerMinute) + " a minute, to this agent's supervisor; try again later"}};
}

}  // namespace

ControlServer::ControlServer(ControlServerConfig cfg, UniqueFd control_listen)
    : cfg_(std::move(cfg)), listen_(std::move(control_listen)) {}

void ControlServer::add_poll_fds(std::vector<struct pollfd>& fds) const {
  if (listen_.valid()) fds.push_back({listen_.get(), POLLIN, 0});
  if (cfg_.models != nullptr) cfg_.models->add_poll_fds(fds);
  for (const auto& [id, c] : conns_) fds.push_back({c.fd.get(), POLLIN, 0});
  children_.add_poll_fds(fds);
}

void ControlServer::handle(const std::vector<struct pollfd>& fds) {
  auto ready = [&](int fd) {
    for (const auto& p : fds)
      if (p.fd == fd) return (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    return false;
  };
  for (const auto& name : children_.running_names()) {
    OwnedChild& c = *children_.find(name);
    if (c.status.valid() && ready(c.status.get())) read_status(c, name);
    if (ready(c.pidfd.get())) {
      if (c.status.valid()) read_status(c, name);
      exited(name, reap_child(c));
    }
  }
  answer_models(fds);
  std::vector<int> ids;
  for (const auto& [id, c] : conns_)
    if (ready(c.fd.get())) ids.push_back(id);
  for (int id : ids) read_conn(id);
  if (listen_.valid() && ready(listen_.get())) accept_all();
  close_idle();
  report_dropped(false);
}

void ControlServer::answer_models(const std::vector<struct pollfd>& fds) {
  if (cfg_.models == nullptr) return;
  for (const ModelExit& e : cfg_.models->exited(fds)) {
    answer(e.conn, {{"ok", true}, {"op", "model"}, {"exit_status", e.exit_status}});
    cfg_.models->finished(e);  // after the answer: the caller waits for that
  }
}

int ControlServer::poll_timeout_ms() const {
  const std::uint64_t now = sys::now_us();
  std::optional<std::uint64_t> at = limiter_.report_at();
  for (const auto& [id, c] : conns_)
    if (!waits(id)) at = std::min(at.value_or(~std::uint64_t{0}), c.active_us + kIdleTimeoutUs);
  if (!at) return -1;
  return *at <= now ? 0 : static_cast<int>((*at - now + 999) / 1000);
}

bool ControlServer::admit() { return limiter_.take(sys::now_us()); }

void ControlServer::report_dropped(bool final) {
  auto n = limiter_.due_report(sys::now_us(), final);
  if (n)
    cfg_.records->log(
        {"agent.limit",
         "",
         EventStatus::dropped,
         {{"dropped", *n}, {"reason", "rate_limited"}, {"burst", kRequestBurst}, {"per_minute", kRequestsPerMinute}}});
}

bool ControlServer::waits(int id) const {
  return (cfg_.models != nullptr && cfg_.models->waits(id)) || children_.waits(id);
}

// An idle connection holds one of kMaxConns for nothing: without a
// timeout, 32 of them lock the agent out of its own calls.
void ControlServer::close_idle() {
  const std::uint64_t now = sys::now_us();
  std::erase_if(conns_,
                [&](const auto& kv) { return !waits(kv.first) && now >= kv.second.active_us + kIdleTimeoutUs; });
}

void ControlServer::accept_all() {
  while (true) {
    auto c = sys::accept_nonblock(listen_.get());
    if (!c || !*c) return;
    if (conns_.size() >= kMaxConns) continue;             // dropped: the peer sees EOF
    if (!cfg_.host->peer_allowed((*c)->get())) continue;  // not of our sandbox
    conns_[next_conn_++] = Conn{std::move(**c), {}, {}, sys::now_us()};
  }
}

void ControlServer::read_conn(int id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  // recvmsg, not read: a request may carry descriptors (ctx model's stdio).
  auto msg = sys::recv_message(it->second.fd.get(), 8192, 3);
  if (!msg && msg.error().code == EAGAIN) return;
  // A caller gone while its model runs ends the model: with its lifeline
  // closed the model's init kills the model's sandbox, whose exit is then
  // recorded as any other (an HTTP client that went away mid-answer).
  auto gone = [&] {
    if (cfg_.models != nullptr) cfg_.models->caller_gone(id);
    conns_.erase(it);
  };
  if (!msg) return gone();
  std::optional<std::optional<std::string>> data;
  if (!*msg) {
    data = std::optional<std::string>(std::string());
  } else {
    for (auto& fd : (*msg)->fds) it->second.fds.push_back(std::move(fd));
    if (it->second.fds.size() > 3) it->second.fds.resize(3);
    data = std::optional<std::string>(std::move((*msg)->bytes));
  }
  if (!*data) return;
  if ((*data)->empty()) {  // EOF: a waiter that gave up
    gone();
    children_.forget_waiter(id);
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
    if (admit())
      deny(id, "", bad_request("request longer than 64 KiB"));
    else
      answer(id, rate_limited_answer());
    conns_.erase(id);
  }
}

void ControlServer::answer(int id, const json& j, const std::vector<int>& fds) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::string s;
  if (!j.value("ok", false) && j.is_object()) {
    // The agent a refusal is about is the one this supervisor serves: the
    // helper prints it, never its environment's CTX_AGENT.
    json named = j;
    named["agent"] = cfg_.parent->name;
    s = named.dump() + "\n";
  } else {
    s = j.dump() + "\n";
  }
  it->second.active_us = sys::now_us();
  if (fds.empty())
    (void)sys::write_all(it->second.fd.get(), s.data(), s.size());
  else
    (void)sys::send_message(it->second.fd.get(), s, fds);
}

void ControlServer::deny(int id, const std::string& op, const Error& e) {
  json j{{"ok", false}, {"code", errno_name(e.code)}, {"message", e.msg}};
  if (!op.empty()) j["op"] = op;
  if (!e.reason.empty()) j["reason"] = e.reason;
  answer(id, j);
}

void ControlServer::request(int id, const std::string& line) {
  if (auto it = conns_.find(id); it != conns_.end()) it->second.active_us = sys::now_us();
  if (!admit()) {
    if (auto it = conns_.find(id); it != conns_.end()) it->second.fds.clear();  // a model's stdio, unused
    return answer(id, rate_limited_answer());
  }
  ControlDecode d = decode_control_request(
      line, [this](const std::string& name, std::string_view perm) { return authorize(name, perm); });
  if (!d.request) return refused(id, d);
  const std::string op(op_of(*d.request));
  struct Dispatch {
    ControlServer& s;
    int id;
    const std::string& op;
    void operator()(const CreateRequest& r) const {
      auto a = s.create(r.child, r.replace);
      if (!a) return s.deny(id, op, a.error());
      s.answer(id, *a);
    }
    void operator()(const StartRequest& r) const {
      // Answered once the child's runtime runs (or fails).
      if (auto a = s.start(id, r); !a) s.deny(id, op, a.error());
    }
    void operator()(const StopRequest& r) const { s.stop_or_wait(id, op, r.name); }
    void operator()(const WaitRequest& r) const { s.stop_or_wait(id, op, r.name); }
    void operator()(const DeleteRequest& r) const {
      if (auto a = s.remove(r.name); !a) return s.deny(id, op, a.error());
      s.answer(id, {{"ok", true}, {"op", op}, {"name", r.name}});
    }
    void operator()(const ToolRequest& r) const { s.tool(id, r); }
    void operator()(const ModelRequest& r) const { s.model(id, r); }
  };
  std::visit(Dispatch{*this, id, op}, *d.request);
}

namespace {

Error no_tier(const std::string& what) {
  return Error{ENOTSUP, "this agent's mounts show no " + what + " tier", "no_" + what + "s"};
}

}  // namespace

// A tool or model request the decoder refused is its gate's to record and
// answer, as one the gate refuses.
void ControlServer::refused(int id, const ControlDecode& d) {
  if (d.op == "tool") {
    if (cfg_.tools == nullptr) return deny(id, d.op, no_tier("tool"));
    ToolAnswer a = cfg_.tools->refuse_request(d.request.error());
    return answer(id, a.answer);
  }
  if (d.op == "model") {
    if (auto it = conns_.find(id); it != conns_.end()) it->second.fds.clear();  // the caller's stdio, unused
    if (cfg_.models == nullptr) return deny(id, d.op, no_tier("model"));
    return answer(id, cfg_.models->refuse_request(d.request.error()));
  }
  deny(id, d.op, d.request.error());
}

void ControlServer::tool(int id, const ToolRequest& r) {
  if (cfg_.tools == nullptr) return deny(id, "tool", no_tier("tool"));
  ToolAnswer a = cfg_.tools->call(r);
  std::vector<int> fds;
  if (a.tool.valid()) fds.push_back(a.tool.get());
  answer(id, a.answer, fds);
}

void ControlServer::model(int id, const ModelRequest& r) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::vector<UniqueFd> stdio = std::move(it->second.fds);
  it->second.fds.clear();
  if (cfg_.models == nullptr) return deny(id, "model", no_tier("model"));
  // Without an answer now, the model runs: its exit answers (answer_models).
  if (auto a = cfg_.models->call(id, r, std::move(stdio))) answer(id, *a);
}

void ControlServer::stop_or_wait(int id, const std::string& op, const std::string& name) {
  OwnedChild* c = children_.find(name);
  if (c == nullptr)
    return deny(id, op, Error{ESRCH, name + ": ESRCH: this supervisor has not started it", "not_started"});
  if (c->exit_status) return answer(id, {{"ok", true}, {"op", op}, {"name", name}, {"exit_status", *c->exit_status}});
  if (op == "stop") {
    // Not a plea: the child's supervisor runs SIGTERM, grace, cgroup.kill.
    (void)sys::signal_pidfd(c->pidfd.get(), stop_signal());
    (void)sys::fault_at("child.stop");
    cfg_.records->event(
        {"agent.child.stop", "agent/" + name, EventStatus::ok, {{"parent", cfg_.parent->name}, {"child", name}}});
  }
  c->exit_waiters.emplace_back(id, op);
}

Result<void> ControlServer::authorize(const std::string& name, std::string_view perm) const {
  const std::string subject = cfg_.parent->subject();
  if (subject.empty() || !cfg_.parent->policy.allows(subject, policy::Class::agent, name, perm))
    return fail(Error{EACCES,
                      name + ": EACCES: the policy of " + cfg_.parent->name + " lacks " +
                          policy::missing_rule(subject, policy::Class::agent, name, perm),
                      "agent_policy"});
  return {};
}

// A host path as the parent's sandbox shows it, where it does.
std::string ControlServer::shown(const std::string& host) const { return cfg_.host->inner_path(host).value_or(host); }

Error ControlServer::shown(Error e) const {
  // "<host>/agent/rev already exists": said with the parent's paths.
  const std::string root = cfg_.parent->ctx_root;
  if (const std::string inner = shown(root); inner != root)
    for (std::size_t at = e.msg.find(root + "/"); at != std::string::npos; at = e.msg.find(root + "/", at))
      e.msg.replace(at, root.size(), inner), at += inner.size();
  return e;
}

Result<json> ControlServer::create(const agentdir::ChildRequest& r, bool replace) {
  CTX_TRY_ASSIGN(agentdir::ChildPlan plan,
                 agentdir::plan_child(*cfg_.parent, r, {cfg_.session, cfg_.run}, agentdir::passwd_primary_gid()));
  if (replace)
    if (auto have = sys::stat_at(AT_FDCWD, cfg_.parent->ctx_root + "/agent/" + r.name + ".d"); have && *have)
      CTX_TRY(remove(r.name));
  if (auto w = agentdir::write_child(*cfg_.parent, plan, cfg_.session, r.handoff, r.output, cfg_.spawn.owner); !w)
    return fail(shown(w.error()));
  (void)sys::fault_at("child.create.answer");
  cfg_.records->event(
      {"agent.child.create", "agent/" + r.name, EventStatus::ok, {{"parent", cfg_.parent->name}, {"child", r.name}}});
  return json{{"ok", true},
              {"op", "create"},
              {"name", r.name},
              {"context", shown(agentdir::child_context_dir(*cfg_.parent, cfg_.session, r.name))}};
}

Result<void> ControlServer::remove(const std::string& name) {
  if (children_.running(name))
    return fail(Error{EBUSY, name + ": EBUSY: it runs; stop it first (ctx agent stop " + name + ")", "running"});
  // Only an owned child of this agent is ours to delete (as to start).
  auto spec = agentdir::load(cfg_.parent->ctx_root, name, {::geteuid() == 0, {}});
  if (!spec) return fail(shown(spec.error()));
  CTX_TRY(agentdir::check_child(*cfg_.parent, *spec));
  if (auto r = agentdir::remove_child(*cfg_.parent, name, cfg_.session); !r) return fail(shown(r.error()));
  children_.forget_ended(name);
  cfg_.records->event(
      {"agent.child.delete", "agent/" + name, EventStatus::ok, {{"parent", cfg_.parent->name}, {"child", name}}});
  return {};
}

Result<std::string> ControlServer::start(int id, const StartRequest& req) {
  const std::string& name = req.name;
  if (children_.running(name)) return fail(Error{EBUSY, name + ": EBUSY: already running", "running"});
  // Only an owned child of this agent, still within it (its files may
  // have changed since create, or it may be another owner's agent that
  // names us), is ours to start.
  auto spec = agentdir::load(cfg_.parent->ctx_root, name, {::geteuid() == 0, {}});
  if (!spec) return fail(spec.error());
  CTX_TRY(agentdir::check_child(*cfg_.parent, *spec));
  CTX_TRY(sys::fault_at("child.start"));
  CTX_TRY_ASSIGN(OwnedChild c, spawn_child_supervisor(cfg_.spawn, *spec, req.command));
  cfg_.host->child_spawned(c.pidfd.get());
  (void)sys::fault_at("child.spawned");
  c.start_waiters.push_back(id);
  children_.add(name, std::move(c));
  cfg_.records->event(
      {"agent.child.start", "agent/" + name, EventStatus::ok, {{"parent", cfg_.parent->name}, {"child", name}}});
  return name;
}

void ControlServer::read_status(OwnedChild& c, const std::string& name) {
  while (c.status.valid()) {
    auto data = sys::read_available(c.status.get(), 4096);
    if (!data || !*data) return;
    if ((*data)->empty()) {
      c.status.reset();
      return;
    }
    for (int w : children_.feed_status(c, **data))
      answer(w, {{"ok", true}, {"op", "start"}, {"name", name}, {"pid", *c.runtime_pid}});
  }
}

void ControlServer::exited(const std::string& name, int status) {
  ChildWaiters w = children_.mark_exited(name, status);
  for (int id : w.start)
    deny(id, "start",
         Error{EIO,
               name + ": EIO: its launch failed with exit status " + std::to_string(status) + " (its log: " + name +
                   ".d/log; its output: home/" + std::to_string(cfg_.parent->owner) + "/agent/" + name +
                   "/session/default/output.log)",
               "launch_failed"});
  for (const auto& [id, op] : w.exit) answer(id, {{"ok", true}, {"op", op}, {"name", name}, {"exit_status", status}});
  cfg_.records->event({"agent.child.exit",
                       "agent/" + name,
                       status == 0 ? EventStatus::ok : EventStatus::failed,
                       {{"parent", cfg_.parent->name}, {"child", name}, {"exit_status", status}}});
}

void ControlServer::close_control() {
  listen_.reset();
  for (const auto& [name, w] : children_.take_all_waiters()) {
    for (int id : w.start) deny(id, "start", Error{ECANCELED, name + ": ECANCELED: the parent is stopping"});
    for (const auto& [id, op] : w.exit) deny(id, op, Error{ECANCELED, name + ": ECANCELED: the parent is stopping"});
  }
  conns_.clear();
}

void ControlServer::cancel_all() { signal_children(children_, parent_dead_signal()); }

std::size_t ControlServer::running() const { return children_.running(); }

void ControlServer::wait_all(int timeout_ms, bool kill_left) {
  wait_children(children_, timeout_ms, kill_left,
                [this](const std::string& name, int status) { exited(name, status); });
}

}  // namespace ctx::launcher
