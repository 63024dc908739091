#include "launcher/sandbox/channel.hpp"

#include <cstring>

namespace ctx::launcher {

namespace {

// kind, step, code (int32), usec (uint32), then the detail's bytes.
constexpr std::size_t kHeader = 2 + 4 + 4;

}  // namespace

std::string_view to_string(Step s) {
  switch (s) {
    case Step::start: return "start";
    case Step::id_maps: return "id_maps";
    case Step::private_mounts: return "private_mounts";
    case Step::owner_ids: return "owner_ids";
    case Step::root: return "root";
    case Step::binds: return "binds";
    case Step::masks: return "masks";
    case Step::proc: return "proc";
    case Step::dev: return "dev";
    case Step::run_ctx: return "run_ctx";
    case Step::network: return "network";
    case Step::pivot_root: return "pivot_root";
    case Step::cwd: return "cwd";
    case Step::identity: return "identity";
    case Step::terminal: return "terminal";
    case Step::exec: return "exec";
  }
  return "unknown";
}

std::string encode_timings(const StepTiming* t, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += static_cast<char>(t[i].step);
    char b[4];
    std::memcpy(b, &t[i].usec, 4);
    out.append(b, 4);
  }
  return out;
}

std::vector<StepTiming> decode_timings(std::string_view d) {
  std::vector<StepTiming> out;
  for (std::size_t i = 0; i + 5 <= d.size(); i += 5) {
    auto step = static_cast<std::uint8_t>(d[i]);
    if (step > static_cast<std::uint8_t>(Step::exec)) continue;
    StepTiming t;
    t.step = static_cast<Step>(step);
    std::memcpy(&t.usec, d.data() + i + 1, 4);
    out.push_back(t);
  }
  return out;
}

// Each bind is its kind and its target, each ended by a NUL (a name in the
// tree holds any byte but NUL and '/').
std::vector<std::string> encode_static_binds(const std::vector<BindReport>& binds) {
  std::vector<std::string> out;
  std::string detail;
  for (const auto& b : binds) {
    std::string one = b.kind + '\0' + b.target + '\0';
    if (!detail.empty() && kHeader + detail.size() + one.size() > kMaxRecordSize) {
      out.push_back(std::move(detail));
      detail.clear();
    }
    detail += one;
  }
  if (!detail.empty()) out.push_back(std::move(detail));
  return out;
}

std::vector<BindReport> decode_static_binds(std::string_view d) {
  std::vector<BindReport> out;
  while (true) {
    std::size_t k = d.find('\0');
    if (k == std::string_view::npos) break;
    std::size_t t = d.find('\0', k + 1);
    if (t == std::string_view::npos) break;
    out.push_back({std::string(d.substr(0, k)), std::string(d.substr(k + 1, t - k - 1))});
    d.remove_prefix(t + 1);
  }
  return out;
}

std::string encode_namespaces(const std::vector<NamespaceReport>& ns) {
  std::string out;
  for (const auto& n : ns) out += n.name + "=" + std::to_string(n.inode) + "\n";
  return out;
}

std::vector<NamespaceReport> decode_namespaces(std::string_view d) {
  std::vector<NamespaceReport> out;
  while (!d.empty()) {
    std::size_t nl = d.find('\n');
    std::string_view line = d.substr(0, nl);
    d.remove_prefix(nl == std::string_view::npos ? d.size() : nl + 1);
    std::size_t eq = line.find('=');
    if (eq == 0 || eq == std::string_view::npos || eq + 1 == line.size() || line.size() - eq - 1 > 19) continue;
    unsigned long v = 0;
    bool digits = true;
    for (char c : line.substr(eq + 1)) {
      if (c < '0' || c > '9')
        digits = false;
      else
        v = v * 10 + static_cast<unsigned long>(c - '0');
    }
    if (digits && v != 0) out.push_back({std::string(line.substr(0, eq)), v});
  }
  return out;
}

std::string encode(const Record& r) {
  std::string out(kHeader, '\0');
  out[0] = static_cast<char>(r.kind);
  out[1] = static_cast<char>(r.step);
  std::int32_t code = r.code;
  std::memcpy(out.data() + 2, &code, 4);
  std::memcpy(out.data() + 6, &r.usec, 4);
  out.append(r.detail.substr(0, kMaxRecordSize - kHeader));
  return out;
}

std::optional<Record> decode(std::string_view bytes) {
  if (bytes.size() < kHeader) return std::nullopt;
  Record r;
  auto kind = static_cast<std::uint8_t>(bytes[0]);
  auto step = static_cast<std::uint8_t>(bytes[1]);
  if (kind > static_cast<std::uint8_t>(Record::Kind::error) || step > static_cast<std::uint8_t>(Step::exec))
    return std::nullopt;
  r.kind = static_cast<Record::Kind>(kind);
  r.step = static_cast<Step>(step);
  std::int32_t code = 0;
  std::memcpy(&code, bytes.data() + 2, 4);
  r.code = code;
  std::memcpy(&r.usec, bytes.data() + 6, 4);
  r.detail = std::string(bytes.substr(kHeader));
  return r;
}

}  // namespace ctx::launcher
