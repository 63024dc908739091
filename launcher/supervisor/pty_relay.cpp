#include "launcher/supervisor/pty_relay.hpp"

#include <poll.h>

#include <cstring>

#include "sys/process.hpp"
#include "sys/pty.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

// DSR 5, "status report", and its two answers. Every VT100-compatible
// terminal answers it, and a terminal answers in order: once its answer
// is read, so is every answer to what the runtime asked before.
constexpr std::string_view kStatusQuery = "\x1b[5n";
constexpr std::string_view kStatusOk = "\x1b[0n";
constexpr std::string_view kStatusBad = "\x1b[3n";

// The keeper's messages: 't' + the saved termios, with the terminal (it
// is raw from now on); 'u' (it is not).
constexpr char kRaw = 't';
constexpr char kUntouched = 'u';

std::uint64_t deadline(int ms) { return sys::now_us() + static_cast<std::uint64_t>(ms) * 1000; }

int left_ms(std::uint64_t end_us) {
  std::uint64_t now = sys::now_us();
  return now >= end_us ? 0 : static_cast<int>((end_us - now + 999) / 1000);
}

}  // namespace

PtyRelay::PtyRelay(int in_fd, int out_fd, UniqueFd master, int keeper)
    : in_(in_fd), out_(out_fd), keeper_(keeper), master_(std::move(master)) {}

PtyRelay::PtyRelay(PtyRelay&& o) noexcept
    : in_(o.in_),
      out_(o.out_),
      tty_(o.tty_),
      keeper_(o.keeper_),
      master_(std::move(o.master_)),
      saved_(o.saved_),
      raw_(o.raw_),
      to_master_(std::move(o.to_master_)),
      to_out_(std::move(o.to_out_)),
      in_eof_(o.in_eof_),
      eof_sent_(o.eof_sent_),
      master_done_(o.master_done_),
      modes_(o.modes_) {
  o.saved_.reset();
  o.tty_ = -1;
  o.raw_ = false;
}

PtyRelay::~PtyRelay() { restore_mode(); }

Result<PtyRelay> PtyRelay::start(int in_fd, int out_fd, UniqueFd master, int keeper) {
  CTX_TRY(sys::set_nonblocking(master.get()));
  PtyRelay r(in_fd, out_fd, std::move(master), keeper);
  // Raw mode only where the caller types: its input terminal.
  if (sys::is_terminal(in_fd)) r.tty_ = in_fd;
  if (r.tty_ >= 0) {
    CTX_TRY_ASSIGN(termios t, sys::get_termios(r.tty_));
    r.saved_ = t;
    CTX_TRY(r.go_raw());
  }
  r.window_changed();
  return r;
}

// The watchdog holds the terminal and its mode before it is raw, so that
// no moment leaves it raw without someone to put it back.
Result<void> PtyRelay::go_raw() {
  if (tty_ < 0 || !saved_) return {};
  if (keeper_ >= 0) {
    std::string msg(1, kRaw);
    msg.append(reinterpret_cast<const char*>(&*saved_), sizeof(termios));
    CTX_TRY(sys::send_message(keeper_, msg, {tty_}));
  }
  CTX_TRY(sys::set_termios(tty_, sys::raw_termios(*saved_)));
  raw_ = true;
  return {};
}

void PtyRelay::restore_mode() {
  if (tty_ < 0 || !saved_ || !raw_) return;
  (void)sys::set_termios(tty_, *saved_, sys::TermiosWhen::flush);
  raw_ = false;
  if (keeper_ >= 0) (void)sys::send_message(keeper_, std::string_view(&kUntouched, 1), {});
}

void PtyRelay::resume() {
  (void)go_raw();
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

// What reached the caller's terminal is what the modes follow.
void PtyRelay::flush_to_out() {
  if (to_out_.empty()) return;
  auto n = sys::write_some(out_, to_out_);
  if (!n) {
    to_out_.clear();  // the caller's output is gone (EPIPE): drop, keep the runtime going
    return;
  }
  modes_.feed(std::string_view(to_out_).substr(0, *n));
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

// Stopped: what the pty holds now, not what the runtime's other processes
// go on writing. Ended: until the pty's end.
void PtyRelay::drain(std::uint64_t end_us, Why why) {
  switch (why) {
    case Why::stopped:
      while (!master_done_ && to_out_.size() < kBuffer) {
        std::size_t before = to_out_.size();
        read_master();
        if (to_out_.size() == before) break;
      }
      break;
    case Why::ended: break;
  }
  const bool until_end = why == Why::ended;
  while ((until_end && !master_done_) || !to_out_.empty()) {
    int ms = left_ms(end_us);
    if (ms == 0) break;
    std::vector<struct pollfd> fds;
    if (until_end && !master_done_ && to_out_.size() < kBuffer) fds.push_back({master_.get(), POLLIN, 0});
    if (!to_out_.empty()) fds.push_back({out_, POLLOUT, 0});
    auto n = sys::poll_fds(fds, ms);
    if (!n || *n == 0) break;
    for (const auto& p : fds) {
      if (p.fd == master_.get() && p.revents != 0) read_master();
      if (p.fd == out_ && p.revents != 0) flush_to_out();
    }
  }
}

bool PtyRelay::write_out(std::string_view bytes, std::uint64_t end_us) {
  while (!bytes.empty()) {
    std::vector<struct pollfd> fds{{out_, POLLOUT, 0}};
    auto ready = sys::poll_fds(fds, left_ms(end_us));
    if (!ready || *ready == 0) return false;
    auto n = sys::write_some(out_, bytes);
    if (!n) return false;
    bytes.remove_prefix(*n);
  }
  return true;
}

// The caller's input until the terminal's answer to kStatusQuery, in raw
// mode (nothing echoed), all of it dropped.
void PtyRelay::read_answers(std::uint64_t end_us) {
  std::string tail;
  while (true) {
    std::vector<struct pollfd> fds{{in_, POLLIN, 0}};
    auto ready = sys::poll_fds(fds, left_ms(end_us));
    if (!ready || *ready == 0) return;
    auto got = sys::read_available(in_, 4096);
    if (!got || (*got && (*got)->empty())) return;
    if (!*got) continue;
    tail += **got;
    if (tail.find(kStatusOk) != std::string::npos || tail.find(kStatusBad) != std::string::npos) return;
    if (tail.size() > kStatusOk.size()) tail.erase(0, tail.size() - kStatusOk.size());
  }
}

void PtyRelay::hand_back(Why why) {
  drain(deadline(kDrainMs), why);
  to_out_.clear();  // not taken in time
  std::string tail;
  bool ask = false;
  if (sys::is_terminal(out_)) {
    tail = modes_.reset();
    ask = raw_ && modes_.may_have_asked();
    if (ask) tail += kStatusQuery;
  }
  modes_.forget();
  const std::uint64_t settle_end = deadline(kSettleMs);
  if (write_out(tail, settle_end) && ask) read_answers(settle_end);
  restore_mode();
}

bool TerminalKeeper::take(std::string_view bytes, std::vector<UniqueFd>& fds) {
  if (bytes.size() == 1 && bytes[0] == kUntouched) {
    saved_.reset();
    tty_.reset();
    return true;
  }
  if (bytes.size() != 1 + sizeof(termios) || bytes[0] != kRaw || fds.size() != 1) return false;
  termios t{};
  std::memcpy(&t, bytes.data() + 1, sizeof t);
  saved_ = t;
  tty_ = std::move(fds[0]);
  return true;
}

void TerminalKeeper::restore() {
  if (!saved_ || !tty_.valid()) return;
  sys::ignore_sigttou();
  (void)sys::set_termios(tty_.get(), *saved_, sys::TermiosWhen::now);
  (void)sys::discard_input(tty_.get());
}

}  // namespace ctx::launcher
