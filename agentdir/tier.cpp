#include "agentdir/tier.hpp"

#include "base/names.hpp"
#include "base/path.hpp"
#include "sys/file.hpp"

namespace ctx::agentdir {

std::string agents_rel(Tier tier) { return tier ? "home/" + std::to_string(*tier) + "/agent" : std::string("agent"); }

std::string tier_instance(std::string_view name, Tier tier) {
  return std::string(name) + (tier ? ".u" + std::to_string(*tier) : std::string());
}

std::string tier_display(std::string_view name, Tier tier) {
  return std::string(name) + (tier ? "@" + std::to_string(*tier) : std::string());
}

Result<Tier> resolve_tier(std::string_view ctx_root, std::string_view name, Tier user_flag, std::uint32_t caller_uid,
                          bool system_exists, bool user_exists) {
  if (user_flag) return user_flag;
  if (system_exists && user_exists) {
    const std::string d = std::string(name) + ".d";
    return fail(EEXIST, std::string(name) + ": EEXIST: defined in both tiers, " +
                            path_join(ctx_root, agents_rel(std::nullopt) + "/" + d) + " and " +
                            path_join(ctx_root, agents_rel(caller_uid) + "/" + d) +
                            "; name the one to launch with --system or --user " + std::to_string(caller_uid) +
                            ", or rename or remove one of them");
  }
  if (user_exists) return Tier(caller_uid);
  return Tier();
}

Result<Tier> find_tier(const std::string& ctx_root, const std::string& name, Tier user_flag, std::uint32_t caller_uid) {
  if (user_flag || agent_name_issue(name)) return user_flag;  // load() says what is wrong with the name
  // One fstatat each: <name>.d itself is not followed if it is a link.
  auto exists = [&](Tier t) {
    auto st = sys::stat_at(sys::at_cwd, path_join(path_join(ctx_root, agents_rel(t)), name + ".d"));
    return st && *st;
  };
  return resolve_tier(ctx_root, name, user_flag, caller_uid, exists(std::nullopt), exists(caller_uid));
}

}  // namespace ctx::agentdir
