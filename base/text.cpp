#include "base/text.hpp"

#include <cstdint>
#include <cstdio>

#include "base/text_core.hpp"

namespace ctx {

Error located(std::string_view file, int line, int col, int code, std::string_view text) {
  std::string m(file);
  if (line > 0) {
    m += ':' + std::to_string(line);
    if (col > 0) m += ':' + std::to_string(col);
  }
  m += ": ";
  m += errno_name(code);
  m += ": ";
  m += text;
  return Error{code, std::move(m)};
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_len(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<std::uint8_t>(s[k]); };
  std::uint8_t c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1Fu;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0Fu;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

Result<std::vector<Line>> split_lines(std::string_view file, std::string_view content) {
  std::vector<Line> lines;
  int number = 1;
  std::size_t start = 0;
  for (std::size_t i = 0; i < content.size();) {
    char c = content[i];
    int col = static_cast<int>(i - start) + 1;
    if (c == '\0') return fail(located(file, number, col, EINVAL, "NUL byte in control file"));
    if (c == '\r')
      return fail(located(file, number, col, EINVAL, "carriage return in control file (convert CRLF line ends to LF)"));
    if (c == '\n') {
      lines.push_back(Line{content.substr(start, i - start), number});
      ++number;
      start = ++i;
      continue;
    }
    std::size_t n = utf8_len(content, i);
    if (n == 0) return fail(located(file, number, col, EILSEQ, "invalid UTF-8"));
    i += n;
  }
  if (start != content.size())
    return fail(
        located(file, number, static_cast<int>(content.size() - start) + 1, EINVAL, "missing newline at end of file"));
  return lines;
}

std::vector<Line> list_items(const std::vector<Line>& lines) {
  std::vector<Line> out;
  for (const Line& l : lines)
    if (!l.text.empty() && l.text.front() != '#') out.push_back(l);
  return out;
}

Result<Line> single_value(std::string_view file, std::string_view content) {
  CTX_TRY_ASSIGN(std::vector<Line> lines, split_lines(file, content));
  if (lines.empty()) return fail(located(file, 0, 0, EINVAL, "empty file; expected one value"));
  if (lines.size() > 1) return fail(located(file, 2, 1, EINVAL, "expected exactly one value (one line)"));
  const Line& l = lines.front();
  if (l.text.empty()) return fail(located(file, 1, 1, EINVAL, "empty value"));
  if (l.text.front() == ' ' || l.text.front() == '\t')
    return fail(located(file, 1, 1, EINVAL, "leading blank in value"));
  if (l.text.back() == ' ' || l.text.back() == '\t')
    return fail(located(file, 1, static_cast<int>(l.text.size()), EINVAL, "trailing blank in value"));
  return l;
}

int column_of(std::string_view line, std::string_view part) { return static_cast<int>(part.data() - line.data()) + 1; }

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  text::printable_to(s.data(), s.size(), [&](const char* p, std::size_t n) { out.append(p, n); });
  return out;
}

}  // namespace ctx
