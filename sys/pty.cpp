#include "sys/pty.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "sys/error.hpp"

namespace ctx::sys {

bool is_terminal(int fd) {
  int saved = errno;
  bool t = ::isatty(fd) == 1;
  errno = saved;
  return t;
}

Result<UniqueFd> open_pty_master(const std::string& ptmx) {
  int fd = ::open(ptmx.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return CTX_FAIL_ERRNO("open " + ptmx);
  UniqueFd m(fd);
  int unlock = 0;
  if (::ioctl(fd, TIOCSPTLCK, &unlock) < 0) return CTX_FAIL_ERRNO("ioctl TIOCSPTLCK");
  return m;
}

Result<UniqueFd> open_pty_peer(int master) {
  int fd = ::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY);
  if (fd < 0) return CTX_FAIL_ERRNO("ioctl TIOCGPTPEER");
  return UniqueFd(fd);
}

Result<void> set_controlling_tty(int fd) {
  if (::ioctl(fd, TIOCSCTTY, 0) < 0) return CTX_FAIL_ERRNO("ioctl TIOCSCTTY");
  return {};
}

Result<void> set_process_group(pid_t pid, pid_t pgid) {
  if (::setpgid(pid, pgid) < 0) return CTX_FAIL_ERRNO("setpgid");
  return {};
}

Result<void> set_foreground(int tty, pid_t pgid) {
  if (::tcsetpgrp(tty, pgid) < 0) return CTX_FAIL_ERRNO("tcsetpgrp");
  return {};
}

Result<termios> get_termios(int fd) {
  termios t{};
  if (::tcgetattr(fd, &t) < 0) return CTX_FAIL_ERRNO("tcgetattr");
  return t;
}

Result<void> set_termios(int fd, const termios& t, TermiosWhen when) {
  int action = TCSADRAIN;
  switch (when) {
    case TermiosWhen::now: action = TCSANOW; break;
    case TermiosWhen::drain: action = TCSADRAIN; break;
    case TermiosWhen::flush: action = TCSAFLUSH; break;
  }
  if (::tcsetattr(fd, action, &t) < 0) return CTX_FAIL_ERRNO("tcsetattr");
  return {};
}

Result<void> discard_input(int fd) {
  if (::tcflush(fd, TCIFLUSH) < 0) return CTX_FAIL_ERRNO("tcflush");
  return {};
}

termios raw_termios(termios t) {
  ::cfmakeraw(&t);
  return t;
}

Result<winsize> get_window_size(int fd) {
  winsize w{};
  if (::ioctl(fd, TIOCGWINSZ, &w) < 0) return CTX_FAIL_ERRNO("ioctl TIOCGWINSZ");
  return w;
}

Result<void> set_window_size(int fd, const winsize& w) {
  if (::ioctl(fd, TIOCSWINSZ, &w) < 0) return CTX_FAIL_ERRNO("ioctl TIOCSWINSZ");
  return {};
}

}  // namespace ctx::sys
