#include "agentdir/entitlement.hpp"

#include <algorithm>
#include <charconv>

#include "sys/file.hpp"
#include "sys/identity.hpp"

namespace ctx::agentdir {

namespace {

bool parse_u32(std::string_view s, std::uint32_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool has(const std::vector<std::uint32_t>& v, std::uint32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

Error refusal(const AgentSpec& spec, const char* file, std::string_view what, const std::string& fix) {
  std::string f = spec.name + ".d/" + file;
  return Error{EPERM, f + ": EPERM: " + std::string(what) +
                          "; a root launch gives an agent only ids its owner is "
                          "entitled to unless root owns the file: " +
                          fix + ", or have root own " + f};
}

}  // namespace

std::vector<IdRange> parse_subid(std::string_view content, std::uint32_t uid, std::string_view name) {
  std::vector<IdRange> out;
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

bool in_ranges(std::uint32_t id, const std::vector<IdRange>& ranges) {
  for (auto [start, count] : ranges)
    if (id >= start && static_cast<std::uint64_t>(id) < static_cast<std::uint64_t>(start) + count) return true;
  return false;
}

Result<OwnerIds> read_owner_ids(std::uint32_t owner) {
  OwnerIds o;
  o.uid = owner;
  CTX_TRY_ASSIGN(auto pw, sys::lookup_user(owner));
  std::string name;
  if (pw) {
    name = pw->name;
    o.primary_gid = pw->gid;
    CTX_TRY_ASSIGN(o.groups, sys::user_groups(owner, pw->gid));
  }
  o.subuid = parse_subid(sys::read_or_empty("/etc", "subuid"), owner, name);
  o.subgid = parse_subid(sys::read_or_empty("/etc", "subgid"), owner, name);
  return o;
}

std::vector<Error> entitlement_errors(const AgentSpec& spec, const OwnerIds& owner) {
  std::vector<Error> out;
  const std::string uid_s = std::to_string(owner.uid);
  auto gid_ok = [&](std::uint32_t g) {
    return (owner.primary_gid && g == *owner.primary_gid) || has(owner.groups, g) || in_ranges(g, owner.subgid);
  };
  auto gid_rule = [&](std::uint32_t g) {
    return "gid " + std::to_string(g) + " is not the owner's primary group" +
           (owner.primary_gid ? " (" + std::to_string(*owner.primary_gid) + ")"
                              : std::string(" (uid " + uid_s + " has no passwd entry)")) +
           ", not a group uid " + uid_s + " is a member of, and not in uid " + uid_s + "'s /etc/subgid ranges";
  };
  if (spec.iso == Iso::uid && !spec.id_source.uid_by_root && spec.uid != owner.uid &&
      !in_ranges(spec.uid, owner.subuid))
    out.push_back(refusal(spec, "uid",
                          "uid " + std::to_string(spec.uid) + " is neither the owner (" + uid_s +
                              ") nor in the owner's /etc/subuid ranges",
                          "write " + uid_s + ", delegate the uid to the owner in /etc/subuid"));
  if (spec.iso != Iso::userns && !spec.id_source.gid_by_root && !gid_ok(spec.gid))
    out.push_back(refusal(
        spec, "gid", gid_rule(spec.gid),
        "write " + (owner.primary_gid ? std::to_string(*owner.primary_gid) : std::string("a group of the owner")) +
            ", add the owner to the group"));
  if (!spec.id_source.groups_by_root)
    for (auto g : spec.groups)
      if (!gid_ok(g)) out.push_back(refusal(spec, "groups", gid_rule(g), "remove it, add the owner to the group"));
  return out;
}

}  // namespace ctx::agentdir
