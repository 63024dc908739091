// libFuzzer target: the agent.create request of the control socket
// (decode_child_request), each input read as JSON. Invariants:
//  - a refusal is EINVAL, reason invalid_request, a message that begins
//    "EINVAL: " and dumps as JSON (valid UTF-8: the supervisor sends it);
//  - an accepted request has the input's (non-empty) name, and written
//    back as JSON by this target decodes to the same request: every
//    field it kept, mounts' kind and flags included, means what it said.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "launcher/control/child_request.hpp"
#include "mountspec/table.hpp"

namespace {

using ctx::agentdir::ChildRequest;
using nlohmann::json;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string options(const ctx::mountspec::ChildMount& m) {
  std::string o = m.kind ? std::string(ctx::mountspec::to_string(*m.kind)) : "";
  auto add = [&](bool on, const char* word) {
    if (!on) return;
    if (!o.empty()) o += ",";
    o += word;
  };
  add(m.attrs.nosuid, "nosuid");
  add(m.attrs.nodev, "nodev");
  add(m.attrs.noexec, "noexec");
  return o;
}

json grants(const std::vector<std::pair<std::string, std::vector<std::string>>>& g) {
  json o = json::object();
  for (const auto& [k, v] : g) o[k] = v;
  return o;
}

json encode(const ChildRequest& r) {
  json j{{"name", r.name},
         {"model", r.models},
         {"tools", r.tools},
         {"shared", grants(r.shared)},
         {"agents", grants(r.agents)},
         {"network", r.network},
         {"handoff", r.handoff},
         {"mount", json::array()}};
  if (r.label) j["label"] = *r.label;
  if (r.groups) j["groups"] = *r.groups;
  if (r.cwd) j["cwd"] = *r.cwd;
  for (const auto& m : r.mounts) {
    json e{m.source, m.target, ctx::mountspec::mode_name(m.attrs)};
    if (std::string o = options(m); !o.empty()) e.push_back(o);
    j["mount"].push_back(e);
  }
  return j;
}

bool same(const ChildRequest& a, const ChildRequest& b) {
  if (a.mounts.size() != b.mounts.size()) return false;
  for (std::size_t i = 0; i < a.mounts.size(); ++i) {
    const auto &x = a.mounts[i], &y = b.mounts[i];
    if (x.source != y.source || x.target != y.target || !(x.attrs == y.attrs) || x.kind != y.kind) return false;
  }
  return a.name == b.name && a.label == b.label && a.models == b.models && a.tools == b.tools && a.shared == b.shared &&
         a.agents == b.agents && a.network == b.network && a.groups == b.groups && a.cwd == b.cwd &&
         a.handoff == b.handoff;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return 0;
  auto r = ctx::launcher::decode_child_request(j);
  if (!r) {
    const ctx::Error& e = r.error();
    check(e.code == EINVAL && e.reason == "invalid_request" && e.msg.rfind("EINVAL: ", 0) == 0);
    try {
      (void)json{{"message", e.msg}}.dump();
    } catch (const json::exception&) {
      std::abort();  // the supervisor would die answering
    }
    return 0;
  }
  check(j.is_object() && !r->name.empty() && j["name"] == r->name);
  auto again = ctx::launcher::decode_child_request(encode(*r));
  check(static_cast<bool>(again) && same(*r, *again));
  return 0;
}
