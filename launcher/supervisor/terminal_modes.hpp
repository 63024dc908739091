// What a runtime's output did to the caller's terminal (pure: no
// syscalls). The relay feeds it every byte it wrote to the caller's
// terminal; before the shell gets the terminal back it asks what puts the
// terminal back as the shell expects it, and whether the terminal may
// still owe the runtime an answer (docs/security.md, "The terminal").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ctx::launcher {

class TerminalModes {
 public:
  /// Reads bytes as the terminal will: ESC and C1 (raw or UTF-8 encoded)
  /// sequences, split anywhere across calls.
  void feed(std::string_view written);

  /// The bytes that put the terminal back: a sequence left open is
  /// closed (CAN, or ST for a string), then each mode the runtime left
  /// deviating is switched back (alternate screens first: leaving one
  /// restores the cursor's attributes; the attributes last). Only modes
  /// the runtime's own output changed; "" when there are none.
  std::string reset() const;

  /// Whether what was fed since the last forget() can make a terminal
  /// answer: any ESC, ENQ, or byte a terminal of 8-bit controls takes for
  /// a C1 introducer (CSI, DCS, OSC, SOS, PM, APC), even within UTF-8.
  bool may_have_asked() const { return asked_; }

  /// The reset was written: every mode is as the shell expects it, and no
  /// answer is owed.
  void forget();

  /// The DEC private modes tracked, each with the state the shell expects
  /// (true: set). The table docs/security.md describes.
  struct DecMode {
    int number;
    bool normal;  ///< the state the shell expects
    const char* what;
  };
  static const DecMode kDecModes[];
  static const std::size_t kDecModeCount;

 private:
  enum class State { ground, escape, csi, string, string_escape };
  // A control sequence's parameters are read as they come (no buffer, so
  // no length can hide a mode): the first two, whether any is not 0, and
  // which tracked modes appear.
  struct Csi {
    char marker = 0;  ///< '?', '>', '<', '=' or 0
    bool intermediate = false, digits = false, nonzero = false;
    int count = 0, first = 0, second = 0, current = 0;
    std::uint64_t modes = 0;  ///< bit i: kDecModes[i] is among them
  };
  void byte(unsigned char c);
  void start(State s);
  void csi_byte(unsigned char c);
  void end_param();
  void escape_final(unsigned char c);
  void csi_final(unsigned char c);

  State state_ = State::ground;
  unsigned char prev_ = 0;
  char esc_intermediate_ = 0;  ///< ESC ( B and the like: the first of them
  Csi csi_;
  std::uint64_t deviating_ = 0;  ///< bit i: kDecModes[i] is not normal
  bool keypad_ = false;          ///< DECKPAM (ESC =)
  bool attributes_ = false;      ///< SGR other than a reset
  bool modify_keys_ = false;     ///< xterm modifyOtherKeys (CSI > 4 ; n m)
  bool charset_ = false;         ///< G0 is not ASCII (ESC ( 0 and the like)
  bool shifted_ = false;         ///< SO: G1 in use
  int kitty_pushed_ = 0;         ///< kitty keyboard flags pushed (CSI > n u)
  bool asked_ = false;
};

}  // namespace ctx::launcher
