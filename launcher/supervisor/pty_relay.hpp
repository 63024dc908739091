// The supervisor's side of an interactive launch: the runtime has a pty of
// the sandbox's own devpts and never holds the caller's terminal; this
// relays between the caller's stdin/stdout and the pty's master, with the
// caller's terminal in raw mode (the runtime's pty does the line editing,
// echo and the keys that make signals, ^C ^Z ^\, for the runtime).
// Before the caller's shell gets its terminal back (the runtime stopped
// or ended) the relay puts it back as the shell expects it; the watchdog
// does what it can of that when the supervisor is SIGKILLed
// (docs/security.md, "The terminal").
#pragma once

#include <poll.h>
#include <termios.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/supervisor/terminal_modes.hpp"

namespace ctx::launcher {

class PtyRelay {
 public:
  /// in_fd and out_fd are the caller's (0 and 1); master is the runtime's
  /// pty. The terminal among in_fd/out_fd is put in raw mode (restored by
  /// hand_back() and the destructor) and its window size copied. keeper
  /// (-1: none) is the watchdog's socket: whenever the terminal is raw the
  /// watchdog holds it and its mode (TerminalKeeper), told before raw
  /// mode is set; a failure to tell it at the start fails the start.
  static Result<PtyRelay> start(int in_fd, int out_fd, UniqueFd master, int keeper);
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

  /// Why the caller's shell gets its terminal back.
  enum class Why { stopped, ended };
  /// Before the caller's shell gets its terminal back, in this order:
  /// what the runtime wrote goes to the caller (once stopped, what its pty
  /// holds now; once ended, until the pty's end), for at most kDrainMs,
  /// and what the terminal has not taken by then is dropped; the modes
  /// the runtime's output left switched on are switched off
  /// (TerminalModes::reset); when that output may have asked the terminal
  /// something, a DSR 5 query follows and the caller's input is read, raw
  /// and dropped, until its answer, which a terminal gives after every
  /// earlier one, for at most kSettleMs; then the caller's mode once the
  /// output is transmitted, with the input not yet read discarded
  /// (TCSAFLUSH).
  void hand_back(Why why);
  /// Job control: raw mode again after the supervisor was continued.
  void resume();

  static constexpr int kDrainMs = 500;
  static constexpr int kSettleMs = 500;

 private:
  PtyRelay(int in_fd, int out_fd, UniqueFd master, int keeper);
  void read_input();
  void read_master();
  void flush_to_master();
  void flush_to_out();
  void drain(std::uint64_t end_us, Why why);
  bool write_out(std::string_view bytes, std::uint64_t end_us);
  void read_answers(std::uint64_t end_us);
  Result<void> go_raw();
  void restore_mode();

  static constexpr std::size_t kBuffer = 64 * 1024;
  int in_ = -1, out_ = -1;
  int tty_ = -1;     ///< the caller's terminal whose mode we changed, or -1
  int keeper_ = -1;  ///< the watchdog's socket, or -1
  UniqueFd master_;
  std::optional<termios> saved_;
  bool raw_ = false;
  std::string to_master_, to_out_;
  bool in_eof_ = false, eof_sent_ = false, master_done_ = false;
  TerminalModes modes_;  ///< what the bytes written to out_ did
};

/// The watchdog's half: while the relay has the caller's terminal in raw
/// mode the watchdog holds the terminal and its saved mode, and puts them
/// back when the supervisor is gone without doing it (SIGKILL).
class TerminalKeeper {
 public:
  /// A message of the relay's (PtyRelay's keeper socket) with its fds;
  /// false when it is not one.
  bool take(std::string_view bytes, std::vector<UniqueFd>& fds);
  /// The supervisor is gone: if the terminal was raw, its saved mode at
  /// once (its output may never drain) and the input not yet read
  /// discarded; SIGTTOU is ignored first, for the shell may already have
  /// put the job in the background.
  void restore();

 private:
  UniqueFd tty_;
  std::optional<termios> saved_;
};

}  // namespace ctx::launcher
