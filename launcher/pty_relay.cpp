#include "launcher/pty_relay.hpp"

#include <poll.h>

#include "sys/process.hpp"
#include "sys/pty.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

PtyRelay::PtyRelay(int in_fd, int out_fd, UniqueFd master) : in_(in_fd), out_(out_fd), master_(std::move(master)) {}

PtyRelay::PtyRelay(PtyRelay&& o) noexcept
    : in_(o.in_),
      out_(o.out_),
      tty_(o.tty_),
      master_(std::move(o.master_)),
      saved_(o.saved_),
      to_master_(std::move(o.to_master_)),
      to_out_(std::move(o.to_out_)),
      in_eof_(o.in_eof_),
      eof_sent_(o.eof_sent_),
      master_done_(o.master_done_) {
  o.saved_.reset();
  o.tty_ = -1;
}

PtyRelay::~PtyRelay() { suspend(); }

Result<PtyRelay> PtyRelay::start(int in_fd, int out_fd, UniqueFd master) {
  CTX_TRY(sys::set_nonblocking(master.get()));
  PtyRelay r(in_fd, out_fd, std::move(master));
  // Raw mode only where the caller types: its input terminal.
  if (sys::is_terminal(in_fd)) r.tty_ = in_fd;
  if (r.tty_ >= 0) {
    CTX_TRY_ASSIGN(termios t, sys::get_termios(r.tty_));
    r.saved_ = t;
    r.resume();
  }
  r.window_changed();
  return r;
}

void PtyRelay::suspend() {
  if (tty_ >= 0 && saved_) (void)sys::set_termios(tty_, *saved_);
}

void PtyRelay::resume() {
  if (tty_ >= 0 && saved_) (void)sys::set_termios(tty_, sys::raw_termios(*saved_));
  window_changed();
}

void PtyRelay::window_changed() {
  int from = sys::is_terminal(out_) ? out_ : sys::is_terminal(in_) ? in_ : -1;
  if (from < 0) return;
  if (auto w = sys::get_window_size(from)) (void)sys::set_window_size(master_.get(), *w);
}

void PtyRelay::add_poll_fds(std::vector<struct pollfd>& fds) const {
  if (!in_eof_ && to_master_.size() < kBuffer) fds.push_back({in_, POLLIN, 0});
  if (!master_done_) {
    short ev = to_out_.size() < kBuffer ? POLLIN : 0;
    if (!to_master_.empty() || (in_eof_ && !eof_sent_)) ev |= POLLOUT;
    fds.push_back({master_.get(), ev, 0});
  }
  if (!to_out_.empty()) fds.push_back({out_, POLLOUT, 0});
}

void PtyRelay::read_input() {
  auto got = sys::read_available(in_, kBuffer - to_master_.size());
  if (!got || (*got && (*got)->empty())) {
    in_eof_ = true;  // EOF or an error: no more input
    return;
  }
  if (*got) to_master_ += **got;
}

void PtyRelay::read_master() {
  auto got = sys::read_available(master_.get(), kBuffer - to_out_.size());
  // EIO: every holder of the runtime's side has closed it.
  if (!got || (*got && (*got)->empty())) {
    master_done_ = true;
    return;
  }
  if (*got) to_out_ += **got;
}

void PtyRelay::flush_to_master() {
  if (!to_master_.empty()) {
    auto n = sys::write_some(master_.get(), to_master_);
    if (!n) {
      master_done_ = true;
      return;
    }
    to_master_.erase(0, *n);
  }
  if (in_eof_ && !eof_sent_ && to_master_.empty()) {
    auto t = sys::get_termios(master_.get());
    char veof = t ? static_cast<char>(t->c_cc[VEOF]) : '\x04';
    if (auto n = sys::write_some(master_.get(), std::string_view(&veof, 1)); n && *n == 1) eof_sent_ = true;
  }
}

void PtyRelay::flush_to_out() {
  if (to_out_.empty()) return;
  auto n = sys::write_some(out_, to_out_);
  if (!n) {
    to_out_.clear();  // the caller's output is gone (EPIPE): drop, keep the runtime going
    return;
  }
  to_out_.erase(0, *n);
}

void PtyRelay::handle(const std::vector<struct pollfd>& fds) {
  for (const auto& p : fds) {
    if (p.revents == 0) continue;
    if (p.fd == in_ && (p.events & POLLIN) != 0) read_input();
    if (p.fd == master_.get()) {
      if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && (p.events & POLLIN) != 0) read_master();
      if ((p.revents & POLLOUT) != 0) flush_to_master();
    }
    if (p.fd == out_ && (p.revents & (POLLOUT | POLLERR | POLLHUP)) != 0) flush_to_out();
  }
}

void PtyRelay::drain(int timeout_ms) {
  std::uint64_t end = sys::now_us() + static_cast<std::uint64_t>(timeout_ms) * 1000;
  while (!master_done_ || !to_out_.empty()) {
    std::uint64_t now = sys::now_us();
    if (now >= end) break;
    std::vector<struct pollfd> fds;
    if (!master_done_) fds.push_back({master_.get(), POLLIN, 0});
    if (!to_out_.empty()) fds.push_back({out_, POLLOUT, 0});
    auto n = sys::poll_fds(fds, static_cast<int>((end - now) / 1000) + 1);
    if (!n || *n == 0) break;
    for (const auto& p : fds) {
      if (p.fd == master_.get() && p.revents != 0) read_master();
      if (p.fd == out_ && p.revents != 0) flush_to_out();
    }
  }
}

}  // namespace ctx::launcher
