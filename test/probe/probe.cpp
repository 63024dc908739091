// ctx-probe: runs inside a sandbox and reports what it sees as one JSON
// object on stdout, so that integration tests check sandbox properties
// from the inside. Each argument is one check:
//   ids caps signals fds sid env pids mounts cwd net hostname
//   write:PATH read:PATH exec:PATH statvfs:PATH exists:PATH remount:PATH
//   connect:HOST:PORT notify:MESSAGE sleep:SECONDS
//   denied (each call of the seccomp deny-list, its errno name or "ok")
//   abstract:NAME (connect to an abstract unix socket) kill:PID (signal 0)
//   out:HEX (those bytes to stdout at once: terminal sequences)
//   stop (SIGTSTP to itself: stops until continued)
//   mkfiles:DIR:N (N empty files with 240-character names in DIR)
//   opendirs:DIR:N (holds N handles of DIR, each having read one entry,
//     and lists the last one whole, again after rewinddir, and from a
//     telldir position half-way: the counts, "." and ".." left out)
//   lstatall:DIR (lstat of every name in DIR: how many)
//   positions:DIR (each name's directory position, d_off)
//   await:PATH (waits up to 120 s until PATH exists)
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "sys/mountinfo.hpp"

using nlohmann::json;

namespace {

std::string err_name(int e) {
  const char* n = strerrorname_np(e);
  return n != nullptr ? n : std::to_string(e);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  return out;
}

// Each call the sandbox's seccomp filter must refuse, made with arguments
// that would otherwise succeed or fail differently.
json denied_calls() {
  auto r = [](long rc) { return rc >= 0 ? std::string("ok") : err_name(errno); };
  json out;
  out["keyctl"] = r(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0));
  out["add_key"] = r(syscall(SYS_add_key, "user", "probe", "x", 1, -3));
  out["request_key"] = r(syscall(SYS_request_key, "user", "probe", nullptr, 0));
  char params[120] = {};
  out["io_uring_setup"] = r(syscall(SYS_io_uring_setup, 1, params));
  char attr[128] = {};
  out["perf_event_open"] = r(syscall(SYS_perf_event_open, attr, 0, -1, -1, 0));
  out["bpf"] = r(syscall(SYS_bpf, 0, attr, sizeof attr));
  out["userfaultfd"] = r(syscall(SYS_userfaultfd, 0));
  out["unshare_user"] = r(syscall(SYS_unshare, CLONE_NEWUSER));
  out["unshare_none"] = r(syscall(SYS_unshare, 0));
  out["setns"] = r(syscall(SYS_setns, 0, 0));
  out["clone3"] = r(syscall(SYS_clone3, nullptr, 0));
  char c = 'x';
  out["tiocsti"] = r(ioctl(0, TIOCSTI, &c));
  out["open_by_handle_at"] = r(syscall(SYS_open_by_handle_at, AT_FDCWD, nullptr, 0));
  out["acct"] = r(syscall(SYS_acct, nullptr));
  out["reboot"] = r(syscall(SYS_reboot, 0, 0, 0, nullptr));
  out["personality_query"] = r(syscall(SYS_personality, 0xffffffffUL));
  out["personality_rie"] = r(syscall(SYS_personality, 0x0400000UL /* READ_IMPLIES_EXEC */));
  long st = 0;
  // int 0x80: the i386 table (getpid is 20 there).
  asm volatile("int $0x80" : "=a"(st) : "a"(20) : "memory");
  out["i386_getpid"] = st >= 0 ? std::string("ok") : err_name(static_cast<int>(-st));
  out["x32_getpid"] = r(syscall(39 | 0x40000000));
  std::string status = slurp("/proc/self/status");
  auto p = status.find("Seccomp:");
  out["Seccomp"] = p == std::string::npos ? "" : status.substr(p + 9, status.find('\n', p) - p - 9);
  return out;
}

// The caller's time slice (sched_getattr's sched_runtime of a SCHED_OTHER
// task, Linux 6.12), in ns; 0 where the kernel reports none.
unsigned long long time_slice() {
  struct {
    std::uint32_t size, policy;
    std::uint64_t flags;
    std::int32_t nice;
    std::uint32_t priority;
    std::uint64_t runtime, deadline, period;
  } attr{};
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return 0;
  return attr.runtime;
}

// Checks that look: ids, capabilities, fds, session, environment, mounts.
std::optional<json> look(const std::string& what, const std::string& arg) {
  if (what == "slice") return time_slice();
  if (what == "policy") return sched_getscheduler(0);
  if (what == "ids") {
    uid_t r, e, s;
    gid_t gr, ge, gs;
    getresuid(&r, &e, &s);
    getresgid(&gr, &ge, &gs);
    std::vector<gid_t> g(256);
    int n = getgroups(static_cast<int>(g.size()), g.data());
    g.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
    return json{{"uid", {r, e, s}}, {"gid", {gr, ge, gs}}, {"groups", g}};
  }
  if (what == "caps") {
    json j;
    std::istringstream in(slurp("/proc/self/status"));
    std::string line;
    while (std::getline(in, line))
      for (const char* k : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"})
        if (line.rfind(std::string(k) + ":", 0) == 0) {
          std::string v = line.substr(std::strlen(k) + 1);
          v.erase(0, v.find_first_not_of(" \t"));
          j[k] = v;
        }
    return j;
  }
  if (what == "signals") {  // the dispositions and the mask the runtime was started with
    json j;
    std::istringstream in(slurp("/proc/self/status"));
    std::string line;
    while (std::getline(in, line))
      for (const char* k : {"SigBlk", "SigIgn", "SigCgt"})
        if (line.rfind(std::string(k) + ":", 0) == 0) {
          std::string v = line.substr(std::strlen(k) + 1);
          v.erase(0, v.find_first_not_of(" \t"));
          j[k] = v;
        }
    return j;
  }
  if (what == "fds") {
    // Every open fd but the one reading the directory.
    json a = json::array();
    DIR* d = opendir("/proc/self/fd");
    if (d == nullptr) return err_name(errno);
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      if (std::stoi(n) != dirfd(d)) a.push_back(std::stoi(n));
    }
    closedir(d);
    return a;
  }
  if (what == "ls") {
    DIR* d = opendir(arg.c_str());
    if (d == nullptr) return err_name(errno);
    json a = json::array();
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") a.push_back(n);
    }
    closedir(d);
    return a;
  }
  if (what == "listenfd") {
    int on = 0;
    socklen_t len = sizeof on;
    if (getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) < 0) return err_name(errno);
    return on ? "listening" : "not listening";
  }
  if (what == "uid_map" || what == "gid_map" || what == "setgroups") {
    return slurp("/proc/self/" + what);
  }
  if (what == "sid") return json{{"pid", getpid()}, {"sid", getsid(0)}, {"pgid", getpgid(0)}, {"ppid", getppid()}};
  if (what == "env") {
    json a = json::array();
    for (char** e = environ; *e != nullptr; ++e) a.push_back(*e);
    return a;
  }
  if (what == "pids") {
    json a = json::array();
    for (auto& n : list("/proc"))
      if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos) a.push_back(std::stoi(n));
    return a;
  }
  return std::nullopt;
}

// Checks that look at the file system and the network.
std::optional<json> look_around(const std::string& what, const std::string& /*arg*/) {
  if (what == "mounts") {
    auto mounts = ctx::sys::read_mountinfo();
    if (!mounts) return mounts.error().msg;
    json a = json::array();
    for (const auto& m : *mounts) a.push_back({{"target", m.target}, {"root", m.root}, {"fstype", m.fstype}});
    return a;
  }
  if (what == "cwd") {
    char buf[4096];
    return getcwd(buf, sizeof buf) != nullptr ? json(buf) : json(err_name(errno));
  }
  if (what == "hostname") {
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    return buf;
  }
  if (what == "net") {
    json a = json::array();
    std::istringstream in(slurp("/proc/net/dev"));
    std::string line;
    int n = 0;
    while (std::getline(in, line))
      if (++n > 2) {
        auto colon_at = line.find(':');
        std::string name = line.substr(0, colon_at);
        name.erase(0, name.find_first_not_of(' '));
        a.push_back(name);
      }
    return a;
  }
  return std::nullopt;
}

// Checks that act: files, mounts, sockets, signals, syscalls, exits.
std::optional<json> act(const std::string& what, const std::string& arg) {
  if (what == "write") {
    int fd = open(arg.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return err_name(errno);
    ssize_t w = write(fd, "probe\n", 6);
    int e = errno;
    close(fd);
    return w == 6 ? "ok" : err_name(e);
  }
  if (what == "read") {
    int fd = open(arg.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_name(errno);
    char b[16];
    ssize_t r = read(fd, b, sizeof b);
    int e = errno;
    close(fd);
    return r >= 0 ? "ok" : err_name(e);
  }
  if (what == "exists") {
    struct stat st {};
    return lstat(arg.c_str(), &st) == 0 ? "yes" : err_name(errno);
  }
  if (what == "exec") {
    pid_t p = fork();
    if (p == 0) {
      char* argv[] = {const_cast<char*>(arg.c_str()), nullptr};
      char* envp[] = {nullptr};
      execve(arg.c_str(), argv, envp);
      _exit(100 + (errno == EACCES ? 1 : errno == ENOENT ? 2 : 3));
    }
    int st = 0;
    waitpid(p, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return code == 101 ? "EACCES" : code == 102 ? "ENOENT" : code == 103 ? "error" : "ok";
  }
  if (what == "statvfs") {
    struct statvfs v {};
    if (statvfs(arg.c_str(), &v) < 0) return err_name(errno);
    return json{{"rdonly", (v.f_flag & ST_RDONLY) != 0},
                {"nosuid", (v.f_flag & ST_NOSUID) != 0},
                {"nodev", (v.f_flag & ST_NODEV) != 0},
                {"noexec", (v.f_flag & ST_NOEXEC) != 0},
                {"bytes", static_cast<unsigned long long>(v.f_blocks) * v.f_frsize}};
  }
  if (what == "remount") {
    // Try to make a read-only bind writable again: must fail.
    if (mount(nullptr, arg.c_str(), nullptr, MS_REMOUNT | MS_BIND, nullptr) < 0) return err_name(errno);
    return "ok";
  }
  return std::nullopt;
}

// The attack of docs/security.md, "Floods and unbounded resources" (the
// view server): many long names, and many handles of their directory held
// open at once.
std::optional<json> flood(const std::string& what, const std::string& arg) {
  auto colon = arg.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string dir = arg.substr(0, colon);
  const int n = std::stoi(arg.substr(colon + 1));
  if (what == "mkfiles") {
    for (int i = 0; i < n; ++i) {
      std::string name = std::to_string(i);
      name += std::string(240 - name.size(), 'x');
      int fd = open((dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return err_name(errno);
      close(fd);
    }
    return "ok";
  }
  if (what == "opendirs") {
    // Never closed: the handles stay open until the probe exits, held
    // where a leak checker sees them (an ASan build's probe checks).
    static auto* held = new std::vector<DIR*>();
    DIR* d = nullptr;
    int entries = 0;
    auto count = [&entries](const dirent* e) {
      std::string name = e->d_name;
      if (name != "." && name != "..") ++entries;
    };
    for (int i = 0; i < n; ++i) {
      d = opendir(dir.c_str());
      if (d == nullptr) return err_name(errno);
      held->push_back(d);
      errno = 0;
      const dirent* first = readdir(d);
      if (first == nullptr) return errno != 0 ? err_name(errno) : "empty";
      entries = 0;
      count(first);
    }
    if (d == nullptr) return "none";
    errno = 0;
    while (const dirent* e = readdir(d)) count(e);
    if (errno != 0) return err_name(errno);
    const int first_pass = entries;
    // Read again from the start, then from a position taken half-way.
    rewinddir(d);
    entries = 0;
    long half = -1;
    while (const dirent* e = readdir(d)) {
      count(e);
      if (entries == first_pass / 2) half = telldir(d);
    }
    const int second_pass = entries;
    seekdir(d, half);
    entries = 0;
    while (const dirent* e = readdir(d)) count(e);
    return json{{"held", n}, {"entries", first_pass}, {"rewound", second_pass}, {"from_half", entries}};
  }
  return std::nullopt;
}

// Checks that call: the deny-list, sockets, signals, notifications, exits.
std::optional<json> call(const std::string& what, const std::string& arg) {
  if (what == "denied") return denied_calls();
  if (what == "abstract") {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, arg.data(), std::min(arg.size(), sizeof a.sun_path - 2));
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + arg.size());
    int r = connect(s, reinterpret_cast<sockaddr*>(&a), len);
    int e = errno;
    close(s);
    return r == 0 ? "ok" : err_name(e);
  }
  if (what == "kill") return kill(std::stoi(arg), 0) == 0 ? "ok" : err_name(errno);
  if (what == "connect") {
    auto sep = arg.rfind(':');
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(std::stoi(arg.substr(sep + 1))));
    inet_pton(AF_INET, arg.substr(0, sep).c_str(), &a.sin_addr);
    int r = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    int e = errno;
    close(s);
    return r == 0 ? "ok" : err_name(e);
  }
  if (what == "notify") {
    const char* path = getenv("NOTIFY_SOCKET");
    if (path == nullptr) return "no NOTIFY_SOCKET";
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    std::string msg = arg;
    for (auto& ch : msg)
      if (ch == ',') ch = '\n';
    ssize_t r = sendto(s, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    int e = errno;
    close(s);
    return r >= 0 ? "ok" : err_name(e);
  }
  if (what == "ignore") {  // ignore:TERM: a runtime that will not stop when asked
    if (arg != "TERM") return "unknown signal";
    std::signal(SIGTERM, SIG_IGN);
    return "ok";
  }
  if (what == "out") {
    std::string bytes;
    for (std::size_t i = 0; i + 1 < arg.size(); i += 2)
      bytes += static_cast<char>(std::stoi(arg.substr(i, 2), nullptr, 16));
    return write(1, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) ? "ok" : err_name(errno);
  }
  if (what == "stop") return raise(SIGTSTP) == 0 ? "ok" : err_name(errno);
  if (what == "positions") {
    DIR* d = opendir(arg.c_str());
    if (d == nullptr) return err_name(errno);
    json out = json::object();
    while (const dirent* e = readdir(d)) out[e->d_name] = e->d_off;
    closedir(d);
    return out;
  }
  if (what == "lstatall") {
    int n = 0;
    for (const auto& name : list(arg)) {
      struct stat st {};
      if (lstat((arg + "/" + name).c_str(), &st) != 0) return err_name(errno);
      ++n;
    }
    return n;
  }
  if (what == "await") {
    struct stat st {};
    for (int i = 0; i < 1200 && lstat(arg.c_str(), &st) != 0; ++i) usleep(100000);
    return lstat(arg.c_str(), &st) == 0 ? "ok" : err_name(errno);
  }
  if (what == "sleep") {
    usleep(static_cast<useconds_t>(std::stod(arg) * 1e6));
    return "ok";
  }
  if (what == "exit") {
    std::cout.flush();
    _exit(std::stoi(arg));
  }
  return std::nullopt;
}

json check(const std::string& c) {
  auto colon = c.find(':');
  std::string what = c.substr(0, colon);
  std::string arg = colon == std::string::npos ? "" : c.substr(colon + 1);
  for (auto* f : {look, look_around, act, flood, call})
    if (auto j = f(what, arg)) return *j;
  return "unknown check";
}

}  // namespace

int main(int argc, char** argv) {
  json out = json::object();
  for (int i = 1; i < argc; ++i) {
    std::string c = argv[i];
    if (c.rfind("exit:", 0) == 0) {
      std::cout << out.dump() << std::endl;
      _exit(std::stoi(c.substr(5)));
    }
    out[c] = check(c);
  }
  std::cout << out.dump() << std::endl;
  return 0;
}
