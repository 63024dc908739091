#include "test/support/pty.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ctx::test {

PtySession::PtySession(const std::vector<std::string>& argv, std::optional<TestUser> as,
                       const std::vector<std::string>& env, int rows, int cols) {
  master_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0)
    throw std::runtime_error(std::string("no pty: ") + std::strerror(errno));
  slave_path_ = ::ptsname(master_);
  winsize w{static_cast<unsigned short>(rows), static_cast<unsigned short>(cols), 0, 0};
  ::ioctl(master_, TIOCSWINSZ, &w);
  if (as && ::geteuid() == 0) ::chown(slave_path_.c_str(), as->uid, static_cast<gid_t>(-1));
  // Held open by the test too: a master whose slave nobody has open reads
  // EIO, which would end the session before the child opened it.
  held_slave_ = ::open(slave_path_.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) run_child(argv, as, env);
}

void PtySession::run_child(const std::vector<std::string>& argv, std::optional<TestUser> as,
                           const std::vector<std::string>& env) {
  ::setsid();
  int s = ::open(slave_path_.c_str(), O_RDWR);
  if (s < 0 || ::ioctl(s, TIOCSCTTY, 0) != 0) ::_exit(120);
  for (int fd = 0; fd < 3; ++fd) ::dup2(s, fd);
  if (s > 2) ::close(s);
  if (as && ::geteuid() == 0 && as->uid != 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(as->gid) != 0 || ::setuid(as->uid) != 0) ::_exit(121);
  }
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ::execve(args[0], args.data(), envp.data());
  ::_exit(127);
}

PtySession::~PtySession() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  if (master_ >= 0) ::close(master_);
  if (held_slave_ >= 0) ::close(held_slave_);
  if (realtime_ && --realtime_sessions_ == 0) {
    sched_param p{};
    ::sched_setscheduler(0, SCHED_OTHER, &p);
  }
}

void PtySession::type(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(master_, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

// Why real-time: a terminal is a device of its own, not a process among
// the sandbox's. Under load (CI runs [root] and [userns] side by side on
// two cores) an ordinary test process read a query 300 ms and more after
// it was written, so its answer came after the supervisor's 500 ms wait
// for answers (PtyRelay::kSettleMs) and landed in the shell, as
// docs/security.md says one that late does. SCHED_RESET_ON_FORK: what the
// test launches later runs as an ordinary process.
void PtySession::answer(const std::string& query, const std::string& reply, int delay_ms) {
  answers_.push_back({query, reply, delay_ms, out_.size()});
  sched_param p{};
  p.sched_priority = 1;
  if (!realtime_ &&
      (realtime_sessions_ > 0 || ::sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) == 0)) {
    realtime_ = true;
    ++realtime_sessions_;
  }
}

void PtySession::scan_queries() {
  for (auto& a : answers_) {
    std::size_t at;
    while ((at = out_.find(a.query, a.scanned)) != std::string::npos) {
      a.scanned = at + a.query.size();
      due_.emplace_back(std::chrono::steady_clock::now() + std::chrono::milliseconds(a.delay_ms), a.reply);
    }
    if (out_.size() >= a.query.size()) a.scanned = std::max(a.scanned, out_.size() - a.query.size() + 1);
  }
  std::stable_sort(due_.begin(), due_.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
}

void PtySession::type_due_answers() {
  auto now = std::chrono::steady_clock::now();
  while (!due_.empty() && due_.front().first <= now) {
    type(due_.front().second);
    due_.erase(due_.begin());
  }
}

void PtySession::pump(int timeout_ms) {
  if (!due_.empty()) {
    auto next =
        std::chrono::duration_cast<std::chrono::milliseconds>(due_.front().first - std::chrono::steady_clock::now())
            .count();
    timeout_ms = static_cast<int>(std::clamp<long long>(next, 0, timeout_ms));
  }
  pollfd p{master_, POLLIN, 0};
  if (!closed_ && ::poll(&p, 1, timeout_ms) > 0) {
    char buf[4096];
    ssize_t n = ::read(master_, buf, sizeof buf);
    if (n > 0) {
      out_.append(buf, static_cast<std::size_t>(n));
      scan_queries();
    } else {
      closed_ = true;  // EIO: every holder of the slave closed it
    }
  } else if (closed_ && timeout_ms > 0) {
    ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
  }
  type_due_answers();
}

void PtySession::idle(int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
  };
  for (auto rest = left(); rest > 0; rest = left()) pump(static_cast<int>(rest));
}

bool PtySession::wait_for(const std::string& text, int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out_.find(text, from_) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0 || closed_) return false;
    pump(static_cast<int>(left));
  }
  return true;
}

int PtySession::wait_exit(int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    pump(20);
  }
  return -1;
}

}  // namespace ctx::test
