// The sandbox's side of the channel (channel.hpp), used by the steps of
// run_sandbox (sandbox.cpp) and by the mounts they make (mounts.cpp).
#pragma once

#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "sys/fault.hpp"
#include "sys/process.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

// The sandbox's side of the channel: step timings (kept here and sent in
// one record, so that the supervisor is not woken once per step while the
// sandbox works), descriptors, and the one error that ends the setup, each
// a typed record (channel.hpp) naming the step it belongs to.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd), last_(sys::now_us()) {}
  /// The current step is done; `next` begins.
  void enter(Step next) {
    std::uint64_t now = sys::now_us();
    if (count_ < kMaxSteps) steps_[count_++] = {current_, static_cast<std::uint32_t>(now - last_)};
    last_ = now;
    current_ = next;
    if constexpr (sys::kFaultInjection) inject();
  }
  Step current() const { return current_; }
  int fd() const { return fd_; }
  /// After the channel moved to another descriptor (exec_runtime).
  void set_fd(int fd) { fd_ = fd; }
  /// Sends the timings gathered so far.
  void flush() {
    if (count_ == 0) return;
    Record r{Record::Kind::timings, current_, 0, 0, encode_timings(steps_.data(), count_)};
    send(r, {});
    count_ = 0;
  }
  void send(const Record& r, const std::vector<int>& fds) const {
    if (fd_ >= 0) (void)sys::send_message(fd_, encode(r), fds);
  }

 private:
  static constexpr std::size_t kMaxSteps = 32;
  int fd_;
  Step current_ = Step::id_maps;
  std::uint64_t last_;
  std::array<StepTiming, kMaxSteps> steps_{};
  std::size_t count_ = 0;

  // Tests only (sys/fault.hpp): the step just entered fails, or its
  // process is killed, when $CTX_FAULT names it.
  void inject() {
    std::string point = current_ == Step::exec ? "runtime.exec" : "sandbox." + std::string(to_string(current_));
    if (auto f = sys::fault_at(point); !f) {
      flush();
      send({Record::Kind::error, current_, f.error().code, 0, f.error().msg}, {});
      _exit(kExitLaunchFailed);
    }
  }
};

/// Sends the timings gathered so far and `e`, the error that ends the
/// setup, then exits with `code`.
[[noreturn]] inline void die(Reporter& rep, const Error& e, int code = kExitLaunchFailed) {
  rep.flush();
  rep.send({Record::Kind::error, rep.current(), e.code, 0, e.msg}, {});
  _exit(code);
}

}  // namespace ctx::launcher
