#include "ctx/view.hpp"

#include "base/text.hpp"

namespace ctx::helper {

namespace {

using nlohmann::json;
using access::HostEntry;

json node(const access::Viewer& v, const access::HostTree& t, const std::string& rel, const std::string& name,
          const access::Shown& s, int depth) {
  bool dir = s.entry.type == HostEntry::Type::directory;
  json j{{"name", name}, {"type", dir ? "dir" : "file"}, {"mode", s.entry.mode & 0555}};
  if (s.host_rel != rel) j["shows"] = s.host_rel;
  if (!dir) return j;
  // Below the agent's own home and a shared space's data everything is
  // shown: saying so beats listing a project.
  if (access::plain(v, rel) && !rel.empty()) {
    j["whole"] = true;
    return j;
  }
  json entries = json::array();
  if (depth < 16)
    for (const auto& n : access::list(v, t, rel)) {
      std::string r = rel.empty() ? n : rel + "/" + n;
      if (auto c = access::decide(v, t, r)) entries.push_back(node(v, t, r, n, *c, depth + 1));
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

json view_tree(const access::Viewer& v, const access::HostTree& t) {
  auto root = t.stat("");
  access::Shown s{"", root.value_or(HostEntry{HostEntry::Type::directory, 0555, 0, 0})};
  return node(v, t, "", ".", s, 0);
}

std::vector<std::string> format_view(const json& tree) {
  std::vector<std::string> out;
  lines(tree, "", out);
  return out;
}

}  // namespace ctx::helper
