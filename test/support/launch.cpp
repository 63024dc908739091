#include "test/support/launch.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "cgroup/discover.hpp"
#include "cgroup/placement.hpp"
#include "sys/mountinfo.hpp"
#include "test/support/facility.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

namespace ctx::test {

std::optional<TestUser> test_user() {
  if (::geteuid() != 0) {
    struct passwd* pw = ::getpwuid(::geteuid());
    return TestUser{::geteuid(), ::getegid(), pw != nullptr ? pw->pw_name : "self"};
  }
  const char* n = std::getenv("CTX_TEST_USER");
  std::string name = n != nullptr && *n != '\0' ? n : "ctx-test";
  struct passwd* pw = ::getpwnam(name.c_str());
  if (pw == nullptr) return std::nullopt;
  return TestUser{pw->pw_uid, pw->pw_gid, name};
}

std::string built(const std::string& rel) {
  const char* b = std::getenv("CTX_BUILD_ROOT");
  if (b == nullptr) throw std::runtime_error("CTX_BUILD_ROOT is not set (run the tests through meson test)");
  return std::string(b) + "/" + rel;
}

namespace {

void drain(int fd, std::string& into, bool& open) {
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0)
    into.append(buf, static_cast<std::size_t>(n));
  else if (n == 0 || (errno != EINTR && errno != EAGAIN))
    open = false;
}

}  // namespace

Spawned spawn_command(const std::vector<std::string>& argv, std::optional<TestUser> as,
                      const std::vector<std::string>& extra_env, const std::function<bool()>& before_exec) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0) throw std::runtime_error("pipe2");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (as && ::geteuid() == 0 && as->uid != 0) {
      if (::setgroups(0, nullptr) < 0 || ::setresgid(as->gid, as->gid, as->gid) < 0 ||
          ::setresuid(as->uid, as->uid, as->uid) < 0)
        _exit(121);
    }
    if (before_exec && !before_exec()) _exit(123);
    std::vector<std::string> env{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "SSH_AUTH_SOCK=/leak/should-not-pass"};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> a, e;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
    e.push_back(nullptr);
    ::execve(a[0], a.data(), e.data());
    _exit(122);
  }
  ::close(out[1]);
  ::close(err[1]);
  return Spawned{pid, out[0], err[0]};
}

RunResult wait_command(Spawned& sp, int timeout_s) {
  RunResult r;
  bool o_open = true, e_open = true;
  struct timespec start {};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  while (o_open || e_open) {
    struct pollfd fds[2] = {{o_open ? sp.out_fd : -1, POLLIN, 0}, {e_open ? sp.err_fd : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, 200);
    if (n > 0) {
      if (fds[0].revents) drain(sp.out_fd, r.out, o_open);
      if (fds[1].revents) drain(sp.err_fd, r.err, e_open);
    }
    struct timespec now {};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > timeout_s) {
      ::kill(-sp.pid, SIGKILL);
      ::kill(sp.pid, SIGKILL);
      r.err += "\n[test harness: killed after " + std::to_string(timeout_s) + " s]";
      break;
    }
  }
  ::close(sp.out_fd);
  ::close(sp.err_fd);
  int status = 0;
  ::waitpid(sp.pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // Warnings are said once per user and boot, so which test sees one
  // depends on the order: keep them apart from the exact messages.
  std::string kept;
  std::size_t pos = 0;
  while (pos < r.err.size()) {
    std::size_t nl = r.err.find('\n', pos);
    std::size_t end = nl == std::string::npos ? r.err.size() : nl + 1;
    std::string line = r.err.substr(pos, end - pos);
    (line.rfind("ctx-agent-run: warning: ", 0) == 0 ? r.warnings : kept) += line;
    pos = end;
  }
  r.err = kept;
  return r;
}

RunResult run_command(const std::vector<std::string>& argv, std::optional<TestUser> as, int timeout_s,
                      const std::vector<std::string>& extra_env, const std::function<bool()>& before_exec) {
  Spawned s = spawn_command(argv, as, extra_env, before_exec);
  return wait_command(s, timeout_s);
}

bool wait_for_file(const std::string& path, const std::string& want, int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 20) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[256];
      ssize_t n = ::read(fd, buf, sizeof buf);
      ::close(fd);
      if (n >= 0 && std::string(buf, static_cast<std::size_t>(n)) == want) return true;
    }
    ::usleep(20000);
  }
  // What was there instead, and for an agent's status its log, with the
  // failing assertion.
  std::ifstream last(path);
  std::stringstream got;
  got << last.rdbuf();
  UNSCOPED_INFO(path << " holds '" << got.str() << "', not '" << want << "'");
  if (path.size() > 7 && path.compare(path.size() - 7, 7, "/status") == 0) {
    std::ifstream log(path.substr(0, path.size() - 7) + "/log");
    std::stringstream l;
    l << log.rdbuf();
    UNSCOPED_INFO("its log:\n" << l.str());
  }
  return false;
}

CtxTree::CtxTree(TestUser owner) : owner_(owner) {
  root_ = dir_ / "ctx";
  for (const char* d : {"ctx", "ctx/agent", "ctx/tool", "ctx/model", "ctx/shared", "ctx/bin", "ctx/home"}) mkdir(d);
  mkdir("ctx/home/" + std::to_string(owner_.uid));
}

void CtxTree::own(const std::string& path) const {
  if (::geteuid() == 0) ::lchown(path.c_str(), owner_.uid, owner_.gid);
}

void CtxTree::mkdir(const std::string& rel, unsigned mode) {
  std::string p;
  std::size_t start = 0;
  while (start <= rel.size()) {
    auto slash = rel.find('/', start);
    p = rel.substr(0, slash);
    std::string full = dir_ / p;
    if (::mkdir(full.c_str(), mode) == 0) own(full);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  ::chmod((dir_ / rel).c_str(), mode);
}

void CtxTree::write(const std::string& rel, const std::string& content, unsigned mode) {
  auto slash = rel.rfind('/');
  if (slash != std::string::npos) mkdir(rel.substr(0, slash));
  dir_.write(rel, content, mode);
  own(dir_ / rel);
}

std::string CtxTree::base_mounts() const {
  return "/usr\t/usr\tro\trbind,nodev\n" + built("test/ctx-probe") + "\t/probe\tro\tbind,nodev\n";
}

std::string CtxTree::label_type(const std::string& label) {
  std::string type = label.substr(0, label.find('\n'));
  // user:role:type:level
  if (auto c = type.find(':'); c != std::string::npos) {
    auto c2 = type.find(':', c + 1);
    type = type.substr(c2 + 1, type.find(':', c2 + 1) - c2 - 1);
  }
  return type;
}

std::string CtxTree::mount_rules_for(const std::string& label, const std::string& table) {
  const std::string type = label_type(label);
  std::string out;
  std::size_t start = 0;
  while (start < table.size()) {
    std::size_t end = table.find('\n', start);
    if (end == std::string::npos) end = table.size();
    std::string line = table.substr(start, end - start);
    start = end + 1;
    std::vector<std::string> f;
    std::size_t b = 0;
    for (std::size_t t = line.find('\t'); t != std::string::npos; b = t + 1, t = line.find('\t', b))
      f.push_back(line.substr(b, t - b));
    f.push_back(line.substr(b));
    if (f.size() != 4) continue;
    out += "allow " + type + " mount:" + f[1] + " read\n";
    if (f[2] == "rw") out += "allow " + type + " mount:" + f[1] + " write\n";
  }
  return out;
}

void CtxTree::set_policy(const std::string& name, const std::string& text) {
  const std::string d = root_ + "/agent/" + name + ".d/";
  const std::string label = read_file(d + "label");
  write("ctx/agent/" + name + ".d/policy",
        session_policy(label_type(label)) + text + mount_rules_for(label, read_file(d + "mount")));
}

void CtxTree::agent(const std::string& name, const std::map<std::string, std::optional<std::string>>& files,
                    bool mount_rules, bool session_rules) {
  std::string uid = std::to_string(owner_.uid);
  std::string home = "ctx/home/" + uid + "/agent/" + name;
  mkdir(home + "/root");
  for (const char* l : {"bin", "lib", "lib64", "sbin"}) {
    std::string link = dir_ / (home + "/root/" + l);
    if (::symlink((std::string("usr/") + l).c_str(), link.c_str()) == 0) own(link);
  }
  std::map<std::string, std::optional<std::string>> all{
      {"owner", uid + "\n"},
      {"gid", std::to_string(owner_.gid) + "\n"},
      {"label", name + "_t\n"},
      {"iso", "userns\n"},
      {"root", root_ + "/home/" + uid + "/agent/" + name + "/root\n"},
      {"mount", base_mounts()},
  };
  for (const auto& [k, v] : files) all[k] = v;
  if (mount_rules && all["label"] && all["mount"]) {
    std::string rules = mount_rules_for(*all["label"], *all["mount"]);
    if (!rules.empty()) all["policy"] = all["policy"].value_or("") + rules;
  }
  // The session class (docs/abi-policy.md): the sessions tests launch
  // into, for the label's type, unless the test is about that class.
  if (session_rules && all["label"])
    all["policy"] = session_policy(label_type(*all["label"])) + all["policy"].value_or("");
  for (auto it = all.begin(); it != all.end();) it = it->second ? std::next(it) : all.erase(it);
  mkdir("ctx/agent/" + name + ".d");
  for (const auto& [k, v] : all)
    if (v) write("ctx/agent/" + name + ".d/" + k, *v);
}

std::string session_policy(const std::string& type) {
  std::string rules;
  for (const char* s : {"default", "review"})
    for (const char* p : {"write", "resume"}) rules += "allow " + type + " session:" + s + " " + p + "\n";
  return rules;
}

std::string install_example(const std::string& dest, const TestUser& owner) {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  if (src == nullptr) throw std::runtime_error("CTX_SOURCE_ROOT is not set");
  RunResult r = run_command({std::string(src) + "/scripts/install-example", dest, std::to_string(owner.uid),
                             std::to_string(owner.gid), built("ctx/ctx")},
                            std::nullopt, 60);
  if (r.exit_code != 0) throw std::runtime_error("install-example failed: " + r.err);
  return dest + "/ctx";
}

RunResult CtxTree::launch(const std::vector<std::string>& args, std::optional<TestUser> as, int timeout_s) const {
  Spawned s = spawn(args, as);
  return wait_command(s, timeout_s);
}

Spawned CtxTree::spawn(const std::vector<std::string>& args, std::optional<TestUser> as) const {
  std::vector<std::string> argv{built("launcher/ctx-agent-run"), "--ctx-root", root_};
  argv.insert(argv.end(), args.begin(), args.end());
  if (!as && ::geteuid() == 0 && owner_.uid != 0) as = owner_;
  return spawn_command(argv, as);
}

std::vector<int> processes_mentioning(const std::string& token) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string n = e.path().filename();
    if (n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) == ::getpid()) continue;
    std::string cmd;
    try {
      cmd = read_file(e.path().string() + "/cmdline");
    } catch (...) {
      continue;
    }
    if (cmd.find(token) != std::string::npos) out.push_back(std::stoi(n));
  }
  return out;
}

LaunchMode launch_mode() {
  auto u = test_user();
  if (!u) throw std::runtime_error("no test user: run scripts/setup");
  if (current_facility() == "root") return LaunchMode{true, TestUser{0, 0, "root"}, *u};
  return LaunchMode{false, *u, *u};
}

std::string probe_json_line(const std::string& out) {
  auto end = out.find_last_not_of('\n');
  if (end == std::string::npos) return "{}";
  auto start = out.rfind('\n', end);
  return out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

nlohmann::json probe(const RunResult& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(probe_json_line(r.out));
}

RunResult run_probe(const CtxTree& t, const LaunchMode& m, const std::string& agent, std::vector<std::string> checks) {
  std::vector<std::string> args{agent, "--", "/probe"};
  args.insert(args.end(), checks.begin(), checks.end());
  return t.launch(args, m.as);
}

int init_pid_of(Spawned& sp) {
  std::string first;
  char c;
  while (::read(sp.out_fd, &c, 1) == 1 && c != '\n') first += c;
  return nlohmann::json::parse(first)["pid"];
}

std::string home_of(const CtxTree& t, const std::string& agent) {
  return t.root() + "/home/" + std::to_string(t.owner().uid) + "/agent/" + agent;
}

nlohmann::json first_json_line(const std::string& text) {
  return nlohmann::json::parse(text.substr(0, text.find('\n')));
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

bool wait_gone(const std::string& token, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    if (processes_mentioning(token).empty()) return true;
    ::usleep(20000);
  }
  return false;
}

std::optional<std::string> cgroup2_mount() {
  auto mounts = sys::read_mountinfo();
  if (!mounts) return std::nullopt;
  auto m = cgroup::find_cgroup2(*mounts);
  if (!m) return std::nullopt;
  return m->mount_point;
}

std::optional<std::string> agent_cgroup(const CtxTree& t, const std::string& agent) {
  auto mount = cgroup2_mount();
  if (!mount) return std::nullopt;
  return *mount + "/cortexfs/user-" + std::to_string(t.owner().uid) + "/" + cgroup::agent_cgroup_name(agent, t.root());
}

}  // namespace ctx::test
