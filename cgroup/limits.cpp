#include "cgroup/limits.hpp"

#include <cstdint>

#include "base/text.hpp"

namespace ctx::cgroup {

namespace {

// The keys of `limits`: the cgroup v2 files, and the launcher's own
// bounds that need no controller (shm.max: the size of /dev/shm;
// nproc.max: RLIMIT_NPROC).
struct LimitKey {
  std::string_view key;
  std::optional<std::string> Limits::*slot;
};
constexpr LimitKey kLimitKeys[] = {
    {"memory.max", &Limits::memory_max}, {"pids.max", &Limits::pids_max},   {"cpu.max", &Limits::cpu_max},
    {"shm.max", &Limits::shm_max},       {"nproc.max", &Limits::nproc_max},
};

std::optional<std::string> limit_issue(std::string_view key, std::string_view v) {
  auto number = [](std::string_view n) {
    return !n.empty() && n.find_first_not_of("0123456789") == std::string_view::npos && n.size() <= 19;
  };
  auto bytes = [&](std::string_view n) {
    if (!n.empty() && std::string_view("KMGT").find(n.back()) != std::string_view::npos) n.remove_suffix(1);
    return number(n);
  };
  // The kernel's memparse() (memory.max, tmpfs size=) shifts the K/M/G/T
  // suffix in without an overflow check: 16777216T would wrap to 0.
  auto fits = [](std::string_view n) {
    auto suffix = std::string_view("KMGT").find(n.back());
    if (suffix == std::string_view::npos) return true;  // 19 digits: below 2^64
    n.remove_suffix(1);
    std::uint64_t value = 0;
    for (char c : n) value = value * 10 + static_cast<std::uint64_t>(c - '0');
    return value <= (UINT64_MAX >> (10 * (suffix + 1)));
  };
  if (key == "memory.max") {
    if (v == "max") return std::nullopt;
    if (!bytes(v)) return "memory.max must be 'max' or bytes, optionally with K, M, G or T";
    if (!fits(v)) return "memory.max must be below 2^64 bytes";
    return std::nullopt;
  }
  if (key == "pids.max") {
    if (v == "max" || number(v)) return std::nullopt;
    return "pids.max must be 'max' or a number";
  }
  if (key == "cpu.max") {
    auto sp = v.find(' ');
    std::string_view quota = v.substr(0, sp);
    if (quota != "max" && !number(quota)) return "cpu.max must be 'max|QUOTA [PERIOD]' (microseconds)";
    if (sp != std::string_view::npos && !number(v.substr(sp + 1)))
      return "cpu.max period must be a number (microseconds)";
    return std::nullopt;
  }
  if (key == "shm.max") {
    if (!bytes(v) || v.front() == '0') return "shm.max must be bytes, optionally with K, M, G or T, and not 0";
    if (!fits(v)) return "shm.max must be below 2^64 bytes";
    return std::nullopt;
  }
  if (key == "nproc.max") {
    if (number(v) && v.front() != '0') return std::nullopt;
    return "nproc.max must be a number of processes, not 0";
  }
  return "unknown limit '" + std::string(key) + "' (limits: memory.max, pids.max, cpu.max, shm.max, nproc.max)";
}

}  // namespace

Result<Limits> parse_limits(std::string_view file, std::string_view content, std::vector<Error>* all) {
  std::vector<Error> errors;
  auto at = [&](int line, int col, const std::string& what) {
    errors.push_back(located(file, line, col, EINVAL, what));
  };
  Limits lim;
  auto lines = split_lines(file, content);
  if (!lines) {
    errors.push_back(lines.error());
  } else {
    for (const Line& l : list_items(*lines)) {
      auto eq = l.text.find('=');
      if (eq == std::string_view::npos) {
        at(l.number, 1, "expected KEY=VALUE");
        continue;
      }
      std::string_view key = l.text.substr(0, eq), val = l.text.substr(eq + 1);
      const LimitKey* known = nullptr;
      for (const auto& k : kLimitKeys)
        if (k.key == key) known = &k;
      if (auto e = limit_issue(key, val)) {
        at(l.number, known != nullptr ? static_cast<int>(eq) + 2 : 1, *e);
        continue;
      }
      std::optional<std::string>& slot = lim.*(known->slot);
      if (slot) {
        at(l.number, 1, std::string(key) + " is set twice");
        continue;
      }
      slot = std::string(val);
    }
  }
  if (errors.empty()) return lim;
  if (all != nullptr) all->insert(all->end(), errors.begin(), errors.end());
  return fail(errors.front());
}

}  // namespace ctx::cgroup
