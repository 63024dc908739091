#include "policy/policy.hpp"

#include <variant>

#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"

namespace ctx::policy {

namespace {

constexpr Class kClasses[] = {Class::tool, Class::model, Class::shared, Class::session,
                              Class::mount, Class::agent, Class::network};

std::string key_of(std::string_view subject, Class cls, std::string_view object, std::string_view perm) {
  std::string k(subject);
  k += '\0';
  k += to_string(cls);
  k += '\0';
  k += object;
  k += '\0';
  k += perm;
  return k;
}

std::string class_list() {
  std::string s;
  for (Class c : kClasses) s += (s.empty() ? "" : ", ") + std::string(to_string(c));
  return s;
}

std::string perm_list(Class c) {
  std::string s;
  for (auto p : permissions_of(c)) s += (s.empty() ? "" : " ") + std::string(p);
  return s;
}

// Validates an object name for its class; returns the problem, if any,
// and the byte offset of it in the name.
std::optional<std::pair<std::size_t, std::string>> object_issue(Class c, std::string_view o) {
  std::optional<std::string> e;
  switch (c) {
    case Class::tool:
      e = tool_name_issue(o);
      break;
    case Class::model:
      e = model_name_issue(o);
      break;
    case Class::shared:
    case Class::session:
      e = space_name_issue(o);
      break;
    case Class::agent:
      e = agent_name_issue(o);
      break;
    case Class::mount:
      if (auto p = abs_path_issue(o)) return std::make_pair(p->offset, "mount object: " + p->what);
      break;
    case Class::network:
      if (o != "default") e = "the only network object is 'default'";
      break;
  }
  if (e) return std::make_pair(std::size_t{0}, *e);
  return std::nullopt;
}

// Parses one "allow S C:O P" line (no leading/trailing checks done by the
// caller). Returns the rule, or (column, errno, text).
struct LineIssue {
  int col;
  int code;
  std::string what;
};

std::variant<Rule, LineIssue> parse_line(std::string_view line) {
  auto col_of = [&](std::string_view part) { return column_of(line, part); };
  if (line.front() == ' ' || line.front() == '\t') return LineIssue{1, EINVAL, "leading blank"};
  if (line.back() == ' ' || line.back() == '\t')
    return LineIssue{static_cast<int>(line.size()), EINVAL, "trailing blank"};
  if (auto tab = line.find('\t'); tab != std::string_view::npos)
    return LineIssue{static_cast<int>(tab) + 1, EINVAL, "TAB in rule; separate fields with one space"};
  std::vector<std::string_view> f;
  std::size_t start = 0;
  while (true) {
    std::size_t sp = line.find(' ', start);
    f.push_back(line.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start));
    if (sp == std::string_view::npos) break;
    start = sp + 1;
  }
  for (auto part : f)
    if (part.empty()) return LineIssue{col_of(part), EINVAL, "two spaces in a row; separate fields with one space"};
  if (f[0] == "deny" || f[0] == "neverallow" || f[0] == "dontaudit")
    return LineIssue{1, EINVAL, "policy v0 has no " + std::string(f[0]) +
                                    " rules; remove the line: everything not allowed is denied"};
  if (f[0] != "allow")
    return LineIssue{1, EINVAL, "expected 'allow <subject_type> <class>:<object> <permission>'"};
  if (f.size() != 4)
    return LineIssue{f.size() > 4 ? col_of(f[4]) : static_cast<int>(line.size()) + 1, EINVAL,
                     "expected 4 fields: allow <subject_type> <class>:<object> <permission>, found " +
                         std::to_string(f.size())};
  for (std::size_t i = 1; i < 4; ++i) {
    auto glob = f[i].find_first_of("*?[");
    if (glob != std::string_view::npos)
      return LineIssue{col_of(f[i]) + static_cast<int>(glob), EINVAL, "no globs in policy v0; name each object"};
    auto var = f[i].find('$');
    if (var != std::string_view::npos)
      return LineIssue{col_of(f[i]) + static_cast<int>(var), EINVAL, "no variables in policy v0"};
  }
  Rule r;
  if (auto e = type_name_issue(f[1])) return LineIssue{col_of(f[1]), EINVAL, "subject " + *e};
  r.subject = std::string(f[1]);
  auto colon = f[2].find(':');
  if (colon == std::string_view::npos)
    return LineIssue{col_of(f[2]), EINVAL, "expected <class>:<object>, found '" + std::string(f[2]) + "'"};
  std::string_view cls = f[2].substr(0, colon);
  std::string_view obj = f[2].substr(colon + 1);
  auto c = class_from(cls);
  if (!c) return LineIssue{col_of(f[2]), EINVAL, "unknown class '" + std::string(cls) + "' (classes: " + class_list() + ")"};
  r.cls = *c;
  if (obj.empty()) return LineIssue{col_of(obj), EINVAL, "empty object name"};
  if (auto e = object_issue(*c, obj)) return LineIssue{col_of(obj) + static_cast<int>(e->first), EINVAL, e->second};
  r.object = std::string(obj);
  bool known = false;
  for (auto p : permissions_of(*c)) known = known || p == f[3];
  if (!known)
    return LineIssue{col_of(f[3]), EINVAL, "unknown permission '" + std::string(f[3]) + "' for class " +
                                               std::string(cls) + " (" + std::string(cls) + " permits: " + perm_list(*c) + ")"};
  r.permission = std::string(f[3]);
  return r;
}

}  // namespace

std::string_view to_string(Class c) {
  switch (c) {
    case Class::tool:
      return "tool";
    case Class::model:
      return "model";
    case Class::shared:
      return "shared";
    case Class::session:
      return "session";
    case Class::mount:
      return "mount";
    case Class::agent:
      return "agent";
    case Class::network:
      return "network";
  }
  return "?";
}

std::optional<Class> class_from(std::string_view s) {
  for (Class c : kClasses)
    if (to_string(c) == s) return c;
  return std::nullopt;
}

const std::vector<std::string_view>& permissions_of(Class c) {
  static const std::vector<std::string_view> tool{"execute"}, model{"use"}, shared{"read", "write"},
      session{"read", "write", "resume"}, mount{"read", "write"}, agent{"create", "start", "stop", "read", "write"},
      network{"connect"};
  switch (c) {
    case Class::tool:
      return tool;
    case Class::model:
      return model;
    case Class::shared:
      return shared;
    case Class::session:
      return session;
    case Class::mount:
      return mount;
    case Class::agent:
      return agent;
    case Class::network:
      return network;
  }
  return tool;
}

std::string format_rule(const Rule& r) {
  return "allow " + r.subject + " " + std::string(to_string(r.cls)) + ":" + r.object + " " + r.permission;
}

Result<Policy> Policy::parse(std::string_view file, std::string_view content, std::vector<Error>* all) {
  auto lines = split_lines(file, content);
  if (!lines) {
    if (all != nullptr) all->push_back(lines.error());
    return fail(lines.error());
  }
  std::vector<Error> errors;
  std::vector<Rule> rules;
  for (const Line& l : list_items(*lines)) {
    auto r = parse_line(l.text);
    if (auto* issue = std::get_if<LineIssue>(&r)) {
      errors.push_back(located(file, l.number, issue->col, issue->code, issue->what));
      continue;
    }
    Rule rule = std::get<Rule>(std::move(r));
    rule.line = l.number;
    rules.push_back(std::move(rule));
  }
  if (!errors.empty()) {
    if (all != nullptr) all->insert(all->end(), errors.begin(), errors.end());
    return fail(errors.front());
  }
  return from_rules(std::move(rules));
}

Result<Policy> Policy::from_rules(std::vector<Rule> rules) {
  Policy p;
  for (const auto& r : rules) {
    if (auto e = type_name_issue(r.subject)) return fail(EINVAL, format_rule(r) + ": subject " + *e);
    if (auto e = object_issue(r.cls, r.object)) return fail(EINVAL, format_rule(r) + ": " + e->second);
    bool known = false;
    for (auto perm : permissions_of(r.cls)) known = known || perm == r.permission;
    if (!known) return fail(EINVAL, format_rule(r) + ": unknown permission");
    p.index_.insert(key_of(r.subject, r.cls, r.object, r.permission));
  }
  p.rules_ = std::move(rules);
  return p;
}

bool Policy::allows(std::string_view subject, Class cls, std::string_view object, std::string_view permission) const {
  if (subject.empty()) return false;
  return index_.count(key_of(subject, cls, object, permission)) != 0;
}

std::optional<Rule> Policy::find(std::string_view subject, Class cls, std::string_view object,
                                 std::string_view permission) const {
  if (!allows(subject, cls, object, permission)) return std::nullopt;
  for (const auto& r : rules_)
    if (r.subject == subject && r.cls == cls && r.object == object && r.permission == permission) return r;
  return std::nullopt;
}

Result<void> check_subset(const Policy& parent, std::string_view parent_type, const Policy& child,
                          std::string_view child_type) {
  for (const auto& r : child.rules()) {
    std::string where = "child policy line " + std::to_string(r.line) + ": " + format_rule(r);
    if (child_type.empty())
      return fail(Error{EINVAL, where + ": EINVAL: the child has no label, so its rules can never apply", "wrong_subject"});
    if (r.subject != child_type)
      return fail(Error{EINVAL, where + ": EINVAL: names subject " + r.subject + ", but the child's type is " +
                                    std::string(child_type),
                        "wrong_subject"});
    if (!parent.allows(parent_type, r.cls, r.object, r.permission))
      return fail(Error{EACCES, where + ": EACCES: the parent (" + (parent_type.empty() ? std::string("no label") : std::string(parent_type)) +
                                    ") does not hold " + std::string(to_string(r.cls)) + ":" + r.object + " " + r.permission,
                        "exceeds_parent_policy"});
  }
  return {};
}

Result<Request> parse_request(std::string_view class_object, std::string_view permission) {
  std::string line = "allow subject_t " + std::string(class_object) + " " + std::string(permission);
  auto r = parse_line(line);
  if (auto* issue = std::get_if<LineIssue>(&r)) {
    // Columns refer to the synthetic line; report the text only.
    return fail(Error{issue->code, std::string(class_object) + " " + std::string(permission) + ": " +
                                       errno_name(issue->code) + ": " + issue->what});
  }
  const Rule& rule = std::get<Rule>(r);
  return Request{rule.cls, rule.object, rule.permission};
}

Explanation explain(const Policy& p, std::string_view subject, const Request& r) {
  Explanation e;
  Rule want{std::string(subject), r.cls, r.object, r.permission, 0};
  if (subject.empty()) {
    e.text = "denied: the agent has no label, so policy v0 denies everything";
    return e;
  }
  if (auto rule = p.find(subject, r.cls, r.object, r.permission)) {
    e.allowed = true;
    e.rule = rule;
    e.text = "allowed by policy line " + std::to_string(rule->line) + ": " + format_rule(*rule);
    return e;
  }
  e.text = "denied: no rule '" + format_rule(want) + "' (policy v0 is default deny)";
  return e;
}

}  // namespace ctx::policy
