// Reading `<ctx>/agent/<name>.d/*` strictly into an AgentSpec.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"
#include "sys/file.hpp"

namespace ctx::agentdir {

/// The control files the loader knows. Anything else in `<name>.d/` is
/// reported by `ctx check` as unknown (a warning), never read.
const std::vector<std::string_view>& known_control_files();

/// The raw bytes of the control files that exist, by file name. Pure input
/// of build_spec; read_control_files fills it from disk.
using ControlFiles = std::map<std::string, std::string, std::less<>>;

/// Looks up a user's primary gid (the passwd database); nullopt if the user
/// has none. Injected so that build_spec stays pure.
using PrimaryGidLookup = std::function<std::optional<std::uint32_t>(std::uint32_t uid)>;

/// Builds an AgentSpec from file contents, applying defaults. Messages name
/// files as "<name>.d/<file>" with line and column. On failure returns the
/// first error; `all` collects every error of every file.
Result<AgentSpec> build_spec(std::string_view name, std::string_view ctx_root, const ControlFiles& files,
                             const PrimaryGidLookup& primary_gid, std::vector<Error>* all = nullptr);

/// Options of a load from disk.
struct LoadOptions {
  /// Refuse control files that are not owned by root or the agent's
  /// owner, or that are writable by group or other (a privileged launch).
  bool require_trusted_files = false;
  /// The tier (agentdir/tier.hpp): none reads `<ctx>/agent/<name>.d`, U
  /// reads the user agent `<ctx>/home/<U>/agent/<name>.d`, whose owner
  /// must be U (EPERM), which has no parent (ENOTSUP), and whose
  /// directories home/<U> and home/<U>/agent a privileged launch trusts
  /// only when owned by root or U and not writable by group or other.
  std::optional<std::uint32_t> user;
};

/// The raw content of `<name>.d/` as read from disk.
struct DirListing {
  ControlFiles files;                          ///< known control files that exist
  std::map<std::string, sys::FileStat> stats;  ///< their owner and mode
  sys::FileStat dir_stat;                      ///< of `<name>.d` itself
  std::vector<std::string> unknown;            ///< names the ABI does not define
  /// A user agent's: home/<U> and home/<U>/agent by those names, and
  /// the user tier U.
  std::vector<std::pair<std::string, sys::FileStat>> parents;
  std::optional<std::uint32_t> user;
};

/// Reads every known control file of `<ctx_root>/agent/<name>.d/` (never
/// through a symlink, each at most 64 KiB, regular files only).
/// With a user tier U, reads `<ctx_root>/home/<U>/agent/<name>.d/`,
/// reaching it without following any symlink, and stats (never reads)
/// its `entry`, the user agent's executable.
Result<DirListing> read_control_files(std::string_view ctx_root, std::string_view name,
                                      std::vector<Error>* all = nullptr, std::optional<std::uint32_t> user = {});

/// Which identity files root decided (absent, or owned by root).
IdentitySource identity_source(const DirListing& d);

/// The refusals of a privileged launch: `<name>.d` or a control file not
/// owned by root or the owner, or writable by group or other (EPERM);
/// for a user agent also its parents (DirListing::parents).
std::vector<Error> trust_errors(std::string_view name, const DirListing& d, std::uint32_t owner);

/// Reads `<ctx_root>/agent/<name>.d/` without following symlinks (the
/// `.d` directory itself and every file), each file at most 64 KiB, and
/// builds the spec. Symlinked, oversized, non-regular files are errors.
Result<AgentSpec> load(std::string_view ctx_root, std::string_view name, const LoadOptions& opts = {},
                       std::vector<Error>* all = nullptr);

/// Reads only `owner`, `label` and `policy` of an agent (strictly, as
/// load does) for decisions that need no more, such as a tool call. The
/// other fields keep their defaults and must not be used.
Result<AgentSpec> load_subject_policy(std::string_view ctx_root, std::string_view name,
                                      std::optional<std::uint32_t> user = {});

/// A user agent's own refusals, whoever launches (docs/abi.md "User
/// agents"): an owner other than U (EPERM), a parent file (ENOTSUP).
/// `owner` is the owner file's value when it parsed. Pure.
std::vector<Error> user_tier_errors(std::string_view name, std::uint32_t user, std::optional<std::uint32_t> owner,
                                    bool has_parent);

/// Parses the text of a `parent` file (`agent:<name> [session:<s>]
/// [run:<r>]`) as load() does; the first error names `<name>.d/parent`.
Result<Parent> parse_parent(std::string_view name, std::string_view content);

/// The default primary-gid lookup through getpwuid_r (sys/).
PrimaryGidLookup passwd_primary_gid();

}  // namespace ctx::agentdir
