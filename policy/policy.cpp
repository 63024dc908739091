// Policy v0: the fixed class table, the line grammar, and the hash index.
//
// One set of field checks serves the three ways a rule enters: a policy
// file line (parse), a rule made in code (from_rules) and a request on a
// command line (parse_request). Every rule from_rules accepts therefore
// formats to a line that parse reads back as the same rule.
#include "policy/policy.hpp"

#include <cstdio>
#include <variant>

#include "base/names.hpp"
#include "base/path.hpp"
#include "base/similar.hpp"
#include "base/text.hpp"

namespace ctx::policy {

namespace {

constexpr Class kClasses[] = {Class::tool,  Class::model, Class::shared, Class::session,
                              Class::mount, Class::agent, Class::network};

/// Characters that mean "more than one name" in a shell and therefore have
/// no place in a rule that names exactly one object.
constexpr std::string_view kGlobChars = "*?[";

/// Keywords of richer policy languages that policy v0 leaves out on
/// purpose: default deny makes each of them unnecessary.
constexpr std::string_view kDenyKeywords[] = {"deny", "neverallow", "dontaudit", "auditallow"};

constexpr std::string_view kShape = "allow <subject_type> <class>:<object> <permission>";

/// What is wrong inside one field, at a byte offset of that field.
struct FieldIssue {
  std::size_t offset = 0;
  std::string what;
};

/// What is wrong with one line, at a 1-based column.
struct LineIssue {
  int col = 1;
  std::string what;
};

std::string class_list() {
  std::string s;
  for (Class c : kClasses) {
    if (!s.empty()) s += ", ";
    s += to_string(c);
  }
  return s;
}

std::string permission_list(Class c) {
  std::string s;
  for (std::string_view p : permissions_of(c)) {
    if (!s.empty()) s += ' ';
    s += p;
  }
  return s;
}

/// The hash key of one rule. NUL cannot occur in a valid field, so the
/// composition is unambiguous.
std::string key_of(std::string_view subject, Class cls, std::string_view object, std::string_view permission) {
  std::string k;
  k.reserve(subject.size() + object.size() + permission.size() + 10);
  k += subject;
  k += '\0';
  k += to_string(cls);
  k += '\0';
  k += object;
  k += '\0';
  k += permission;
  return k;
}

/// The leftmost glob character or '$' in a field.
std::optional<FieldIssue> glob_or_variable_issue(std::string_view field) {
  std::size_t glob = field.find_first_of(kGlobChars);
  std::size_t var = field.find('$');
  if (glob == std::string_view::npos && var == std::string_view::npos) return std::nullopt;
  if (var < glob) return FieldIssue{var, "no variables in policy v0; write the name itself"};
  return FieldIssue{glob, "no globs in policy v0; write one rule per name"};
}

std::optional<FieldIssue> subject_issue(std::string_view s) {
  if (auto g = glob_or_variable_issue(s)) return g;
  if (auto e = type_name_issue(s)) return FieldIssue{0, "subject " + *e};
  return std::nullopt;
}

/// True if the text may stand in a policy file (strict UTF-8 without NUL
/// or CR); only mount paths can hold bytes the name checks do not reject.
bool writable_in_file(std::string_view s) {
  std::string line(s);
  line += '\n';
  return static_cast<bool>(split_lines("", line));
}

std::optional<FieldIssue> object_issue(Class c, std::string_view o) {
  if (o.empty()) return FieldIssue{0, "missing object name after '" + std::string(to_string(c)) + ":'"};
  if (auto g = glob_or_variable_issue(o)) return g;
  std::optional<std::string> e;
  switch (c) {
    case Class::tool: e = tool_name_issue(o); break;
    case Class::model: e = model_name_issue(o); break;
    case Class::shared:
      // space_name_issue says "name ..."; say which name.
      if (auto s = space_name_issue(o)) e = "shared " + *s;
      break;
    case Class::session:
      if (auto s = space_name_issue(o)) e = "session " + *s;
      break;
    case Class::agent: e = agent_name_issue(o); break;
    case Class::mount:
      if (auto p = abs_path_issue(o)) return FieldIssue{p->offset, "mount object: " + p->what};
      // Reachable only from from_rules and parse_request: a policy line
      // cannot carry these, so a rule holding them could not be written.
      if (auto sp = o.find(' '); sp != std::string_view::npos)
        return FieldIssue{sp, "mount object: a space cannot be written in a policy v0 rule"};
      if (!writable_in_file(o)) return FieldIssue{0, "mount object: invalid UTF-8"};
      break;
    case Class::network:
      if (o != "default") e = "unknown network object '" + printable(o) + "' (the only network object is 'default')";
      break;
  }
  if (e) return FieldIssue{0, *e};
  return std::nullopt;
}

/// "; did you mean tool?" when `word` is clearly a slip for one of the
/// candidates (base/similar.hpp), else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string hint = closest(word, candidates);
  return hint.empty() ? std::string() : "; did you mean " + hint + "?";
}

/// "; read is a permission of shared, session, mount and agent" when p
/// names a permission of classes other than c, else "". p is then one of
/// the table's words, so it needs no escaping.
std::string other_classes_of(Class c, std::string_view p) {
  std::vector<std::string_view> owners;
  for (Class o : kClasses) {
    if (o == c) continue;
    for (std::string_view known : permissions_of(o))
      if (known == p) owners.push_back(to_string(o));
  }
  if (owners.empty()) return "";
  std::string s = "; " + std::string(p) + " is a permission of ";
  for (std::size_t i = 0; i < owners.size(); ++i) {
    if (i > 0) s += i + 1 == owners.size() ? " and " : ", ";
    s += owners[i];
  }
  return s;
}

std::optional<FieldIssue> permission_issue(Class c, std::string_view p) {
  if (auto g = glob_or_variable_issue(p)) return g;
  for (std::string_view known : permissions_of(c))
    if (known == p) return std::nullopt;
  std::string cls(to_string(c));
  if (p.empty())
    return FieldIssue{0, "missing permission for class " + cls + " (" + cls + " permits: " + permission_list(c) + ")"};
  // Another class's permission says which class; a slip gets its fix.
  std::string hint = other_classes_of(c, p);
  if (hint.empty()) hint = did_you_mean(p, permissions_of(c));
  return FieldIssue{0, "unknown permission '" + printable(p) + "' for class " + cls + " (" + cls +
                           " permits: " + permission_list(c) + ")" + hint};
}

struct ClassObject {
  Class cls = Class::tool;
  std::string_view object;
};

/// Splits "CLASS:OBJECT" at its first ':' and checks both halves.
std::variant<ClassObject, FieldIssue> class_object_of(std::string_view f) {
  if (auto g = glob_or_variable_issue(f)) return *g;
  std::size_t colon = f.find(':');
  if (colon == std::string_view::npos) return FieldIssue{0, "expected <class>:<object>, found '" + printable(f) + "'"};
  std::string_view cls = f.substr(0, colon);
  if (cls.empty()) return FieldIssue{0, "missing class before ':' (classes: " + class_list() + ")"};
  auto c = class_from(cls);
  if (!c) {
    std::vector<std::string_view> names;
    for (Class k : kClasses) names.push_back(to_string(k));
    return FieldIssue{
        0, "unknown class '" + printable(cls) + "' (classes: " + class_list() + ")" + did_you_mean(cls, names)};
  }
  std::string_view obj = f.substr(colon + 1);
  if (auto e = object_issue(*c, obj)) return FieldIssue{colon + 1 + e->offset, std::move(e->what)};
  return ClassObject{*c, obj};
}

int col_at(std::string_view line, std::string_view field, std::size_t offset) {
  return column_of(line, field) + static_cast<int>(offset);
}

/// Parses one policy line that is neither empty nor a comment.
std::variant<Rule, LineIssue> parse_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') return LineIssue{1, "leading blank; a rule starts in column 1"};
  if (line.back() == ' ' || line.back() == '\t')
    return LineIssue{static_cast<int>(line.size()), "trailing blank after the rule"};
  if (std::size_t tab = line.find('\t'); tab != std::string_view::npos)
    return LineIssue{static_cast<int>(tab) + 1, "TAB in rule; separate fields with one space"};

  std::vector<std::string_view> f;
  for (std::size_t start = 0;;) {
    std::size_t sp = line.find(' ', start);
    f.push_back(line.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start));
    if (sp == std::string_view::npos) break;
    start = sp + 1;
  }
  for (std::string_view part : f)
    if (part.empty()) return LineIssue{column_of(line, part), "two spaces in a row; separate fields with one space"};

  for (std::string_view kw : kDenyKeywords)
    if (f[0] == kw)
      return LineIssue{
          1, "policy v0 has no " + std::string(kw) + " rules; remove the line: everything not allowed is denied"};
  if (f[0] != "allow")
    return LineIssue{1, "unknown keyword '" + printable(f[0]) + "'; a rule reads '" + std::string(kShape) + "'"};
  if (f.size() > 4 && f[4].front() == '#')
    return LineIssue{column_of(line, f[4]), "a comment must be a line of its own ('#' in column 1)"};
  if (f.size() != 4)
    return LineIssue{f.size() > 4 ? column_of(line, f[4]) : static_cast<int>(line.size()) + 1,
                     "expected 4 fields: " + std::string(kShape) + ", found " + std::to_string(f.size())};

  Rule r;
  if (auto e = subject_issue(f[1])) return LineIssue{col_at(line, f[1], e->offset), std::move(e->what)};
  auto co = class_object_of(f[2]);
  if (auto* e = std::get_if<FieldIssue>(&co)) return LineIssue{col_at(line, f[2], e->offset), std::move(e->what)};
  const auto& [cls, object] = std::get<ClassObject>(co);
  if (auto e = permission_issue(cls, f[3])) return LineIssue{col_at(line, f[3], e->offset), std::move(e->what)};
  r.subject = std::string(f[1]);
  r.cls = cls;
  r.object = std::string(object);
  r.permission = std::string(f[3]);
  return r;
}

/// The first problem of a rule made in code, or nullopt.
std::optional<std::string> rule_issue(const Rule& r) {
  if (!class_from(to_string(r.cls))) return "class value out of range";
  if (auto e = subject_issue(r.subject)) return e->what;
  if (auto e = object_issue(r.cls, r.object)) return e->what;
  if (auto e = permission_issue(r.cls, r.permission)) return e->what;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Class c) {
  switch (c) {
    case Class::tool: return "tool";
    case Class::model: return "model";
    case Class::shared: return "shared";
    case Class::session: return "session";
    case Class::mount: return "mount";
    case Class::agent: return "agent";
    case Class::network: return "network";
  }
  return "?";
}

std::optional<Class> class_from(std::string_view s) {
  for (Class c : kClasses)
    if (to_string(c) == s) return c;
  return std::nullopt;
}

const std::vector<std::string_view>& permissions_of(Class c) {
  static const std::vector<std::string_view> kTool{"execute"};
  static const std::vector<std::string_view> kModel{"use"};
  static const std::vector<std::string_view> kShared{"read", "write"};
  static const std::vector<std::string_view> kSession{"read", "write", "resume"};
  static const std::vector<std::string_view> kMount{"read", "write"};
  static const std::vector<std::string_view> kAgent{"create", "start", "stop", "read", "write"};
  static const std::vector<std::string_view> kNetwork{"connect"};
  static const std::vector<std::string_view> kNone{};
  switch (c) {
    case Class::tool: return kTool;
    case Class::model: return kModel;
    case Class::shared: return kShared;
    case Class::session: return kSession;
    case Class::mount: return kMount;
    case Class::agent: return kAgent;
    case Class::network: return kNetwork;
  }
  return kNone;
}

std::string missing_rule(std::string_view subject, Class cls, std::string_view object, std::string_view permission) {
  return "'" +
         format_rule(Rule{subject.empty() ? std::string("<no label>") : std::string(subject), cls, std::string(object),
                          std::string(permission), 0}) +
         "'";
}

std::string format_rule(const Rule& r) {
  std::string s = "allow ";
  s += r.subject;
  s += ' ';
  s += to_string(r.cls);
  s += ':';
  s += r.object;
  s += ' ';
  s += r.permission;
  return s;
}

Result<Policy> Policy::parse(std::string_view file, std::string_view content, std::vector<Error>* all) {
  auto lines = split_lines(file, content);
  if (!lines) {
    if (all != nullptr) all->push_back(lines.error());
    return fail(lines.error());
  }
  std::vector<Error> errors;
  Policy p;
  for (const Line& l : list_items(*lines)) {
    auto parsed = parse_line(l.text);
    if (auto* issue = std::get_if<LineIssue>(&parsed)) {
      errors.push_back(located(file, l.number, issue->col, EINVAL, issue->what));
      continue;
    }
    Rule& r = std::get<Rule>(parsed);
    r.line = l.number;
    p.index_.insert(key_of(r.subject, r.cls, r.object, r.permission));
    p.rules_.push_back(std::move(r));
  }
  if (!errors.empty()) {
    if (all != nullptr) all->insert(all->end(), errors.begin(), errors.end());
    return fail(std::move(errors.front()));
  }
  return p;
}

Result<Policy> Policy::from_rules(std::vector<Rule> rules) {
  Policy p;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    if (auto e = rule_issue(r)) {
      std::string where = r.line > 0 ? "policy line " + std::to_string(r.line) : "rule " + std::to_string(i + 1);
      return fail(EINVAL, where + ": " + printable(format_rule(r)) + ": EINVAL: " + *e);
    }
    p.index_.insert(key_of(r.subject, r.cls, r.object, r.permission));
  }
  p.rules_ = std::move(rules);
  return p;
}

bool Policy::allows(std::string_view subject, Class cls, std::string_view object, std::string_view permission) const {
  // No label, no rights; no rule can name an empty subject anyway.
  if (subject.empty()) return false;
  return index_.count(key_of(subject, cls, object, permission)) != 0;
}

std::optional<Rule> Policy::find(std::string_view subject, Class cls, std::string_view object,
                                 std::string_view permission) const {
  if (!allows(subject, cls, object, permission)) return std::nullopt;
  // A hit is rare (explain, diagnostics): scan for the first such line.
  for (const Rule& r : rules_)
    if (r.subject == subject && r.cls == cls && r.object == object && r.permission == permission) return r;
  return std::nullopt;
}

Result<Request> parse_request(std::string_view class_object, std::string_view permission) {
  auto bad = [&](const std::string& what) {
    return fail(EINVAL, printable(class_object) + " " + printable(permission) + ": EINVAL: " + what);
  };
  auto co = class_object_of(class_object);
  if (auto* e = std::get_if<FieldIssue>(&co)) return bad(e->what);
  const auto& [cls, object] = std::get<ClassObject>(co);
  if (auto e = permission_issue(cls, permission)) return bad(e->what);
  return Request{cls, std::string(object), std::string(permission)};
}

}  // namespace ctx::policy
