#include "launcher/supervisor/watchdog.hpp"

#include <poll.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "cgroup/placement.hpp"
#include "launcher/control/child_spawn.hpp"
#include "launcher/records/agent_files.hpp"
#include "launcher/supervisor/pty_relay.hpp"
#include "sys/file.hpp"
#include "sys/process.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

using nlohmann::json;

constexpr const char* kLogName = "ctx-watchdog";

// Until every pidfd is readable (its process ended), at most timeout_ms.
void wait_pidfds(std::vector<UniqueFd>& pidfds, int timeout_ms) {
  const std::uint64_t deadline = sys::now_us() + static_cast<std::uint64_t>(timeout_ms) * 1000;
  while (!pidfds.empty()) {
    std::uint64_t now = sys::now_us();
    if (now >= deadline) return;
    std::vector<struct pollfd> fds;
    for (const auto& fd : pidfds) fds.push_back({fd.get(), POLLIN, 0});
    if (!sys::poll_fds(fds, static_cast<int>((deadline - now + 999) / 1000))) return;
    for (std::size_t i = fds.size(); i-- > 0;)
      if (fds[i].revents != 0) pidfds.erase(pidfds.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// What the cleanup needs of the plan (AgentFiles), and the job's own.
json job_json(const WatchdogJob& job) {
  const LaunchPlan& p = job.plan;
  return json{{"name", p.name},
              {"session", p.session},
              {"session_space", p.session_space},
              {"ctx_root", p.ctx_root},
              {"owner", p.owner},
              {"cwd", p.cwd},
              {"privileged", p.ids.privileged},
              {"fs", {p.ids.fs.uid, p.ids.fs.gid, p.ids.fs.groups}},
              {"agents", job.agents},
              {"ddir", job.ddir},
              {"idir", job.idir},
              {"primary", job.primary},
              {"socket", job.socket},
              {"grace_ms", job.grace_ms},
              {"handoff_dir", job.handoff_dir}};
}

// The supervisor is gone: what its teardown would have done. The messages
// are replayed in the order the supervisor sent them.
int clean_up(const WatchdogJob& job, std::vector<sys::RecordedMessage> messages) {
  std::vector<UniqueFd> children;
  std::optional<cgroup::Placement> placement;
  TerminalKeeper terminal;
  for (auto& m : messages) {
    if (terminal.take(m.bytes, m.fds)) continue;
    if (m.bytes == "p" && m.fds.size() == 1) children.push_back(std::move(m.fds[0]));
    if (!m.bytes.empty() && m.bytes[0] == 'g')
      if (auto p = cgroup::Placement::adopt(std::string_view(m.bytes).substr(1), std::move(m.fds)))
        placement.emplace(std::move(*p));
  }
  terminal.restore();
  AgentFiles files(job.plan, job.ddir, job.idir, job.primary);
  // The session began if the supervisor got as far as its `state`
  // (written before any record it cannot start without); one that was
  // not begun is left as it was.
  if (files.session_running()) files.session_begun();
  files.status(AgentState::stopping);
  wait_pidfds(children, job.grace_ms + kChildRecordsMs);
  if (placement) {
    (void)placement->wait_children_gone(job.grace_ms + kChildRecordsMs);
    (void)placement->remove();
  }
  (void)sys::remove_at(job.agents, job.socket);
  files.status(AgentState::dead);
  const Event stop{"agent.stop", "", EventStatus::error, {{"reason", "supervisor_killed"}}};
  files.log(stop);
  files.event(stop);
  files.end_session("failed");
  if (!job.handoff_dir.empty()) files.context_status(job.handoff_dir, "failed");
  return 0;
}

}  // namespace

Watchdog::Watchdog(UniqueFd sock, sys::Recorder rec) : sock_(std::move(sock)), rec_(rec) {}

Watchdog::Watchdog(Watchdog&& o) noexcept : sock_(std::move(o.sock_)), rec_(o.rec_) { o.rec_ = sys::Recorder{}; }

Watchdog::~Watchdog() { finish(); }

void Watchdog::finish() {
  if (rec_.pid <= 0) return;
  char c = 'c';
  (void)sys::write_all(sock_.get(), &c, 1);
  sock_.reset();
  (void)sys::wait_pid(rec_.pid);
  rec_.release();
  rec_ = sys::Recorder{};
}

Result<Watchdog> Watchdog::start(const WatchdogJob& job) {
  CTX_TRY_ASSIGN(auto pair, sys::make_seqpacket_pair());
  CTX_TRY_ASSIGN(UniqueFd log, sys::make_recorder_log(kLogName));
  CTX_TRY(sys::append_recorded(log.get(), job_json(job).dump(), {}));
  sys::RecorderSetup s;
  s.sock = pair.first.get();
  s.log = log.get();
  s.keep = {2, job.agents, job.ddir, job.idir};
  s.argv = {"ctx-agent-run", "--watchdog", std::to_string(log.get())};
  CTX_TRY_ASSIGN(sys::Recorder rec, sys::start_recorder(s));
  // The recorder has its own copies of its end and of the memfd (its
  // descriptor table is its own): the supervisor keeps neither.
  pair.first.reset();
  return Watchdog(std::move(pair.second), rec);
}

int run_watchdog(const char* arg) {
  std::string a = arg == nullptr ? "" : arg;
  // Only the memfd a watchdog recorded.
  const bool digits = !a.empty() && a.size() <= 9 && a.find_first_not_of("0123456789") == std::string::npos;
  auto what = digits ? sys::read_link_at(sys::at_cwd, "/proc/self/fd/" + a) : Result<std::string>(std::string());
  if (!what || what->rfind(std::string("/memfd:") + kLogName + " ", 0) != 0) {
    std::fprintf(stderr, "ctx-agent-run: --watchdog is the launcher's own; it is not run by hand\n");
    return 2;
  }
  // The recorder kept only stderr of the standard descriptors: nothing
  // this process opens may land on 0 or 1.
  for (int std_fd : {0, 1})
    if (!sys::is_open_fd(std_fd))
      if (auto null = sys::open(sys::at_cwd, "/dev/null", sys::Open::read_write)) (void)null->release();
  auto messages = sys::read_recorded(std::stoi(a));
  if (!messages || messages->empty()) return 1;
  json j = json::parse(messages->front().bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return 1;
  LaunchPlan plan;
  try {
    plan.name = j.at("name").get<std::string>();
    plan.session = j.at("session").get<std::string>();
    plan.session_space = j.at("session_space").get<std::string>();
    plan.ctx_root = j.at("ctx_root").get<std::string>();
    plan.owner = j.at("owner").get<std::uint32_t>();
    plan.cwd = j.at("cwd").get<std::string>();
    plan.ids.privileged = j.at("privileged").get<bool>();
    plan.ids.fs = sys::Creds{j.at("fs").at(0).get<std::uint32_t>(), j.at("fs").at(1).get<std::uint32_t>(),
                             j.at("fs").at(2).get<std::vector<std::uint32_t>>()};
    WatchdogJob job{plan,
                    j.at("agents").get<int>(),
                    j.at("ddir").get<int>(),
                    j.at("idir").get<int>(),
                    j.at("primary").get<bool>(),
                    j.at("socket").get<std::string>(),
                    j.at("grace_ms").get<int>(),
                    j.at("handoff_dir").get<std::string>()};
    messages->erase(messages->begin());
    return clean_up(job, std::move(*messages));
  } catch (const json::exception&) {
    return 1;
  }
}

}  // namespace ctx::launcher
