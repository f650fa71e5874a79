// Selector parsing and matching (labels.Parse grammar; fields: =, ==, !=) and the
// apimachinery name/label/annotation syntax rules with their real error wording.
#include "sim/selector.h"

#include <algorithm>
#include <charconv>

namespace gg::sim {

using nlohmann::json;

const std::string* FindField(const FieldMap& m, std::string_view key) {
  auto it = std::lower_bound(m.begin(), m.end(), key,
                             [](const auto& p, std::string_view k) { return p.first < k; });
  if (it != m.end() && it->first == key) return &it->second;
  return nullptr;
}

FieldMap LabelsOf(const json& obj) {
  FieldMap out;
  if (!obj.is_object()) return out;
  auto md = obj.find("metadata");
  if (md == obj.end() || !md->is_object()) return out;
  auto l = md->find("labels");
  if (l == md->end() || !l->is_object()) return out;
  for (auto it = l->begin(); it != l->end(); ++it)
    if (it->is_string()) out.emplace_back(it.key(), it->get<std::string>());
  std::sort(out.begin(), out.end());
  return out;
}

// ---- syntax validation -------------------------------------------------------------

namespace {

std::string RegexError(const std::string& msg, const std::string& fmt,
                       std::initializer_list<const char*> examples) {
  std::string s = msg + " (e.g. ";
  bool first = true;
  for (const char* e : examples) {
    if (!first) s += " or ";
    first = false;
    s += "'" + std::string(e) + "', ";
  }
  return s + "regex used for validation is '" + fmt + "')";
}

const char kDns1123LabelFmt[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const char kDns1123SubdomainFmt[] =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const char kQualifiedNameFmt[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const char kLabelValueFmt[] = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const char kQualifiedNameErr[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";

bool IsAlnumLower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsAlnumLower(c) || (c >= 'A' && c <= 'Z'); }

// Hand-written matchers (no std::regex on hot paths; same languages as the Go regexes).
bool MatchDnsLabel(std::string_view s) {
  if (s.empty() || !IsAlnumLower(s.front()) || !IsAlnumLower(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsAlnumLower(c) || c == '-'; });
}
bool MatchDnsSubdomain(std::string_view s) {
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!MatchDnsLabel(s.substr(start, dot == s.npos ? s.npos : dot - start))) return false;
    if (dot == s.npos) return true;
    start = dot + 1;
  }
}
bool MatchQualifiedNamePart(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::optional<long long> ParseInt(std::string_view s) {
  long long v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string Join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += sep;
    s += v[i];
  }
  return s;
}

}  // namespace

std::vector<std::string> IsDns1123Label(std::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > 63) errs.push_back("must be no more than 63 characters");
  if (!MatchDnsLabel(s))
    errs.push_back(RegexError(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
        "'-', and must start and end with an alphanumeric character",
        kDns1123LabelFmt, {"my-name", "123-abc"}));
  return errs;
}

std::vector<std::string> IsDns1123Subdomain(std::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > 253) errs.push_back("must be no more than 253 characters");
  if (!MatchDnsSubdomain(s))
    errs.push_back(RegexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character",
        kDns1123SubdomainFmt, {"example.com"}));
  return errs;
}

std::vector<std::string> IsQualifiedName(std::string_view value) {
  std::vector<std::string> errs;
  std::string_view name = value;
  size_t slash = value.find('/');
  if (slash != value.npos) {
    if (value.find('/', slash + 1) != value.npos) {
      errs.push_back(
          "a qualified name " +
          RegexError(kQualifiedNameErr, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"}) +
          " with an optional DNS subdomain prefix and '/' (e.g. "
          "'example.com/MyName')");
      return errs;
    }
    std::string_view prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (auto& m : IsDns1123Subdomain(prefix)) errs.push_back("prefix part " + m);
    }
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back("name part must be no more than 63 characters");
  }
  if (!MatchQualifiedNamePart(name))
    errs.push_back("name part " + RegexError(kQualifiedNameErr, kQualifiedNameFmt,
                                             {"MyName", "my.name", "123-abc"}));
  return errs;
}

std::vector<std::string> IsValidLabelValue(std::string_view s) {
  std::vector<std::string> errs;
  if (s.size() > 63) errs.push_back("must be no more than 63 characters");
  if (!s.empty() && !MatchQualifiedNamePart(s))
    errs.push_back(RegexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', "
        "'_' or '.', and must start and end with an alphanumeric character",
        kLabelValueFmt, {"MyValue", "my_value", "12345"}));
  return errs;
}

std::string RenderValue(const json& v) {
  if (v.is_string()) return json(v.get<std::string>()).dump();
  if (v.is_null()) return "null";
  return v.dump();
}

StatusCause InvalidCause(std::string field, const json& value, std::string detail) {
  std::string msg = "Invalid value: " + RenderValue(value);
  if (!detail.empty()) msg += ": " + detail;
  return {"FieldValueInvalid", std::move(msg), std::move(field)};
}
StatusCause RequiredCause(std::string field, std::string detail) {
  std::string msg = "Required value";
  if (!detail.empty()) msg += ": " + detail;
  return {"FieldValueRequired", std::move(msg), std::move(field)};
}
StatusCause NotSupportedCause(std::string field, const json& value,
                              const std::vector<std::string>& supported) {
  std::vector<std::string> q;
  for (const auto& s : supported) q.push_back(json(s).dump());
  std::string msg = "Unsupported value: " + RenderValue(value);
  if (!q.empty()) msg += ": supported values: " + Join(q, ", ");
  return {"FieldValueNotSupported", std::move(msg), std::move(field)};
}
StatusCause ForbiddenCause(std::string field, std::string detail) {
  return {"FieldValueForbidden", "Forbidden: " + detail, std::move(field)};
}
StatusCause TooLongCause(std::string field, size_t max_bytes) {
  return {"FieldValueTooLong",
          "Too long: may not be more than " + std::to_string(max_bytes) + " bytes",
          std::move(field)};
}
StatusCause DuplicateCause(std::string field, const json& value) {
  return {"FieldValueDuplicate", "Duplicate value: " + RenderValue(value), std::move(field)};
}

namespace {

// A metadata string field: nullopt when absent or null, "\x01" when not a string.
std::optional<std::string> MetaString(const json& md, const char* k) {
  auto it = md.find(k);
  if (it == md.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return std::string("\x01");  // marks a non-string
  return it->get<std::string>();
}

// name or generateName (a prefix: its trailing '-' is not checked), by `rule`.
void ValidateMetaName(const json& md, NameRule rule, std::vector<StatusCause>& out) {
  auto check_name = [&](const std::string& field, std::string v, bool prefix) {
    if (v == "\x01") {
      out.push_back(InvalidCause(field, md.at(field.substr(9)), "must be a string"));
      return;
    }
    if (prefix && !v.empty() && v.back() == '-') v.pop_back();  // generateName prefix
    std::vector<std::string> errs;
    if (rule == NameRule::kDns1123Subdomain) errs = IsDns1123Subdomain(v);
    if (rule == NameRule::kDns1123Label) errs = IsDns1123Label(v);
    for (auto& e : errs) out.push_back(InvalidCause(field, md.at(field.substr(9)), e));
  };
  auto name = MetaString(md, "name");
  auto gen = MetaString(md, "generateName");
  if (gen && !gen->empty()) check_name("metadata.generateName", *gen, true);
  if (!name || name->empty()) {
    if (!gen || gen->empty())
      out.push_back(RequiredCause("metadata.name", "name or generateName is required"));
  } else {
    check_name("metadata.name", *name, false);
  }
}

// A namespaced kind needs a DNS label namespace; a cluster-scoped one may not have one.
void ValidateMetaNamespace(const json& md, bool namespaced, std::vector<StatusCause>& out) {
  auto ns = MetaString(md, "namespace");
  if (!namespaced) {
    if (ns && !ns->empty())
      out.push_back(ForbiddenCause("metadata.namespace", "not allowed on this type"));
  } else if (!ns || ns->empty()) {
    out.push_back(RequiredCause("metadata.namespace"));
  } else if (*ns == "\x01") {
    out.push_back(InvalidCause("metadata.namespace", md.at("namespace"), "must be a string"));
  } else {
    for (auto& e : IsDns1123Label(*ns)) out.push_back(InvalidCause("metadata.namespace", *ns, e));
  }
}

void ValidateLabels(const json& labels, std::vector<StatusCause>& out) {
  if (!labels.is_object()) {
    out.push_back(InvalidCause("metadata.labels", labels, "must be an object"));
    return;
  }
  for (auto l = labels.begin(); l != labels.end(); ++l) {
    for (auto& e : IsQualifiedName(l.key()))
      out.push_back(InvalidCause("metadata.labels", l.key(), e));
    if (!l->is_string()) {
      out.push_back(InvalidCause("metadata.labels", *l, "must be a string"));
      continue;
    }
    for (auto& e : IsValidLabelValue(l->get<std::string>()))
      out.push_back(InvalidCause("metadata.labels", *l, e));
  }
}

// Qualified keys (case-insensitive), string values, at most 256 KiB in all.
void ValidateAnnotations(const json& annotations, std::vector<StatusCause>& out) {
  if (!annotations.is_object()) {
    out.push_back(InvalidCause("metadata.annotations", annotations, "must be an object"));
    return;
  }
  size_t total = 0;
  for (auto a = annotations.begin(); a != annotations.end(); ++a) {
    std::string lower = a.key();
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (auto& e : IsQualifiedName(lower))
      out.push_back(InvalidCause("metadata.annotations", a.key(), e));
    total += a.key().size() +
             (a->is_string() ? a->get_ref<const std::string&>().size() : a->dump().size());
    if (!a->is_string())
      out.push_back(InvalidCause("metadata.annotations", *a, "must be a string"));
  }
  if (total > kTotalAnnotationSizeLimitBytes)
    out.push_back(TooLongCause("metadata.annotations", kTotalAnnotationSizeLimitBytes));
}

void ValidateFinalizers(const json& finalizers, std::vector<StatusCause>& out) {
  for (size_t i = 0; i < finalizers.size(); ++i) {
    const json& f = finalizers[i];
    std::string field = "metadata.finalizers[" + std::to_string(i) + "]";
    if (!f.is_string()) {
      out.push_back(InvalidCause(field, f, "must be a string"));
      continue;
    }
    for (auto& e : IsQualifiedName(f.get<std::string>())) out.push_back(InvalidCause(field, f, e));
  }
}

void ValidateOwnerReferences(const json& refs, std::vector<StatusCause>& out) {
  for (size_t i = 0; i < refs.size(); ++i) {
    const json& o = refs[i];
    std::string base = "metadata.ownerReferences[" + std::to_string(i) + "]";
    if (!o.is_object()) {
      out.push_back(InvalidCause(base, o, "must be an object"));
      continue;
    }
    for (const char* k : {"apiVersion", "kind", "name", "uid"}) {
      auto f = o.find(k);
      if (f == o.end() || !f->is_string() || f->get_ref<const std::string&>().empty())
        out.push_back(RequiredCause(base + "." + k));
    }
  }
}

}  // namespace

std::vector<StatusCause> ValidateObjectMeta(const json& md, bool namespaced, NameRule rule) {
  std::vector<StatusCause> out;
  if (!md.is_object()) {
    out.push_back(RequiredCause("metadata"));
    return out;
  }
  ValidateMetaName(md, rule, out);
  ValidateMetaNamespace(md, namespaced, out);
  if (auto it = md.find("labels"); it != md.end() && !it->is_null()) ValidateLabels(*it, out);
  if (auto it = md.find("annotations"); it != md.end() && !it->is_null())
    ValidateAnnotations(*it, out);
  if (auto it = md.find("finalizers"); it != md.end() && it->is_array())
    ValidateFinalizers(*it, out);
  if (auto it = md.find("ownerReferences"); it != md.end() && it->is_array())
    ValidateOwnerReferences(*it, out);
  return out;
}

// ---- label selector ----------------------------------------------------------------

namespace {

enum class Tok {
  kIdent,
  kNot,
  kEq,
  kDoubleEq,
  kNotEq,
  kGt,
  kLt,
  kIn,
  kNotIn,
  kOpen,
  kClose,
  kComma,
  kEnd,
  kError
};

struct Lexer {
  std::string_view s;
  size_t pos = 0;
  static bool Special(char c) {
    return c == '!' || c == '=' || c == '>' || c == '<' || c == '(' || c == ')' || c == ',';
  }
  static bool Space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
  std::pair<Tok, std::string> Next() {
    while (pos < s.size() && Space(s[pos])) ++pos;
    if (pos >= s.size()) return {Tok::kEnd, ""};
    char c = s[pos];
    if (Special(c)) {
      if (c == '!' && pos + 1 < s.size() && s[pos + 1] == '=') return Two(Tok::kNotEq, "!=");
      if (c == '=' && pos + 1 < s.size() && s[pos + 1] == '=') return Two(Tok::kDoubleEq, "==");
      ++pos;
      switch (c) {
        case '!':
          return {Tok::kNot, "!"};
        case '=':
          return {Tok::kEq, "="};
        case '>':
          return {Tok::kGt, ">"};
        case '<':
          return {Tok::kLt, "<"};
        case '(':
          return {Tok::kOpen, "("};
        case ')':
          return {Tok::kClose, ")"};
        default:
          return {Tok::kComma, ","};
      }
    }
    size_t start = pos;
    while (pos < s.size() && !Special(s[pos]) && !Space(s[pos])) ++pos;
    std::string id(s.substr(start, pos - start));
    if (id == "in") return {Tok::kIn, id};
    if (id == "notin") return {Tok::kNotIn, id};
    return {Tok::kIdent, id};
  }
  std::pair<Tok, std::string> Two(Tok t, const char* lit) {
    pos += 2;
    return {t, lit};
  }
  std::pair<Tok, std::string> Peek() {
    size_t save = pos;
    auto r = Next();
    pos = save;
    return r;
  }
};

Status ReqError(const std::string& m) {
  return InvalidArgumentError("unable to parse requirement: " + m);
}

Status ValidateKey(const std::string& key) {
  auto errs = IsQualifiedName(key);
  if (errs.empty()) return OkStatus();
  return ReqError("key: Invalid value: " + json(key).dump() + ": " + Join(errs, "; "));
}

}  // namespace

namespace {

using Requirement = LabelSelector::Requirement;
using SelOp = LabelSelector::Op;

// "(a, b)" after in / notin: an empty value between commas (or a trailing one) counts.
Status ParseValueSet(Lexer& lx, Requirement& r) {
  auto [t3, l3] = lx.Next();
  if (t3 != Tok::kOpen) return ReqError("found '" + l3 + "', expected: '('");
  bool expect_value = true;
  while (true) {
    auto [t4, l4] = lx.Next();
    if (t4 == Tok::kClose) {
      if (expect_value && !r.values.empty()) r.values.emplace_back();  // "(a,)"
      break;
    }
    if (t4 == Tok::kComma) {
      if (expect_value) r.values.emplace_back();
      expect_value = true;
      continue;
    }
    if ((t4 == Tok::kIdent || t4 == Tok::kIn || t4 == Tok::kNotIn) && expect_value) {
      r.values.push_back(l4);
      expect_value = false;
      continue;
    }
    return ReqError("found '" + l4 + "', expected: ',', ')' or identifier");
  }
  if (r.values.empty()) return ReqError("for 'in', 'notin' operators, values set can't be empty");
  return OkStatus();
}

// The one value after =, ==, !=, > or < (empty at the end or before a comma).
Status ParseSingleValue(Lexer& lx, Requirement& r) {
  auto [t3, l3] = lx.Peek();
  if (t3 == Tok::kEnd || t3 == Tok::kComma) {
    r.values.emplace_back();
  } else if (t3 == Tok::kIdent || t3 == Tok::kIn || t3 == Tok::kNotIn) {
    lx.Next();
    r.values.push_back(l3);
  } else {
    return ReqError("found '" + l3 + "', expected: identifier");
  }
  return OkStatus();
}

// Gt and Lt take integers; every other value must be a valid label value.
Status ValidateValues(const Requirement& r) {
  for (size_t i = 0; i < r.values.size(); ++i) {
    if (r.op == SelOp::kGt || r.op == SelOp::kLt) {
      if (!ParseInt(r.values[i]))
        return ReqError("for 'Gt', 'Lt' operators, the value must be an integer");
      continue;
    }
    auto errs = IsValidLabelValue(r.values[i]);
    if (!errs.empty())
      return ReqError("values[" + std::to_string(i) + "][" + r.key +
                      "]: Invalid value: " + json(r.values[i]).dump() + ": " + Join(errs, "; "));
  }
  return OkStatus();
}

// The operator and values after a requirement's key (none: the key exists).
Status ParseOperation(Lexer& lx, Requirement& r) {
  auto [t2, l2] = lx.Peek();
  if (t2 == Tok::kEnd || t2 == Tok::kComma) {
    r.op = SelOp::kExists;
    return OkStatus();
  }
  lx.Next();
  switch (t2) {
    case Tok::kIn:
    case Tok::kNotIn:
      r.op = t2 == Tok::kIn ? SelOp::kIn : SelOp::kNotIn;
      GG_RETURN_IF_ERROR(ParseValueSet(lx, r));
      break;
    case Tok::kEq:
    case Tok::kDoubleEq:
    case Tok::kNotEq:
    case Tok::kGt:
    case Tok::kLt:
      r.op = (t2 == Tok::kNotEq) ? SelOp::kNotIn
             : (t2 == Tok::kGt)  ? SelOp::kGt
             : (t2 == Tok::kLt)  ? SelOp::kLt
                                 : SelOp::kIn;
      GG_RETURN_IF_ERROR(ParseSingleValue(lx, r));
      break;
    default:
      return ReqError("found '" + l2 + "', expected: in, notin, =, ==, !=, gt, lt");
  }
  return ValidateValues(r);
}

// One requirement: `!key`, or a key and its operation.
StatusOr<Requirement> ParseRequirement(Lexer& lx, Tok first) {
  Requirement r;
  if (first == Tok::kNot) {
    lx.Next();
    auto [t2, l2] = lx.Next();
    if (t2 != Tok::kIdent) return ReqError("found '" + l2 + "', expected: identifier");
    r.key = l2;
    r.op = SelOp::kNotExists;
    GG_RETURN_IF_ERROR(ValidateKey(r.key));
    return r;
  }
  r.key = lx.Next().second;
  GG_RETURN_IF_ERROR(ValidateKey(r.key));
  GG_RETURN_IF_ERROR(ParseOperation(lx, r));
  return r;
}

}  // namespace

StatusOr<LabelSelector> LabelSelector::Parse(std::string_view s) {
  LabelSelector sel;
  Lexer lx{s};
  while (true) {
    auto [tok, lit] = lx.Peek();
    if (tok == Tok::kEnd) break;
    if (tok != Tok::kIdent && tok != Tok::kNot)
      return InvalidArgumentError("found '" + lit +
                                  "', expected: !, identifier, or 'end of string'");
    auto r = ParseRequirement(lx, tok);
    if (!r.ok()) return r.status();
    sel.reqs_.push_back(std::move(*r));
    auto [t5, l5] = lx.Next();
    if (t5 == Tok::kEnd) break;
    if (t5 != Tok::kComma)
      return InvalidArgumentError("found '" + l5 + "', expected: ',' or 'end of string'");
    if (lx.Peek().first == Tok::kEnd)
      return InvalidArgumentError("found '', expected: identifier after ','");
  }
  return sel;
}

StatusOr<LabelSelector> LabelSelector::FromJson(const json& sel) {
  LabelSelector out;
  if (sel.is_null()) {
    out.nothing_ = true;
    return out;
  }
  if (!sel.is_object()) return InvalidArgumentError("label selector must be an object");
  if (auto ml = sel.find("matchLabels"); ml != sel.end() && !ml->is_null()) {
    if (!ml->is_object()) return InvalidArgumentError("matchLabels must be an object");
    for (auto it = ml->begin(); it != ml->end(); ++it) {
      if (!it->is_string()) return InvalidArgumentError("matchLabels values must be strings");
      GG_RETURN_IF_ERROR(ValidateKey(it.key()));
      out.reqs_.push_back({it.key(), Op::kIn, {it->get<std::string>()}});
    }
  }
  if (auto me = sel.find("matchExpressions"); me != sel.end() && !me->is_null()) {
    if (!me->is_array()) return InvalidArgumentError("matchExpressions must be a list");
    for (const auto& e : *me) {
      if (!e.is_object() || !e.contains("key") || !e["key"].is_string() ||
          !e.contains("operator") || !e["operator"].is_string())
        return InvalidArgumentError("matchExpressions entries need string key and operator");
      Requirement r;
      r.key = e["key"].get<std::string>();
      GG_RETURN_IF_ERROR(ValidateKey(r.key));
      std::string op = e["operator"].get<std::string>();
      if (auto v = e.find("values"); v != e.end() && v->is_array())
        for (const auto& x : *v) {
          if (!x.is_string())
            return InvalidArgumentError("matchExpressions values must be strings");
          r.values.push_back(x.get<std::string>());
        }
      if (op == "In" || op == "NotIn") {
        r.op = op == "In" ? Op::kIn : Op::kNotIn;
        if (r.values.empty())
          return InvalidArgumentError("for 'in', 'notin' operators, values set can't be empty");
      } else if (op == "Exists" || op == "DoesNotExist") {
        r.op = op == "Exists" ? Op::kExists : Op::kNotExists;
        if (!r.values.empty())
          return InvalidArgumentError("values set must be empty for exists and does not exist");
      } else {
        return InvalidArgumentError("\"" + op + "\" is not a valid label selector operator");
      }
      out.reqs_.push_back(std::move(r));
    }
  }
  return out;
}

bool LabelSelector::Matches(const std::function<const std::string*(std::string_view)>& get) const {
  if (nothing_) return false;
  for (const auto& r : reqs_) {
    const std::string* v = get(r.key);
    switch (r.op) {
      case Op::kExists:
        if (!v) return false;
        break;
      case Op::kNotExists:
        if (v) return false;
        break;
      case Op::kIn:
        if (!v || std::find(r.values.begin(), r.values.end(), *v) == r.values.end()) return false;
        break;
      case Op::kNotIn:
        if (v && std::find(r.values.begin(), r.values.end(), *v) != r.values.end()) return false;
        break;
      case Op::kGt:
      case Op::kLt: {
        if (!v || r.values.empty()) return false;
        auto have = ParseInt(*v);
        auto want = ParseInt(r.values[0]);
        if (!have || !want) return false;
        if (r.op == Op::kGt ? !(*have > *want) : !(*have < *want)) return false;
        break;
      }
    }
  }
  return true;
}

bool LabelSelector::Matches(const FieldMap& labels) const {
  return Matches([&](std::string_view k) { return FindField(labels, k); });
}

bool LabelSelector::MatchesJson(const json& labels) const {
  return Matches([&](std::string_view k) -> const std::string* {
    if (!labels.is_object()) return nullptr;
    auto it = labels.find(std::string(k));
    if (it == labels.end() || !it->is_string()) return nullptr;
    return &it->get_ref<const std::string&>();
  });
}

std::string LabelSelector::ToString() const {
  std::vector<Requirement> rs = reqs_;
  std::stable_sort(rs.begin(), rs.end(), [](auto& a, auto& b) { return a.key < b.key; });
  std::vector<std::string> parts;
  for (const auto& r : rs) {
    switch (r.op) {
      case Op::kExists:
        parts.push_back(r.key);
        break;
      case Op::kNotExists:
        parts.push_back("!" + r.key);
        break;
      case Op::kIn:
        parts.push_back(r.values.size() == 1 ? r.key + "=" + r.values[0]
                                             : r.key + " in (" + Join(r.values, ",") + ")");
        break;
      case Op::kNotIn:
        parts.push_back(r.values.size() == 1 ? r.key + "!=" + r.values[0]
                                             : r.key + " notin (" + Join(r.values, ",") + ")");
        break;
      case Op::kGt:
        parts.push_back(r.key + ">" + (r.values.empty() ? "" : r.values[0]));
        break;
      case Op::kLt:
        parts.push_back(r.key + "<" + (r.values.empty() ? "" : r.values[0]));
        break;
    }
  }
  return Join(parts, ",");
}

// ---- field selector ----------------------------------------------------------------

StatusOr<FieldSelector> FieldSelector::Parse(std::string_view s) {
  FieldSelector sel;
  std::string_view trimmed = s;
  while (!trimmed.empty() && Lexer::Space(trimmed.front())) trimmed.remove_prefix(1);
  while (!trimmed.empty() && Lexer::Space(trimmed.back())) trimmed.remove_suffix(1);
  if (trimmed.empty()) return sel;
  // Split on unescaped commas, keeping escapes for the operator search.
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < trimmed.size(); ++i) {
    if (trimmed[i] == '\\' && i + 1 < trimmed.size()) {
      parts.back() += trimmed[i];
      parts.back() += trimmed[++i];
    } else if (trimmed[i] == ',') {
      parts.emplace_back();
    } else {
      parts.back() += trimmed[i];
    }
  }
  for (const std::string& p : parts) {
    auto bad = [&]() {
      return InvalidArgumentError("invalid selector: '" + std::string(s) + "'; can't understand '" +
                                  p + "'");
    };
    Term t{};
    size_t pos = std::string::npos, oplen = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] == '\\') {
        ++i;
        continue;
      }
      if (p[i] == '!' && i + 1 < p.size() && p[i + 1] == '=') {
        pos = i, oplen = 2, t.negate = true;
        break;
      }
      if (p[i] == '=') {
        pos = i;
        oplen = (i + 1 < p.size() && p[i + 1] == '=') ? 2 : 1;
        break;
      }
    }
    if (pos == std::string::npos || pos == 0) return bad();
    t.field = p.substr(0, pos);
    std::string raw = p.substr(pos + oplen), val;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\\') {
        if (i + 1 >= raw.size()) return bad();
        char n = raw[++i];
        if (n != '\\' && n != ',' && n != '=')
          return InvalidArgumentError("invalid field selector: invalid escape sequence: \\" +
                                      std::string(1, n));
        val += n;
        continue;
      }
      if (raw[i] == '=') return bad();  // unescaped '=' in the value
      val += raw[i];
    }
    t.value = std::move(val);
    sel.terms_.push_back(std::move(t));
  }
  return sel;
}

bool FieldSelector::Matches(const FieldMap& fields) const {
  for (const auto& t : terms_) {
    const std::string* v = FindField(fields, t.field);
    std::string_view have = v ? std::string_view(*v) : std::string_view();
    if (t.negate ? have == t.value : have != t.value) return false;
  }
  return true;
}

bool FieldSelector::MatchesObject(std::string_view group, std::string_view resource,
                                  const json& obj) const {
  for (const auto& t : terms_) {
    std::string have = FieldValue(group, resource, obj, t.field);
    if (t.negate ? have == t.value : have != t.value) return false;
  }
  return true;
}

std::vector<std::string> FieldSelector::Fields() const {
  std::vector<std::string> out;
  for (const auto& t : terms_) out.push_back(t.field);
  return out;
}

const std::string* FieldSelector::EqualityValue(std::string_view field) const {
  for (const auto& t : terms_)
    if (!t.negate && t.field == field) return &t.value;
  return nullptr;
}

Status FieldSelector::ValidateFor(std::string_view group, std::string_view resource,
                                  bool namespaced,
                                  const std::vector<std::string>& extra_fields) const {
  auto supported = SupportedFields(group, resource, namespaced);
  for (const auto& t : terms_) {
    if (std::find(supported.begin(), supported.end(), t.field) != supported.end()) continue;
    if (std::find(extra_fields.begin(), extra_fields.end(), t.field) != extra_fields.end())
      continue;
    return InvalidArgumentError("field label not supported: " + t.field);
  }
  return OkStatus();
}

namespace {

bool IsEventResource(std::string_view group, std::string_view resource) {
  return resource == "events" && (group.empty() || group == "events.k8s.io");
}

// Dotted path lookup; scalars rendered as the server's field sets do.
const json* Walk(const json& obj, std::string_view path) {
  const json* cur = &obj;
  size_t start = 0;
  while (true) {
    if (!cur->is_object()) return nullptr;
    size_t dot = path.find('.', start);
    std::string key(path.substr(start, dot == path.npos ? path.npos : dot - start));
    auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == path.npos) return cur;
    start = dot + 1;
  }
}

std::string Scalar(const json* v, bool is_bool = false) {
  if (!v || v->is_null()) return is_bool ? "false" : "";
  if (v->is_string()) return v->get<std::string>();
  if (v->is_boolean()) return v->get<bool>() ? "true" : "false";
  if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
  if (v->is_number()) return v->dump();
  return "";
}

}  // namespace

std::vector<std::string> SupportedFields(std::string_view group, std::string_view resource,
                                         bool namespaced) {
  std::vector<std::string> f = {"metadata.name"};
  if (namespaced) f.push_back("metadata.namespace");
  if (group.empty() && resource == "nodes") f.push_back("spec.unschedulable");
  if (group.empty() && resource == "namespaces") f.push_back("status.phase");
  // ResourceSlices: the real server's field selectors (resource.k8s.io, all versions).
  if (group == "resource.k8s.io" && resource == "resourceslices") {
    f.push_back("spec.nodeName");
    f.push_back("spec.driver");
  }
  if (group.empty() && resource == "pods") {
    for (const char* x :
         {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
          "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"})
      f.push_back(x);
  }
  if (IsEventResource(group, resource)) {
    for (const char* x :
         {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
          "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
          "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"})
      f.push_back(x);
  }
  return f;
}

std::string FieldValue(std::string_view group, std::string_view resource, const json& obj,
                       std::string_view field) {
  if (!obj.is_object()) return "";
  if (field == "spec.unschedulable" || field == "spec.hostNetwork")
    return Scalar(Walk(obj, field), true);
  if (IsEventResource(group, resource)) {
    // Events may be stored in either shape; read core names from whichever is present.
    bool v1 = obj.contains("regarding") || obj.contains("note") ||
              obj.contains("reportingController") || obj.contains("deprecatedSource");
    if (field.substr(0, 15) == "involvedObject.") {
      std::string sub(field.substr(15));
      const json* io =
          Walk(obj, v1 && !obj.contains("involvedObject") ? "regarding" : "involvedObject");
      return io ? Scalar(Walk(*io, sub)) : "";
    }
    if (field == "source") {
      const json* s = Walk(obj, "source.component");
      if (!s) s = Walk(obj, "deprecatedSource.component");
      return Scalar(s);
    }
    if (field == "reportingComponent") {
      const json* s = Walk(obj, "reportingComponent");
      if (!s) s = Walk(obj, "reportingController");
      return Scalar(s);
    }
  }
  return Scalar(Walk(obj, field));
}

FieldMap IndexFields(std::string_view group, std::string_view resource, bool namespaced,
                     const json& obj) {
  FieldMap out;
  for (auto& f : SupportedFields(group, resource, namespaced))
    out.emplace_back(f, FieldValue(group, resource, obj, f));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gg::sim
