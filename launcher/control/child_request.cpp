#include "launcher/control/child_request.hpp"

#include "mountspec/table.hpp"

namespace ctx::launcher {

using nlohmann::json;

Error bad_request(const std::string& msg) { return Error{EINVAL, "EINVAL: " + msg, "invalid_request"}; }

Result<std::vector<std::string>> string_list(const json& v, const std::string& key) {
  std::vector<std::string> out;
  if (v.is_string()) return std::vector<std::string>{v.get<std::string>()};
  if (!v.is_array()) return fail(bad_request(key + " must be a string or an array of strings"));
  for (const auto& e : v) {
    if (!e.is_string()) return fail(bad_request(key + " must be a string or an array of strings"));
    out.push_back(e.get<std::string>());
  }
  return out;
}

namespace {

Result<std::vector<std::pair<std::string, std::vector<std::string>>>> grants(const json& v, const std::string& key) {
  if (!v.is_object()) return fail(bad_request(key + " must be an object of name -> permissions"));
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& [k, perms] : v.items()) {
    CTX_TRY_ASSIGN(auto p, string_list(perms, key + "." + k));
    out.emplace_back(k, std::move(p));
  }
  return out;
}

Result<mountspec::ChildMount> child_mount(const json& m, std::size_t i) {
  const std::string where = "mount[" + std::to_string(i) + "]";
  if (!m.is_array() || m.size() < 3 || m.size() > 4)
    return fail(bad_request(where + " must be [source, target, mode] or [source, target, mode, options]"));
  for (const auto& e : m)
    if (!e.is_string()) return fail(bad_request(where + ": every element must be a string"));
  mountspec::ChildMount c;
  c.source = m[0].get<std::string>();
  c.target = m[1].get<std::string>();
  std::string mode = m[2].get<std::string>();
  if (!mountspec::parse_mode(mode, c.attrs))
    return fail(bad_request(where + ": mode must be ro or rw, not '" + mode + "'"));
  if (m.size() == 4) {
    // The mount file's own parser: the same rules for a child's request.
    mountspec::Options opts;
    if (auto issue = mountspec::parse_options(m[3].get<std::string>(), opts))
      return fail(bad_request(where + ": " + issue->what));
    c.kind = opts.kind;
    c.attrs = c.attrs | opts.attrs;  // the mode's rdonly, the options' flags
  }
  return c;
}

}  // namespace

Result<agentdir::ChildRequest> decode_child_request(const json& j) {
  if (!j.is_object()) return fail(bad_request("the request must be a JSON object"));
  agentdir::ChildRequest r;
  for (const auto& [k, v] : j.items()) {
    if (k == "name") {
      if (!v.is_string()) return fail(bad_request("name must be a string"));
      r.name = v.get<std::string>();
    } else if (k == "label") {
      if (!v.is_string()) return fail(bad_request("label must be a string"));
      r.label = v.get<std::string>();
    } else if (k == "model") {
      CTX_TRY_ASSIGN(r.models, string_list(v, k));
    } else if (k == "tools") {
      CTX_TRY_ASSIGN(r.tools, string_list(v, k));
    } else if (k == "shared") {
      CTX_TRY_ASSIGN(r.shared, grants(v, k));
    } else if (k == "agents") {
      CTX_TRY_ASSIGN(r.agents, grants(v, k));
    } else if (k == "network") {
      if (!v.is_boolean()) return fail(bad_request("network must be true or false"));
      r.network = v.get<bool>();
    } else if (k == "mount") {
      if (!v.is_array()) return fail(bad_request("mount must be an array"));
      for (std::size_t i = 0; i < v.size(); ++i) {
        CTX_TRY_ASSIGN(auto m, child_mount(v[i], i));
        r.mounts.push_back(std::move(m));
      }
    } else if (k == "groups") {
      std::vector<std::uint32_t> g;
      if (!v.is_array()) return fail(bad_request("groups must be an array of gids"));
      for (const auto& e : v) {
        if (!e.is_number_unsigned() || e.get<std::uint64_t>() > 0xfffffffeu)
          return fail(bad_request("groups must be an array of gids"));
        g.push_back(e.get<std::uint32_t>());
      }
      r.groups = std::move(g);
    } else if (k == "cwd") {
      if (!v.is_string()) return fail(bad_request("cwd must be a string"));
      r.cwd = v.get<std::string>();
    } else if (k == "handoff") {
      if (!v.is_string()) return fail(bad_request("handoff must be a string (the text of handoff.md)"));
      r.handoff = v.get<std::string>();
    } else if (k == "inputs") {
      if (!v.is_array()) return fail(bad_request("inputs must be an array of absolute paths"));
      CTX_TRY_ASSIGN(r.inputs, string_list(v, k));
    } else if (k == "output") {
      if (!v.is_string()) return fail(bad_request("output must be a string (the output contract, output.md)"));
      r.output = v.get<std::string>();
      if (r.output.size() > agentdir::kMaxHandoffText)
        return fail(bad_request("output is longer than " + std::to_string(agentdir::kMaxHandoffText) + " bytes"));
      if (r.output.find('\0') != std::string::npos) return fail(bad_request("output holds a NUL byte"));
    } else {
      return fail(bad_request("unknown key '" + k +
                              "' (known: name label model tools shared agents network mount "
                              "groups cwd handoff inputs output)"));
    }
  }
  if (r.name.empty()) return fail(bad_request("name is required"));
  return r;
}

}  // namespace ctx::launcher
