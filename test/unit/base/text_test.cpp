#include <catch2/catch.hpp>

#include "base/text.hpp"

TEST_CASE("located errors read like a compiler's", "[unit]") {
  CHECK(ctx::located("coder.d/mount", 3, 2, EINVAL, "target must be an absolute path").msg ==
        "coder.d/mount:3:2: EINVAL: target must be an absolute path");
  CHECK(ctx::located("coder.d/uid", 0, 0, ENOENT, "missing").msg == "coder.d/uid: ENOENT: missing");
  CHECK(ctx::located("f", 4, 0, EINVAL, "x").msg == "f:4: EINVAL: x");
}

TEST_CASE("split_lines accepts strict UTF-8 text", "[unit]") {
  auto r = ctx::split_lines("f", "a\n\nb c\nh\xc3\xa9\n");
  REQUIRE(r);
  REQUIRE(r->size() == 4);
  CHECK((*r)[0].text == "a");
  CHECK((*r)[1].text.empty());
  CHECK((*r)[2].text == "b c");
  CHECK((*r)[2].number == 3);
  CHECK((*r)[3].text == "h\xc3\xa9");
  CHECK(ctx::split_lines("f", "")->empty());
}

TEST_CASE("split_lines refuses what is not strict text", "[unit]") {
  auto msg = [](std::string_view content) { return ctx::split_lines("f", content).error().msg; };
  CHECK(msg(std::string_view("a\nb\0c\n", 6)) == "f:2:2: EINVAL: NUL byte in control file");
  CHECK(msg("a\r\n") == "f:1:2: EINVAL: carriage return in control file (convert CRLF line ends to LF)");
  CHECK(msg("ab") == "f:1:3: EINVAL: missing newline at end of file");
  CHECK(msg("x\n\xff\n") == "f:2:1: EILSEQ: invalid UTF-8");
  CHECK(msg("\xc0\xaf\n") == "f:1:1: EILSEQ: invalid UTF-8");          // overlong '/'
  CHECK(msg("\xed\xa0\x80\n") == "f:1:1: EILSEQ: invalid UTF-8");      // surrogate
  CHECK(msg("\xf4\x90\x80\x80\n") == "f:1:1: EILSEQ: invalid UTF-8");  // > U+10FFFF
  CHECK(msg("\xe2\x82\n") == "f:1:1: EILSEQ: invalid UTF-8");          // truncated
}

TEST_CASE("single_value wants exactly one clean line", "[unit]") {
  CHECK(ctx::single_value("f", "1000\n")->text == "1000");
  auto msg = [](std::string_view content) { return ctx::single_value("f", content).error().msg; };
  CHECK(msg("") == "f: EINVAL: empty file; expected one value");
  CHECK(msg("\n") == "f:1:1: EINVAL: empty value");
  CHECK(msg("1\n2\n") == "f:2:1: EINVAL: expected exactly one value (one line)");
  CHECK(msg(" 1\n") == "f:1:1: EINVAL: leading blank in value");
  CHECK(msg("1 \n") == "f:1:2: EINVAL: trailing blank in value");
}

TEST_CASE("list_items drops blank and comment lines", "[unit]") {
  auto lines = ctx::split_lines("f", "# c\na\n\n b\n#\n");
  auto items = ctx::list_items(*lines);
  REQUIRE(items.size() == 2);
  CHECK(items[0].text == "a");
  CHECK(items[1].text == " b");
  CHECK(items[1].number == 4);
}

TEST_CASE("printable escapes what could forge, hide or reorder text on a terminal", "[unit]") {
  using ctx::printable;
  CHECK(printable("plain path/é ü 日本") == "plain path/é ü 日本");
  CHECK(printable("a\x1b[31mred\x07") == "a\\x1b[31mred\\x07");
  CHECK(printable("line\nforged\r") == "line\\x0aforged\\x0d");
  CHECK(printable("del\x7f") == "del\\x7f");
  // C1 controls (U+0080..U+009F, e.g. the single-byte CSI U+009B).
  CHECK(printable("c1\xc2\x9b"
                  "31m") == "c1\\u{9b}31m");
  // Bidirectional overrides and isolates, and the marks.
  CHECK(printable("evil\xe2\x80\xaetxt.exe") == "evil\\u{202e}txt.exe");
  CHECK(printable("\xe2\x81\xa6x\xe2\x81\xa9") == "\\u{2066}x\\u{2069}");
  CHECK(printable("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c") == "\\u{200e}\\u{200f}\\u{61c}");
  // Bytes that are not UTF-8: each escaped (overlong, surrogate, truncated).
  CHECK(printable("\xff") == "\\xff");
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(printable("\xe2\x80") == "\\xe2\\x80");
}
