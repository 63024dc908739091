// Terminals: the pty a sandbox gives its runtime (from the sandbox's own
// devpts instance), and the caller's terminal that the supervisor relays.
#pragma once

#include <sys/ioctl.h>
#include <termios.h>

#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// isatty(3), without touching errno for the caller.
bool is_terminal(int fd);

/// Opens a pty master through `ptmx` (the sandbox's /dev/pts/ptmx) and
/// unlocks its peer; O_NOCTTY, close-on-exec.
Result<UniqueFd> open_pty_master(const std::string& ptmx);

/// Opens the master's peer with TIOCGPTPEER (no path lookup, so it is the
/// peer of exactly this master); O_NOCTTY, not close-on-exec.
Result<UniqueFd> open_pty_peer(int master);

/// Makes the terminal fd the caller's controlling terminal (TIOCSCTTY);
/// the caller must be a session leader without one.
Result<void> set_controlling_tty(int fd);

/// setpgid(2): pid (0: the caller) into process group pgid (0: its own).
Result<void> set_process_group(pid_t pid, pid_t pgid);

/// tcsetpgrp(3): pgid becomes the terminal's foreground process group.
Result<void> set_foreground(int tty, pid_t pgid);

/// When tcsetattr changes the mode: at once (TCSANOW), after the output
/// written so far was transmitted (TCSADRAIN), or after that and with the
/// input received but not yet read discarded (TCSAFLUSH).
enum class TermiosWhen { now, drain, flush };

/// tcgetattr / tcsetattr.
Result<termios> get_termios(int fd);
Result<void> set_termios(int fd, const termios& t, TermiosWhen when = TermiosWhen::drain);

/// tcflush(TCIFLUSH): the input received but not yet read is discarded.
Result<void> discard_input(int fd);

/// The raw mode of cfmakeraw(3): bytes pass as typed, no signals from
/// keys, no echo (the runtime's own terminal does all that).
termios raw_termios(termios t);

/// TIOCGWINSZ / TIOCSWINSZ.
Result<winsize> get_window_size(int fd);
Result<void> set_window_size(int fd, const winsize& w);

}  // namespace ctx::sys
