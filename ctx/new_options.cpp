#include "ctx/new_options.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "base/names.hpp"
#include "base/path.hpp"
#include "sys/file.hpp"
#include "sys/process.hpp"

namespace ctx::helper {

namespace {

Error refused(const MountOption& m, int code, const std::string& what) {
  return Error{code, "--mount " + m.spec + ": " + errno_name(code) + ": " + what};
}

std::vector<std::string> split_colons(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (true) {
    std::size_t j = s.find(':', i);
    out.emplace_back(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) return out;
    i = j + 1;
  }
}

}  // namespace

Result<MountOption> parse_mount_option(std::string_view spec) {
  MountOption m{std::string(spec), "", "", false};
  const auto parts = split_colons(spec);
  if (parts.size() < 2 || parts.size() > 3)
    return fail(refused(m, EINVAL, "expected SRC:DST or SRC:DST:ro|rw (two absolute paths, then the mode)"));
  if (parts.size() == 3) {
    if (parts[2] != "ro" && parts[2] != "rw")
      return fail(refused(m, EINVAL, "the mode is '" + parts[2] + "'; write ro or rw"));
    m.rw = parts[2] == "rw";
  }
  m.source = parts[0];
  m.target = parts[1];
  const char* names[] = {"source", "target"};
  for (int i = 0; i < 2; ++i)
    if (auto issue = abs_path_issue(parts[static_cast<std::size_t>(i)]))
      return fail(refused(m, EINVAL,
                          std::string(names[i]) + " '" + parts[static_cast<std::size_t>(i)] + "': " + issue->what +
                              "; name an absolute path"));
  if (m.target == "/")
    return fail(refused(m, EINVAL, "the target is / (a mount over the whole root); choose a directory below it"));
  return m;
}

std::string mount_line(const MountOption& m) {
  return m.source + "\t" + m.target + "\t" + (m.rw ? "rw" : "ro") + "\tbind,nosuid,nodev\n";
}

Result<void> check_mount_source(const MountOption& m) {
  auto real = sys::real_path(m.source);
  if (!real)
    return fail(refused(m, real.error().code,
                        "the source " + m.source + " cannot be looked up; name an existing path its owner may reach"));
  if (*real != m.source)
    return fail(refused(m, EINVAL,
                        "the source leads through a symbolic link to " + *real +
                            ", which the launcher does not follow; name " + *real));
  return {};
}

Result<void> check_mount_target(const MountOption& m, const std::vector<std::string>& taken) {
  if (std::find(taken.begin(), taken.end(), m.target) != taken.end())
    return fail(
        refused(m, EINVAL,
                "the target " + m.target + " is mounted already (by ctx new or an earlier --mount); choose another"));
  return {};
}

Result<void> check_grant_names(const std::vector<std::string>& tools, const std::vector<std::string>& models) {
  for (const auto& t : tools)
    if (auto issue = tool_name_issue(t)) return fail(Error{EINVAL, "--tool " + t + ": EINVAL: " + *issue});
  for (const auto& m : models)
    if (auto issue = model_name_issue(m)) return fail(Error{EINVAL, "--model " + m + ": EINVAL: " + *issue});
  return {};
}

std::string grant_rules(const std::string& type, const std::vector<std::string>& tools,
                        const std::vector<std::string>& models) {
  std::string out;
  std::vector<std::string> seen;
  auto add = [&](const std::string& rule) {
    if (std::find(seen.begin(), seen.end(), rule) != seen.end()) return;
    seen.push_back(rule);
    out += rule + "\n";
  };
  for (const auto& t : tools) add("allow " + type + " tool:" + t + " execute");
  for (const auto& m : models) add("allow " + type + " model:" + m + " use");
  if (out.empty()) return out;
  return "# The tools and models ctx new --tool and --model granted:\n" + out;
}

}  // namespace ctx::helper
