// What a runtime's output did to the caller's terminal, and what puts it
// back (launcher/supervisor/terminal_modes.hpp).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "launcher/supervisor/terminal_modes.hpp"

using ctx::launcher::TerminalModes;

namespace {

std::string reset_after(const std::string& written) {
  TerminalModes m;
  m.feed(written);
  return m.reset();
}

}  // namespace

TEST_CASE("terminal modes: plain text switches nothing on and asks nothing", "[unit]") {
  TerminalModes m;
  m.feed("hello\r\nwörld \xe2\x80\x99 quote\t\x07\n");
  CHECK(m.reset().empty());
  CHECK_FALSE(m.may_have_asked());
}

TEST_CASE("terminal modes: what is switched on is switched off, alternate screens first", "[unit]") {
  CHECK(reset_after("\x1b[?1000h\x1b[?1049h") == "\x1b[?1049l\x1b[?1000l");
  CHECK(reset_after("\x1b[?2004;1;1006h") == "\x1b[?1006l\x1b[?1l\x1b[?2004l");
  CHECK(reset_after("\x1b[?1000h\x1b[?1000l") == "");
  CHECK(reset_after("\x1b[?25l\x1b[?7l") == "\x1b[?7h\x1b[?25h");
  CHECK(reset_after("\x1b[?25h") == "");
  CHECK(reset_after("\x1b=\x1b[1;31m") == "\x1b>\x1b[0m");
  CHECK(reset_after("\x1b[1;31mred\x1b[0m") == "");
  CHECK(reset_after("\x1b(0qqq") == "\x1b(B");
  CHECK(reset_after("\x0e") == "\x0f");
  CHECK(reset_after("\x1b[>4;2m\x1b[>1u\x1b[>1u") == "\x1b[>4;0m\x1b[<2u");
  CHECK(reset_after("\x1b[>1u\x1b[<u") == "");
  CHECK(reset_after("\x1b[?2026h") == "\x1b[?2026l");
}

TEST_CASE("terminal modes: no way of writing a mode hides it", "[unit]") {
  // Split anywhere across writes.
  TerminalModes m;
  for (char c : std::string("\x1b[?1049h")) m.feed(std::string(1, c));
  CHECK(m.reset() == "\x1b[?1049l");
  // C1 CSI, raw and in UTF-8.
  CHECK(reset_after("\x9b?1000h") == "\x1b[?1000l");
  CHECK(reset_after("\xc2\x9b?1000h") == "\x1b[?1000l");
  // A parameter list longer than any buffer.
  std::string many;
  for (int i = 0; i < 5000; ++i) many += "1;";
  CHECK(reset_after("\x1b[?" + many + "1003h") == "\x1b[?1003l\x1b[?1l");
  // XTRESTORE may switch a mode on.
  CHECK(reset_after("\x1b[?1000r") == "\x1b[?1000l");
  // A UTF-8 character whose second byte is 0x9b is text.
  CHECK(reset_after("\xe2\x9b\x84?1000h") == "");
}

TEST_CASE("terminal modes: a sequence left open is closed first", "[unit]") {
  CHECK(reset_after("\x1b[?1000h\x1b[?10") == "\x18\x1b[?1000l");
  CHECK(reset_after("\x1b]52;c;") == "\x1b\\");
  CHECK(reset_after("\x1bP$q") == "\x1b\\");
  CHECK(reset_after("\x1b]0;title\x07") == "");
  CHECK(reset_after("\x1b]0;title\x1b\\") == "");
  CHECK(reset_after("\x1b") == "\x18");
}

TEST_CASE("terminal modes: what may make a terminal answer", "[unit]") {
  for (const char* asks : {"\x1b[6n", "\x05", "\x1b[c", "\2336n", "\302\2336n", "\351\2336n", "\x1bP+q544e\x1b\\"}) {
    TerminalModes m;
    m.feed(asks);
    INFO(asks);
    CHECK(m.may_have_asked());
    m.forget();
    CHECK_FALSE(m.may_have_asked());
  }
}

TEST_CASE("terminal modes: a reset terminal and a forgotten one need nothing", "[unit]") {
  CHECK(reset_after("\x1b[?1000h\x1b[?1049h\x1b[1m\033c") == "");
  TerminalModes m;
  m.feed("\x1b[?1000h\x1b[?10");
  m.forget();
  CHECK(m.reset().empty());
  m.feed("h");  // the rest of the sequence after a forget() is text
  CHECK(m.reset().empty());
}

// docs/security.md lists, in "The terminal", every DEC private mode the
// relay switches off, in the order it does.
TEST_CASE("the mode table of docs/security.md matches the code's", "[unit]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  std::ifstream in(std::string(src) + "/docs/security.md");
  REQUIRE(in);
  std::vector<int> documented;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("### ", 0) == 0 || line.rfind("## ", 0) == 0) in_section = line == "### The terminal";
    if (!in_section) continue;
    for (std::size_t p = line.find("`?"); p != std::string::npos; p = line.find("`?", p + 1)) {
      std::size_t q = line.find('`', p + 2);
      std::string n = line.substr(p + 2, q - p - 2);
      if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos) documented.push_back(std::stoi(n));
    }
  }
  std::vector<int> code;
  for (std::size_t i = 0; i < TerminalModes::kDecModeCount; ++i) code.push_back(TerminalModes::kDecModes[i].number);
  CHECK(documented == code);
}
