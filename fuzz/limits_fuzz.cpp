// libFuzzer target: the `limits` control file (cgroup::parse_limits).
// Invariants:
//  - a refusal is the first of the errors it collects, each EINVAL or
//    EILSEQ and located in the file ("f.d/limits:LINE:...", LINE within
//    the file);
//  - every accepted value is of the form docs/abi.md gives its key, every
//    number fits in 64 bits once its K/M/G/T suffix is applied (the
//    kernel's memparse and our stoull would wrap or throw), shm.max and
//    nproc.max are not 0;
//  - the values written back one KEY=VALUE a line parse to the same
//    Limits.
#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cgroup/limits.hpp"

namespace {

using ctx::cgroup::Limits;

void check(bool ok) {
  if (!ok) std::abort();
}

std::optional<std::uint64_t> number(std::string_view n) {
  std::uint64_t v = 0;
  if (n.empty() || n.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
  if (ec != std::errc() || end != n.data() + n.size()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> bytes(std::string_view n) {
  int shift = 0;
  if (!n.empty()) {
    auto at = std::string_view("KMGT").find(n.back());
    if (at != std::string_view::npos) shift = 10 * (static_cast<int>(at) + 1), n.remove_suffix(1);
  }
  auto v = number(n);
  if (!v || (shift > 0 && *v > (UINT64_MAX >> shift))) return std::nullopt;
  return *v << shift;
}

void valid(const Limits& l) {
  if (l.memory_max) check(*l.memory_max == "max" || bytes(*l.memory_max));
  if (l.pids_max) check(*l.pids_max == "max" || number(*l.pids_max));
  if (l.cpu_max) {
    std::string_view v = *l.cpu_max;
    auto sp = v.find(' ');
    check(v.substr(0, sp) == "max" || number(v.substr(0, sp)));
    if (sp != std::string_view::npos) check(number(v.substr(sp + 1)).has_value());
  }
  if (l.shm_max) check(bytes(*l.shm_max).value_or(0) != 0);
  if (l.nproc_max) check(number(*l.nproc_max).value_or(0) != 0);
}

std::string format(const Limits& l) {
  std::string out;
  auto line = [&](const char* key, const std::optional<std::string>& v) {
    if (v) out += std::string(key) + "=" + *v + "\n";
  };
  line("memory.max", l.memory_max);
  line("pids.max", l.pids_max);
  line("cpu.max", l.cpu_max);
  line("shm.max", l.shm_max);
  line("nproc.max", l.nproc_max);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<ctx::Error> all;
  auto l = ctx::cgroup::parse_limits("f.d/limits", in, &all);
  if (!l) {
    check(!all.empty() && all.front() == l.error());
    const std::size_t lines = static_cast<std::size_t>(std::count(in.begin(), in.end(), '\n')) + 1;
    for (const auto& e : all) {
      check(e.code == EINVAL || e.code == EILSEQ);
      check(e.msg.rfind("f.d/limits:", 0) == 0);
      std::string_view rest = std::string_view(e.msg).substr(11);
      std::size_t n = 0;
      auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
      check(ec == std::errc() && n >= 1 && n <= lines);
    }
    return 0;
  }
  check(all.empty());
  valid(*l);
  auto again = ctx::cgroup::parse_limits("f.d/limits", format(*l));
  check(static_cast<bool>(again) && *again == *l);
  return 0;
}
