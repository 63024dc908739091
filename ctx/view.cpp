#include "ctx/view.hpp"

#include "base/text.hpp"

namespace ctx::helper {

namespace {

using nlohmann::json;
using view::HostEntry;

json node(const view::Viewer& v, const view::HostTree& t, const std::string& rel, const std::string& name,
          const view::Shown& s, int depth) {
  bool dir = s.entry.type == HostEntry::Type::directory;
  json j{{"name", name}, {"type", dir ? "dir" : "file"}, {"mode", s.entry.mode & 0555}};
  if (s.host_rel != rel) j["shows"] = s.host_rel;
  if (!dir) return j;
  // Below the agent's own home and a shared space's data everything is
  // shown: saying so beats listing a project.
  if (view::plain(v, rel) && !rel.empty()) {
    j["whole"] = true;
    return j;
  }
  json entries = json::array();
  if (depth < 16)
    for (const auto& n : view::list(v, t, rel)) {
      std::string r = rel.empty() ? n : rel + "/" + n;
      if (auto c = view::decide(v, t, r)) entries.push_back(node(v, t, r, n, *c, depth + 1));
    }
  j["entries"] = std::move(entries);
  return j;
}

void lines(const json& j, const std::string& indent, std::vector<std::string>& out) {
  for (const auto& e : j["entries"]) {
    std::string name = printable(e["name"].get<std::string>());
    bool dir = e["type"] == "dir";
    std::string line = indent + name + (dir ? "/" : "");
    if (!dir && (e["mode"].get<unsigned>() & 0111) != 0) line += "  (executable)";
    if (e.contains("shows")) line += "  = " + printable(e["shows"].get<std::string>());
    if (e.contains("whole")) line += "  (everything in it)";
    out.push_back(line);
    if (dir && e.contains("entries")) lines(e, indent + "  ", out);
  }
}

}  // namespace

json view_tree(const view::Viewer& v, const view::HostTree& t) {
  auto root = t.stat("");
  view::Shown s{"", root.value_or(HostEntry{HostEntry::Type::directory, 0555, 0, 0})};
  return node(v, t, "", ".", s, 0);
}

std::vector<std::string> format_view(const json& tree) {
  std::vector<std::string> out;
  lines(tree, "", out);
  return out;
}

}  // namespace ctx::helper
