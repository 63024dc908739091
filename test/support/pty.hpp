// A command run in a fresh pty, as a person at a terminal would run it:
// the test types into the master and reads what the terminal shows.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "test/support/launch.hpp"

namespace ctx::test {

class PtySession {
 public:
  /// Runs argv as the session leader of a new pty (its controlling
  /// terminal, 0-2), optionally as `as`, with env, at rows x cols.
  PtySession(const std::vector<std::string>& argv, std::optional<TestUser> as, const std::vector<std::string>& env,
             int rows = 24, int cols = 80);
  ~PtySession();
  PtySession(const PtySession&) = delete;
  PtySession& operator=(const PtySession&) = delete;

  /// Types text.
  void type(const std::string& text);
  /// Answers as a terminal does: each time `query` appears in what the
  /// terminal shows, `reply` is typed delay_ms later (a terminal's answer
  /// comes late over a slow link), in the order the queries came. From
  /// then on the test process runs as a real-time task where it may (root),
  /// its children forked later as ordinary ones, so that delay_ms is how
  /// late the answer is even on a loaded machine.
  void answer(const std::string& query, const std::string& reply, int delay_ms);
  /// Reads (and answers) for ms.
  void idle(int ms);
  /// Reads until `text` has appeared after the mark (see mark()); false on
  /// timeout or when the terminal closed first.
  bool wait_for(const std::string& text, int timeout_ms = 10000);
  /// Forgets what was read so far for wait_for.
  void mark() { from_ = out_.size(); }
  /// Everything the terminal showed.
  const std::string& output() const { return out_; }
  /// What the terminal showed after the mark.
  std::string since_mark() const { return out_.substr(std::min(from_, out_.size())); }
  /// The session leader's exit code (128+signal), waiting up to timeout_ms;
  /// -1 on timeout.
  int wait_exit(int timeout_ms = 20000);
  /// The pty's slave path, for looking at the terminal from outside.
  const std::string& slave() const { return slave_path_; }
  pid_t pid() const { return pid_; }

 private:
  void pump(int timeout_ms);
  void scan_queries();
  void type_due_answers();
  struct Answer {
    std::string query, reply;
    int delay_ms;
    std::size_t scanned;
  };
  std::vector<Answer> answers_;
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> due_;
  [[noreturn]] void run_child(const std::vector<std::string>& argv, std::optional<TestUser> as,
                              const std::vector<std::string>& env);
  int master_ = -1;
  int held_slave_ = -1;
  pid_t pid_ = -1;
  std::string slave_path_;
  std::string out_;
  std::size_t from_ = 0;
  bool closed_ = false;
  bool realtime_ = false;                ///< this session keeps the test process real-time
  static inline int realtime_sessions_ = 0;  ///< how many do
};

}  // namespace ctx::test
