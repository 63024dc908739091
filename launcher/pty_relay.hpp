// The supervisor's side of an interactive launch: the runtime has a pty of
// the sandbox's own devpts and never holds the caller's terminal; this
// relays between the caller's stdin/stdout and the pty's master, with the
// caller's terminal in raw mode (the runtime's pty does the line editing,
// echo and the keys that make signals, ^C ^Z ^\, for the runtime).
#pragma once

#include <poll.h>
#include <termios.h>

#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::launcher {

class PtyRelay {
 public:
  /// in_fd and out_fd are the caller's (0 and 1); master is the runtime's
  /// pty. The terminal among in_fd/out_fd is put in raw mode (restored by
  /// suspend() and the destructor) and its window size copied.
  static Result<PtyRelay> start(int in_fd, int out_fd, UniqueFd master);
  PtyRelay(PtyRelay&&) noexcept;
  PtyRelay& operator=(PtyRelay&&) = delete;
  PtyRelay(const PtyRelay&) = delete;
  ~PtyRelay();

  /// The fds to poll now (the caller's input while the buffer toward the
  /// master has room, the master, and each side with data waiting).
  void add_poll_fds(std::vector<struct pollfd>& fds) const;
  /// Moves what poll found ready. At EOF of the caller's input the
  /// runtime's terminal gets its VEOF character, as if ^D was typed.
  void handle(const std::vector<struct pollfd>& fds);
  /// SIGWINCH: the caller's window size to the runtime's terminal.
  void window_changed();
  /// Job control: the caller's terminal back to its own mode (before the
  /// supervisor stops itself), and raw again after it was continued.
  void suspend();
  void resume();
  /// After the runtime ended: what the master still holds, to the caller
  /// (at most timeout_ms).
  void drain(int timeout_ms);

 private:
  PtyRelay(int in_fd, int out_fd, UniqueFd master);
  void read_input();
  void read_master();
  void flush_to_master();
  void flush_to_out();

  static constexpr std::size_t kBuffer = 64 * 1024;
  int in_ = -1, out_ = -1;
  int tty_ = -1;  ///< the caller's terminal whose mode we changed, or -1
  UniqueFd master_;
  std::optional<termios> saved_;
  std::string to_master_, to_out_;
  bool in_eof_ = false, eof_sent_ = false, master_done_ = false;
};

}  // namespace ctx::launcher
