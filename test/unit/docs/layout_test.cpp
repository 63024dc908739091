// docs/launcher.md "Where the code lives" is checked against the tree: the
// folders it names exist, the launcher's folders are the ones it lists,
// and every library's meson dependencies point only at earlier layers.
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

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text of the section `## heading` of a markdown page, up to the next
// `## `; empty when there is none.
std::string section(const std::string& md, const std::string& heading) {
  const std::string start = "\n## " + heading + "\n";
  auto a = md.find(start);
  if (a == std::string::npos) return "";
  a += start.size();
  auto b = md.find("\n## ", a);
  return md.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  static const std::regex re(R"([a-z_]+)");
  for (std::sregex_iterator it(s.begin(), s.end(), re), end; it != end; ++it) out.push_back((*it)[0]);
  return out;
}

// What the section says, and what the tree holds.
struct Layout {
  std::string section;                      // the text of "Where the code lives"
  std::set<std::string> dirs;               // folders of the source tree, "launcher/plan"
  std::map<std::string, std::string> meson;  // folder -> its meson.build
};

// The dependencies a meson.build names: every `X_dep` in a
// `dependencies : [...]` list.
std::set<std::string> deps_of(const std::string& meson) {
  std::set<std::string> out;
  static const std::regex list_re(R"(dependencies\s*:\s*\[([^\]]*)\])");
  static const std::regex dep_re(R"(\b([a-z0-9_]+)_dep\b)");
  for (std::sregex_iterator it(meson.begin(), meson.end(), list_re), end; it != end; ++it) {
    const std::string l = (*it)[1];
    for (std::sregex_iterator d(l.begin(), l.end(), dep_re); d != end; ++d) out.insert((*d)[1]);
  }
  return out;
}

// Every way the section and the tree disagree, one line each.
std::vector<std::string> problems(const Layout& in) {
  std::vector<std::string> bad;
  // The layers below the launcher: the first line of the diagram, in
  // order; names between braces share a rank.
  std::string lower_line, launcher_line;
  std::istringstream lines(in.section);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("base <- ", 0) == 0) lower_line = line;
    if (line.rfind("launcher/:", 0) == 0) launcher_line = line.substr(10);
  }
  if (lower_line.empty()) bad.push_back("no diagram line 'base <- ...'");
  if (launcher_line.empty()) bad.push_back("no diagram line 'launcher/: plan <- ...'");
  std::map<std::string, int> rank;  // "access" or "launcher/plan" -> its place
  int r = 0;
  bool braces = false;
  for (std::size_t i = 0; i < lower_line.size();) {
    if (lower_line[i] == '{') braces = true;
    if (lower_line[i] == '}') braces = false, ++r;
    if (std::isalpha(static_cast<unsigned char>(lower_line[i]))) {
      std::size_t j = i;
      while (j < lower_line.size() && (std::isalnum(static_cast<unsigned char>(lower_line[j])) || lower_line[j] == '_')) ++j;
      rank[lower_line.substr(i, j - i)] = braces ? r : r++;
      i = j;
      continue;
    }
    ++i;
  }
  std::vector<std::string> launcher;
  for (const auto& w : words(launcher_line)) {
    launcher.push_back(w);
    rank["launcher/" + w] = r++;
  }
  // Every folder named at the head of a bullet, and in the diagram, exists.
  static const std::regex bullet_re(R"(^- `([a-z_/]+)/`)");
  std::istringstream again(in.section);
  for (std::string line; std::getline(again, line);) {
    std::smatch m;
    if (std::regex_search(line, m, bullet_re) && !in.dirs.count(m[1]) && !rank.count(m[1]))
      bad.push_back(std::string(m[1]) + "/: no such folder");
  }
  for (const auto& [dir, k] : rank)
    if (!in.dirs.count(dir)) bad.push_back(dir + "/: no such folder");
  // The launcher's folders are exactly the diagram's.
  for (const auto& d : in.dirs)
    if (d.rfind("launcher/", 0) == 0 && in.meson.count(d) && !rank.count(d))
      bad.push_back(d + "/: a launcher library the section does not name");
  // Each library depends only on earlier ones.
  for (const auto& [dir, k] : rank) {
    auto m = in.meson.find(dir);
    if (m == in.meson.end()) {
      bad.push_back(dir + "/: no meson.build");
      continue;
    }
    for (const auto& d : deps_of(m->second)) {
      const std::string name = d.rfind("launcher_", 0) == 0 ? "launcher/" + d.substr(9) : d;
      auto o = rank.find(name);
      if (o != rank.end() && o->second >= k)
        bad.push_back(dir + "/meson.build: depends on " + d + "_dep, which is not before it");
    }
  }
  return bad;
}

Layout read_layout(const fs::path& root) {
  Layout in;
  in.section = section(slurp(root / "docs/launcher.md"), "Where the code lives");
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    if (rel.rfind("build", 0) == 0 || rel.rfind(".git", 0) == 0 || rel.rfind("test", 0) == 0) continue;
    if (e.is_directory()) in.dirs.insert(rel);
    if (e.path().filename() == "meson.build") in.meson[fs::relative(e.path().parent_path(), root).string()] = slurp(e.path());
  }
  return in;
}

bool has(const std::vector<std::string>& v, const std::string& line) {
  for (const auto& s : v)
    if (s == line) return true;
  return false;
}

}  // namespace

TEST_CASE(
    "docs/launcher.md: the folders of \"Where the code lives\" exist and each launcher library depends only on earlier "
    "ones",
    "[unit]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  Layout in = read_layout(src);
  REQUIRE(!in.section.empty());
  REQUIRE(in.meson.count("launcher/plan"));
  auto bad = problems(in);
  std::string all;
  for (const auto& b : bad) all += b + "\n";
  INFO(all);
  CHECK(bad.empty());
}

TEST_CASE("the layout check refuses a missing folder and a dependency that points the wrong way", "[unit]") {
  Layout in;
  in.section =
      "```\nbase <- sys <- { mountspec, policy } <- access\nlauncher/:  plan <- records\n```\n\n"
      "- `access/`: rules\n- `launcher/plan/`: plan\n";
  in.dirs = {"base", "sys", "mountspec", "policy", "access", "launcher", "launcher/plan", "launcher/records"};
  in.meson = {{"base", ""},
              {"sys", "x = static_library('s', dependencies : [base_dep, seccomp_dep])"},
              {"mountspec", "dependencies : [base_dep, sys_dep]"},
              {"policy", "dependencies : [base_dep]"},
              {"access", "dependencies : [policy_dep, mountspec_dep, json_dep]"},
              {"launcher/plan", "dependencies : [access_dep]"},
              {"launcher/records", "dependencies : [launcher_plan_dep]"}};
  REQUIRE(problems(in).empty());

  auto with = [&](auto change) {
    Layout b = in;
    change(b);
    return problems(b);
  };
  CHECK(has(with([](Layout& b) { b.meson["launcher/plan"] = "dependencies : [access_dep, launcher_records_dep]"; }),
            "launcher/plan/meson.build: depends on launcher_records_dep, which is not before it"));
  CHECK(has(with([](Layout& b) { b.meson["launcher/records"] = "dependencies : [\n  launcher_records_dep]"; }),
            "launcher/records/meson.build: depends on launcher_records_dep, which is not before it"));
  CHECK(has(with([](Layout& b) { b.meson["policy"] = "dependencies : [mountspec_dep]"; }),
            "policy/meson.build: depends on mountspec_dep, which is not before it"));
  CHECK(has(with([](Layout& b) { b.meson["sys"] = "dependencies : [access_dep]"; }),
            "sys/meson.build: depends on access_dep, which is not before it"));
  CHECK(has(with([](Layout& b) { b.dirs.erase("access"); }), "access/: no such folder"));
  CHECK(has(with([](Layout& b) { b.dirs.erase("launcher/records"); }), "launcher/records/: no such folder"));
  CHECK(has(with([](Layout& b) { b.meson.erase("launcher/records"); }), "launcher/records/: no meson.build"));
  CHECK(has(with([](Layout& b) {
              b.dirs.insert("launcher/extra");
              b.meson["launcher/extra"] = "";
            }),
            "launcher/extra/: a launcher library the section does not name"));
  CHECK(has(with([](Layout& b) { b.section += "- `launcher/gone/`: no\n"; }), "launcher/gone/: no such folder"));
  CHECK(has(with([](Layout& b) { b.section = ""; }), "no diagram line 'base <- ...'"));
}
