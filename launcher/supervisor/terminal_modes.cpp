#include "launcher/supervisor/terminal_modes.hpp"

#include <algorithm>

namespace ctx::launcher {

// Alternate screens first: leaving one restores the cursor saved on entry
// (with its attributes and character set, reset after them).
const TerminalModes::DecMode TerminalModes::kDecModes[] = {
    {1049, false, "alternate screen, cursor saved"},
    {1047, false, "alternate screen"},
    {47, false, "alternate screen (old form)"},
    {9, false, "mouse reporting (X10)"},
    {1000, false, "mouse reporting (buttons)"},
    {1001, false, "mouse reporting (highlight)"},
    {1002, false, "mouse reporting (motion while pressed)"},
    {1003, false, "mouse reporting (all motion)"},
    {1004, false, "focus reporting"},
    {1005, false, "mouse encoding (UTF-8)"},
    {1006, false, "mouse encoding (SGR)"},
    {1015, false, "mouse encoding (urxvt)"},
    {1016, false, "mouse encoding (SGR pixels)"},
    {1, false, "application cursor keys"},
    {66, false, "application keypad (DECNKM)"},
    {2004, false, "bracketed paste"},
    {2026, false, "synchronized output"},
    {7, true, "auto-wrap"},
    {25, true, "visible cursor"},
};
const std::size_t TerminalModes::kDecModeCount = sizeof kDecModes / sizeof kDecModes[0];

namespace {

constexpr unsigned char kEsc = 0x1b;
constexpr int kMaxParam = 1 << 20;  ///< larger numbers saturate here
constexpr int kMaxKittyPushes = 1000;

}  // namespace

void TerminalModes::feed(std::string_view written) {
  for (char c : written) byte(static_cast<unsigned char>(c));
}

void TerminalModes::start(State s) {
  state_ = s;
  esc_intermediate_ = 0;
  csi_ = Csi{};
}

void TerminalModes::byte(unsigned char c) {
  // A C1 control is a byte 0x80-0x9f on its own, or U+0080-U+009F in
  // UTF-8 (0xc2 first); elsewhere such a byte continues a character.
  const bool c1 = c >= 0x80 && c <= 0x9f && (prev_ < 0x80 || prev_ == 0xc2);
  prev_ = c;
  // A terminal that takes 8-bit controls reads every such byte as one,
  // whatever came before: for the answers, assume it does.
  if (c == 0x9b || c == 0x90 || c == 0x98 || c == 0x9d || c == 0x9e || c == 0x9f) asked_ = true;
  // Anywhere: CAN and SUB abort a sequence, ESC and the C1 introducers
  // start one, and the terminal may answer any of them.
  if (c == 0x18 || c == 0x1a) return start(State::ground);
  if (c == kEsc) {
    asked_ = true;
    return start(state_ == State::string ? State::string_escape : State::escape);
  }
  if (c1) {
    if (c == 0x9c && (state_ == State::string || state_ == State::string_escape)) return start(State::ground);
    if (c == 0x9b || c == 0x90 || c == 0x98 || c == 0x9d || c == 0x9e || c == 0x9f)
      start(c == 0x9b ? State::csi : State::string);
    return;
  }
  switch (state_) {
    case State::ground:
      if (c == 0x05) asked_ = true;  // ENQ: the answerback message
      if (c == 0x0e) shifted_ = true;
      if (c == 0x0f) shifted_ = false;
      return;
    case State::string:
      if (c == 0x07) start(State::ground);  // BEL ends an OSC string
      return;
    case State::string_escape:
      if (c == '\\') return start(State::ground);
      state_ = State::escape;
      return escape_final(c);
    case State::escape: return escape_final(c);
    case State::csi: return csi_byte(c);
  }
}

void TerminalModes::csi_byte(unsigned char c) {
  if (c >= 0x3c && c <= 0x3f && !csi_.digits && csi_.count == 0 && csi_.marker == 0 && !csi_.intermediate) {
    csi_.marker = static_cast<char>(c);
  } else if (c >= '0' && c <= '9') {
    csi_.digits = true;
    csi_.current = std::min(kMaxParam, csi_.current * 10 + (c - '0'));
  } else if (c == ';' || c == ':') {
    csi_.digits = true;
    end_param();
  } else if (c >= 0x20 && c <= 0x2f) {
    csi_.intermediate = true;
  } else if (c >= 0x40 && c <= 0x7e) {
    if (csi_.digits) end_param();
    state_ = State::ground;
    csi_final(c);
  }
}

void TerminalModes::end_param() {
  if (csi_.count == 0) csi_.first = csi_.current;
  if (csi_.count == 1) csi_.second = csi_.current;
  if (csi_.count < kMaxParam) ++csi_.count;
  if (csi_.current != 0) csi_.nonzero = true;
  for (std::size_t i = 0; i < kDecModeCount; ++i)
    if (kDecModes[i].number == csi_.current) csi_.modes |= std::uint64_t{1} << i;
  csi_.current = 0;
}

void TerminalModes::escape_final(unsigned char c) {
  if (c >= 0x20 && c <= 0x2f) {  // an intermediate: ESC ( 0 and the like
    if (esc_intermediate_ == 0) esc_intermediate_ = static_cast<char>(c);
    return;
  }
  const char intermediate = esc_intermediate_;
  start(State::ground);
  if (intermediate == '(') charset_ = c != 'B';  // G0: anything but ASCII
  if (intermediate != 0) return;
  switch (c) {
    case '[': start(State::csi); return;
    case ']':
    case 'P':
    case 'X':
    case '^':
    case '_': start(State::string); return;
    case '=': keypad_ = true; return;
    case '>': keypad_ = false; return;
    case 'c': {  // RIS: the terminal resets itself
      const bool asked = asked_;
      forget();
      asked_ = asked;
      return;
    }
    default: return;
  }
}

void TerminalModes::csi_final(unsigned char c) {
  if (csi_.intermediate) return;
  switch (csi_.marker) {
    case '?':
      if (c != 'h' && c != 'l' && c != 'r') return;
      for (std::size_t i = 0; i < kDecModeCount; ++i) {
        const std::uint64_t bit = std::uint64_t{1} << i;
        if ((csi_.modes & bit) == 0) continue;
        // XTRESTORE ('r') sets a mode to what it was saved as: assume the
        // worst.
        const bool deviates = c == 'r' || (c == 'h') != kDecModes[i].normal;
        deviating_ = deviates ? deviating_ | bit : deviating_ & ~bit;
      }
      return;
    case '>':
      if (c == 'm' && csi_.count >= 1 && csi_.first == 4) modify_keys_ = csi_.count >= 2 && csi_.second != 0;
      if (c == 'u') kitty_pushed_ = std::min(kMaxKittyPushes, kitty_pushed_ + 1);
      return;
    case '<':
      if (c == 'u') kitty_pushed_ = std::max(0, kitty_pushed_ - std::max(1, csi_.count >= 1 ? csi_.first : 1));
      return;
    case 0:
      if (c == 'm') attributes_ = csi_.nonzero;
      return;
    default: return;
  }
}

std::string TerminalModes::reset() const {
  std::string out;
  switch (state_) {
    case State::ground: break;
    case State::escape:
    case State::csi: out += '\x18'; break;
    case State::string:
    case State::string_escape: out += "\x1b\\"; break;
  }
  for (std::size_t i = 0; i < kDecModeCount; ++i)
    if ((deviating_ & (std::uint64_t{1} << i)) != 0)
      out += "\x1b[?" + std::to_string(kDecModes[i].number) + (kDecModes[i].normal ? "h" : "l");
  if (keypad_) out += "\x1b>";
  if (modify_keys_) out += "\x1b[>4;0m";
  if (kitty_pushed_ > 0) out += "\x1b[<" + std::to_string(kitty_pushed_) + "u";
  if (shifted_) out += '\x0f';
  if (charset_) out += "\x1b(B";
  if (attributes_) out += "\x1b[0m";
  return out;
}

void TerminalModes::forget() {
  start(State::ground);
  deviating_ = 0;
  keypad_ = attributes_ = modify_keys_ = charset_ = shifted_ = asked_ = false;
  kitty_pushed_ = 0;
}

}  // namespace ctx::launcher
