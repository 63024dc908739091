#include "mountspec/table.hpp"

#include <map>
#include <optional>

#include "base/path.hpp"
#include "base/text.hpp"

namespace ctx::mountspec {

std::string_view mode_name(const Attrs& a) { return a.rdonly ? "ro" : "rw"; }

bool parse_mode(std::string_view field, Attrs& a) {
  if (field != "ro" && field != "rw") return false;
  a.rdonly = field == "ro";
  return true;
}

std::string_view to_string(Kind k) {
  switch (k) {
    case Kind::bind: return "bind";
    case Kind::rbind: return "rbind";
  }
  return "?";
}

std::optional<OptionIssue> parse_options(std::string_view f, Options& out) {
  out = Options{};
  if (f == "-") return std::nullopt;
  if (f.empty()) return OptionIssue{0, "options field is empty; write '-' for no option"};
  bool seen_bind = false, seen_rbind = false;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = f.find(',', start);
    std::string_view o = f.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto once = [&](bool& flag) -> std::optional<OptionIssue> {
      if (flag) return OptionIssue{start, "option '" + std::string(o) + "' repeated"};
      flag = true;
      return std::nullopt;
    };
    std::optional<OptionIssue> issue;
    if (o.empty()) {
      issue = OptionIssue{start, "empty option (stray ',')"};
    } else if (o == "-") {
      issue = OptionIssue{start, "'-' must stand alone (it means no option)"};
    } else if (o == "bind") {
      issue = once(seen_bind);
    } else if (o == "rbind") {
      issue = once(seen_rbind);
    } else if (o == "nosuid") {
      issue = once(out.attrs.nosuid);
    } else if (o == "nodev") {
      issue = once(out.attrs.nodev);
    } else if (o == "noexec") {
      issue = once(out.attrs.noexec);
    } else {
      issue = OptionIssue{start,
                          "unknown option '" + printable(o) + "' (v0 options: bind, rbind, nosuid, nodev, noexec, -)"};
    }
    if (issue) return issue;
    if (seen_bind && seen_rbind) return OptionIssue{start, "bind and rbind are mutually exclusive"};
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (seen_rbind) out.kind = Kind::rbind;
  if (seen_bind) out.kind = Kind::bind;
  return std::nullopt;
}

Result<Table> parse(std::string_view file, std::string_view content, std::vector<Error>* all) {
  std::vector<Error> errors;
  Table table;
  auto lines = split_lines(file, content);
  if (!lines) {
    if (all != nullptr) all->push_back(lines.error());
    return fail(lines.error());
  }
  std::map<std::string, int> targets;
  for (const Line& l : list_items(*lines)) {
    auto err = [&](std::string_view part_or_empty, std::size_t offset, int code, const std::string& what) {
      int col = part_or_empty.data() == nullptr ? 0 : column_of(l.text, part_or_empty) + static_cast<int>(offset);
      errors.push_back(located(file, l.number, col, code, what));
    };
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    while (true) {
      std::size_t tab = l.text.find('\t', start);
      fields.push_back(l.text.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    if (fields.size() != 4) {
      std::string what =
          "expected 4 TAB-separated fields (source, target, mode, options), found " + std::to_string(fields.size());
      err(fields.size() > 4 ? fields[4] : l.text, 0, EINVAL, what);
      continue;
    }
    Entry e;
    e.line = l.number;
    bool ok = true;
    const char* names[] = {"source", "target"};
    for (int i = 0; i < 2; ++i) {
      if (auto issue = abs_path_issue(fields[static_cast<std::size_t>(i)])) {
        std::string what = std::string(names[i]) + ": " + issue->what;
        if (issue->what == "path must be absolute (start with '/')")
          what = std::string(names[i]) + " must be an absolute path";
        err(fields[static_cast<std::size_t>(i)], issue->offset, EINVAL, what);
        ok = false;
      }
    }
    e.source = std::string(fields[0]);
    e.target = std::string(fields[1]);
    if (ok && e.target == "/") {
      err(fields[1], 0, EINVAL,
          "target must not be / (a mount over the whole root); set the root control file instead");
      ok = false;
    }
    if (!parse_mode(fields[2], e.attrs)) {
      err(fields[2], 0, EINVAL, "mode must be ro or rw, not '" + std::string(fields[2]) + "'");
      ok = false;
    }
    Options opts;
    if (auto issue = parse_options(fields[3], opts)) {
      err(fields[3], issue->offset, EINVAL, issue->what);
      ok = false;
    }
    e.kind = opts.kind.value_or(Kind::bind);
    e.attrs = e.attrs | opts.attrs;  // the mode's rdonly, the options' flags
    if (!ok) continue;
    auto [it, inserted] = targets.emplace(e.target, l.number);
    if (!inserted) {
      err(fields[1], 0, EINVAL, "target " + e.target + " already mounted at line " + std::to_string(it->second));
      continue;
    }
    table.push_back(std::move(e));
  }
  if (!errors.empty()) {
    if (all != nullptr) all->insert(all->end(), errors.begin(), errors.end());
    return fail(errors.front());
  }
  return table;
}

std::string format_entry(const Entry& e) {
  std::string opts;
  auto add = [&](std::string_view o) {
    if (!opts.empty()) opts += ',';
    opts += o;
  };
  add(to_string(e.kind));
  if (e.attrs.nosuid) add("nosuid");
  if (e.attrs.nodev) add("nodev");
  if (e.attrs.noexec) add("noexec");
  return e.source + "\t" + e.target + "\t" + std::string(mode_name(e.attrs)) + "\t" + opts;
}

std::string format_table(const Table& t) {
  std::string out;
  for (const auto& e : t) out += format_entry(e) + "\n";
  return out;
}

}  // namespace ctx::mountspec
