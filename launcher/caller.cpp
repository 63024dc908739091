#include "launcher/caller.hpp"

#include <sys/stat.h>

#include <charconv>

#include "sys/file.hpp"
#include "sys/identity.hpp"

namespace ctx::launcher {

namespace {

bool parse_u32(std::string_view s, std::uint32_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::vector<std::pair<std::uint32_t, std::uint32_t>> parse_subid(std::string_view content, std::uint32_t uid,
                                                                  std::string_view name) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
  std::size_t pos = 0;
  while (pos < content.size()) {
    std::size_t nl = content.find('\n', pos);
    std::string_view line = content.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? content.size() : nl + 1;
    auto c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view who = line.substr(0, c1);
    std::uint32_t start = 0, count = 0, id = 0;
    if (!parse_u32(line.substr(c1 + 1, c2 - c1 - 1), start) || !parse_u32(line.substr(c2 + 1), count)) continue;
    bool mine = (!name.empty() && who == name) || (parse_u32(who, id) && id == uid);
    if (mine && count > 0) out.emplace_back(start, count);
  }
  return out;
}

Result<Caller> probe_caller(const agentdir::AgentSpec& spec) {
  Caller c;
  CTX_TRY_ASSIGN(sys::Creds creds, sys::current_creds());
  c.uid = creds.uid;
  c.gid = creds.gid;
  c.groups = creds.groups;
  if (auto pw = sys::lookup_user(spec.owner); pw && *pw) {
    c.owner_primary_gid = (*pw)->gid;
    if (c.uid == 0) {
      CTX_TRY_ASSIGN(c.owner_groups, sys::user_groups(spec.owner, (*pw)->gid));
    }
  }
  if (c.uid == 0 && c.owner_groups.empty()) c.owner_groups = {c.owner_primary_gid.value_or(spec.gid)};
  if (c.uid != 0) {
    auto bin = sys::open_dir("/usr/bin");
    if (bin) {
      auto a = sys::stat_at(bin->get(), "newuidmap");
      auto b = sys::stat_at(bin->get(), "newgidmap");
      c.have_id_map_helpers = a && *a && b && *b;
    }
    std::string name;
    if (auto me = sys::lookup_user(c.uid); me && *me) name = (*me)->name;
    c.subuid = parse_subid(sys::read_or_empty("/etc", "subuid"), c.uid, name);
    c.subgid = parse_subid(sys::read_or_empty("/etc", "subgid"), c.uid, name);
  }
  return c;
}

std::vector<std::string> list_shared_spaces(const std::string& ctx_root) {
  auto d = sys::open_dir(ctx_root + "/shared");
  if (!d) return {};
  auto names = sys::list_dir(d->get());
  if (!names) return {};
  std::vector<std::string> out;
  for (auto& n : *names) {
    auto st = sys::stat_at(d->get(), n);
    if (st && *st && S_ISDIR((*st)->mode)) out.push_back(n);
  }
  return out;
}

std::vector<ToolDirListing> list_tool_dirs(const std::vector<std::string>& host_dirs) {
  std::vector<ToolDirListing> out;
  for (const auto& h : host_dirs) {
    auto d = sys::open_dir(h, true);
    if (!d) continue;
    auto names = sys::list_dir(d->get());
    if (!names) continue;
    ToolDirListing l;
    l.host_dir = h;
    for (auto& n : *names) {
      auto st = sys::stat_at(d->get(), n);
      if (!st || !*st) continue;
      ToolDirEntry e;
      e.name = n;
      if (S_ISDIR((*st)->mode)) {
        e.kind = ToolDirEntry::Kind::directory;
      } else if (S_ISREG((*st)->mode) && ((*st)->mode & 0111) != 0) {
        e.kind = ToolDirEntry::Kind::executable;
        if (auto td = sys::open_dir_at(d->get(), n + ".d"))
          if (auto pf = sys::read_small_file(td->get(), "policy", 64 * 1024); pf && *pf) e.own_policy = (*pf)->data;
      } else if (S_ISREG((*st)->mode)) {
        e.kind = ToolDirEntry::Kind::file;
      }
      l.entries.push_back(std::move(e));
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace ctx::launcher
