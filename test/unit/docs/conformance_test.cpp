// docs/conformance.md is checked, not trusted (issue 15, point 7): every
// statement S1..S265 once, citing a heading of docs/abi.md, a status of
// four, the tests a `tested` row names
// exist as TEST_CASEs under test/, the heading a `decided` row names exists,
// the counts line is what the rows say, and no row is `open` unless
// CTX_CONFORMANCE_ALLOW_OPEN=1 (which CI never sets).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/tempdir.hpp"

namespace {

namespace fs = std::filesystem;

// The names of the TEST_CASEs defined in C++ text (the first string
// literal after the macro's parenthesis, escapes undone).
std::set<std::string> test_case_names(const std::string& text) {
  std::set<std::string> out;
  static const std::regex re(R"(\bTEST_CASE\s*\(\s*"((?:[^"\\\n]|\\.)*)\")");
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
    std::string raw = (*it)[1], name;
    for (std::size_t i = 0; i < raw.size(); ++i) name += (raw[i] == '\\' && i + 1 < raw.size()) ? raw[++i] : raw[i];
    out.insert(name);
  }
  return out;
}

std::set<std::string> all_test_cases(const fs::path& test_dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(test_dir))
    if (e.is_regular_file() && e.path().extension() == ".cpp") out.merge(test_case_names(ctx::test::slurp(e.path())));
  return out;
}

// The cells of a table row "| a | b \| c | d |", "\|" kept as "|".
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cur += '|';
      ++i;
    } else if (line[i] == '|') {
      auto b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
      cur.clear();
    } else {
      cur += line[i];
    }
  }
  return out;
}

// The code spans of s: `name`, or `` name `` for a name that holds a
// backtick.
std::vector<std::string> backticked(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t a = s.find('`'); a != std::string::npos; a = s.find('`', a)) {
    const bool dbl = s.compare(a, 3, "`` ") == 0;
    const std::string close = dbl ? " ``" : "`";
    const std::size_t from = a + (dbl ? 3 : 1);
    std::size_t b = s.find(close, from);
    if (b == std::string::npos) break;
    out.push_back(s.substr(from, b - from));
    a = b + close.size();
  }
  return out;
}

// The headings (text after the #s) of a markdown file.
std::set<std::string> headings(const std::string& md) {
  std::set<std::string> out;
  std::istringstream in(md);
  static const std::regex re(R"(^#+ (.*\S)\s*$)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_match(line, m, re)) out.insert(m[1]);
  return out;
}

struct Inputs {
  std::string page;                         // docs/conformance.md
  std::set<std::string> tests;              // every TEST_CASE name
  std::map<std::string, std::string> docs;  // docs/<file>.md -> text
  bool allow_open = false;
  int statements = 265;
};

// Every way the page is wrong, one line each; empty when it is right.
std::vector<std::string> problems(const Inputs& in) {
  std::vector<std::string> bad;
  static const std::set<std::string> kStatus = {"tested", "decided", "n/a", "open"};
  static const std::regex id_re(R"(S([0-9]+))");
  static const std::regex counts_re(
      R"(Counts: total ([0-9]+); tested ([0-9]+); decided ([0-9]+); n/a ([0-9]+); open ([0-9]+)\.)");
  static const std::regex decision_re(R"(docs/([A-Za-z0-9_-]+\.md)#(.+))");
  static const std::string kAbi = "docs/abi.md#";
  std::map<int, int> seen;
  std::map<std::string, int> count;
  std::vector<int> counts_line;
  std::istringstream lines(in.page);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, counts_re)) {
      if (!counts_line.empty()) bad.push_back("two counts lines");
      for (int i = 1; i <= 5; ++i) counts_line.push_back(std::stoi(m[i]));
      continue;
    }
    if (line.rfind("| S", 0) != 0) continue;
    auto c = cells(line);
    if (c.size() != 7) {
      bad.push_back(line.substr(0, 12) + ": " + std::to_string(c.size()) + " cells, want 7");
      continue;
    }
    const std::string &id = c[0], &abi = c[1], &status = c[3], &proof = c[5];
    if (!std::regex_match(id, m, id_re)) {
      bad.push_back("bad ID '" + id + "'");
      continue;
    }
    ++seen[std::stoi(m[1])];
    if (abi.rfind(kAbi, 0) != 0)
      bad.push_back(id + ": the ABI cell '" + abi + "' is not " + kAbi + "<heading>");
    else if (!in.docs.count("abi.md") || !headings(in.docs.at("abi.md")).count(abi.substr(kAbi.size())))
      bad.push_back(id + ": docs/abi.md has no heading '" + abi.substr(kAbi.size()) + "'");
    if (!kStatus.count(status)) {
      bad.push_back(id + ": status '" + status + "' is not tested, decided, n/a or open");
      continue;
    }
    ++count[status];
    if (status == "tested") {
      auto names = backticked(proof);
      if (names.empty()) bad.push_back(id + ": tested, but names no test");
      for (const auto& n : names)
        if (!in.tests.count(n)) bad.push_back(id + ": no TEST_CASE \"" + n + "\" under test/");
    } else if (status == "decided") {
      std::smatch d;
      if (!std::regex_match(proof, d, decision_re)) {
        bad.push_back(id + ": decided, but '" + proof + "' is not docs/<file>.md#<heading>");
      } else if (!in.docs.count(d[1])) {
        bad.push_back(id + ": no docs/" + std::string(d[1]));
      } else if (!headings(in.docs.at(d[1])).count(d[2])) {
        bad.push_back(id + ": docs/" + std::string(d[1]) + " has no heading '" + std::string(d[2]) + "'");
      }
    } else if (status == "open" && !in.allow_open) {
      bad.push_back(id + ": open (" + c[6] + ")");
    }
  }
  for (const auto& [n, k] : seen) {
    if (n < 1 || n > in.statements) bad.push_back("S" + std::to_string(n) + " is not a statement");
    if (k > 1) bad.push_back("S" + std::to_string(n) + " appears " + std::to_string(k) + " times");
  }
  for (int n = 1; n <= in.statements; ++n)
    if (!seen.count(n)) bad.push_back("S" + std::to_string(n) + " is missing");
  int rows = 0;
  for (const auto& [n, k] : seen) rows += k;
  std::vector<int> want = {rows, count["tested"], count["decided"], count["n/a"], count["open"]};
  if (counts_line.empty()) {
    bad.push_back("no line 'Counts: total N; tested N; decided N; n/a N; open N.'");
  } else if (counts_line != want) {
    std::ostringstream s;
    s << "the counts line says total " << counts_line[0] << "; tested " << counts_line[1] << "; decided "
      << counts_line[2] << "; n/a " << counts_line[3] << "; open " << counts_line[4] << ", the rows say total "
      << want[0] << "; tested " << want[1] << "; decided " << want[2] << "; n/a " << want[3] << "; open " << want[4];
    bad.push_back(s.str());
  }
  return bad;
}

std::string source_root() {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  return src;
}

bool has(const std::vector<std::string>& v, const std::string& part) {
  for (const auto& s : v)
    if (s.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE(
    "docs/conformance.md: every statement is tested, decided, n/a or open, and the tests and headings it names exist",
    "[unit]") {
  const fs::path root = source_root();
  Inputs in;
  in.page = ctx::test::slurp(root / "docs/conformance.md");
  REQUIRE(!in.page.empty());
  in.tests = all_test_cases(root / "test");
  for (const auto& e : fs::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") in.docs[e.path().filename().string()] = ctx::test::slurp(e.path());
  const char* allow = std::getenv("CTX_CONFORMANCE_ALLOW_OPEN");
  in.allow_open = allow != nullptr && std::string(allow) == "1";
  auto bad = problems(in);
  std::string all;
  for (const auto& b : bad) all += b + "\n";
  INFO(all);
  CHECK(bad.empty());
}

TEST_CASE("the conformance check refuses each way the page can be wrong", "[unit]") {
  // A crafted page of three statements, and the same page broken one way
  // at a time: the check above is not vacuous.
  Inputs in;
  in.statements = 3;
  in.tests = test_case_names(
      "TEST_CASE(\"a; b\", \"[unit]\") {}\nTEST_CASE(\n  \"say \\\"c\\\"\", \"[root]\") {}\nTEST_CASE(\"d `e`\") {}\n");
  REQUIRE(in.tests == std::set<std::string>{"a; b", "say \"c\"", "d `e`"});
  in.docs["x.md"] = "# X\n\n## Why `y` | z\n";
  in.docs["abi.md"] = "# ABI\n\n## Agents\n\n### The `root`\n";
  const std::string head = "Counts: total 3; tested 1; decided 1; n/a 1; open 0.\n\n| ID | Seed | S | Status |\n";
  const std::string r1 = "| S1 | docs/abi.md#Agents | one | tested | a.cpp (f) | `a; b`; `say \"c\"`; `` d `e` `` |  |\n";
  const std::string r2 = "| S2 | docs/abi.md#The `root` | two \\| more | decided | b.cpp | docs/x.md#Why `y` \\| z | because |\n";
  const std::string r3 = "| S3 | docs/abi.md#Agents | three | n/a | none |  | nothing to do |\n";
  in.page = head + r1 + r2 + r3;
  REQUIRE(problems(in).empty());

  auto with = [&](const std::string& page) {
    Inputs b = in;
    b.page = page;
    return problems(b);
  };
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  CHECK(has(with(replace(in.page, "| tested |", "| done |")), "S1: status 'done'"));
  CHECK(has(with(replace(in.page, "| docs/abi.md#Agents | one", "| 000 L1 | one")),
            "S1: the ABI cell '000 L1' is not docs/abi.md#<heading>"));
  CHECK(has(with(replace(in.page, "#The `root`", "#The root")), "S2: docs/abi.md has no heading 'The root'"));
  CHECK(has(with(replace(in.page, "`a; b`; `say \"c\"`; `` d `e` ``", "")), "S1: tested, but names no test"));
  CHECK(has(with(replace(in.page, "`` d `e` ``", "`` d `f` ``")), "S1: no TEST_CASE \"d `f`\""));
  CHECK(has(with(replace(in.page, "`a; b`", "`a b`")), "S1: no TEST_CASE \"a b\""));
  CHECK(has(with(replace(in.page, "docs/x.md#Why", "docs/y.md#Why")), "S2: no docs/y.md"));
  CHECK(has(with(replace(in.page, "#Why `y`", "#Why `w`")), "S2: docs/x.md has no heading"));
  CHECK(has(with(replace(in.page, "docs/x.md#Why `y` \\| z", "see docs")), "S2: decided, but"));
  CHECK(has(with(head + r1 + r3), "S2 is missing"));
  CHECK(has(with(in.page + r3), "S3 appears 2 times"));
  CHECK(has(with(in.page + replace(r3, "S3", "S4")), "S4 is not a statement"));
  CHECK(has(with(replace(in.page, "tested 1;", "tested 2;")), "the counts line says total 3; tested 2"));
  CHECK(has(with(replace(in.page, "Counts:", "Count:")), "no line 'Counts:"));
  CHECK(has(with(replace(in.page, "| one | tested |", "| one | open |")), "the rows say"));
  const std::string opened =
      replace(replace(in.page, "tested 1; decided 1; n/a 1; open 0", "tested 0; decided 1; n/a 1; open 1"),
              "| one | tested |", "| one | open |");
  CHECK(has(with(opened), "S1: open"));
  Inputs allowed = in;
  allowed.page = opened;
  allowed.allow_open = true;
  CHECK(problems(allowed).empty());
  CHECK(has(with(replace(in.page, "| nothing to do |", "|")), "6 cells, want 7"));
}
