// The CEL evaluator (see cel.h): lexer, recursive-descent parser to an AST, a compile-time
// checker and cost estimator, and a tree-walking evaluator over JSON values.
#include "sim/cel/cel.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <regex>
#include <stdexcept>

namespace gg::cel {

using json = nlohmann::json;

struct Node {
  enum Kind {
    kLit,
    kIdent,
    kSelect,
    kIndex,
    kCall,
    kUnary,
    kBinary,
    kCond,
    kList,
    kMap,
    kHas
  } kind;
  std::string name;  // ident, field, function or operator
  json literal;
  std::size_t pos = 0;
  std::vector<std::unique_ptr<Node>> kids;  // kCall: kids[0] = target (nullptr: global)
};

namespace {

constexpr const char* kDurationKey = "@cel.duration";

struct SyntaxError : std::runtime_error {
  SyntaxError(std::size_t p, const std::string& m) : std::runtime_error(m), pos(p) {}
  std::size_t pos;
};

struct Token {
  enum Type { kIdent, kString, kInt, kUint, kDouble, kPunct, kEnd } type;
  std::string text;
  std::size_t pos;
};

// A number literal at s[i]: decimal or hex int, uint (u suffix) or double. Returns the
// index after it.
std::size_t LexNumber(std::string_view s, std::size_t i, std::vector<Token>& out) {
  const char c = s[i];
  std::size_t j = i;
  bool is_double = false;
  if (c == '0' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
    j += 2;
    while (j < s.size() && std::isxdigit(static_cast<unsigned char>(s[j]))) ++j;
    std::string text =
        std::to_string(std::stoull(std::string(s.substr(i + 2, j - i - 2)), nullptr, 16));
    if (j < s.size() && (s[j] == 'u' || s[j] == 'U')) {
      out.push_back({Token::kUint, text, i});
      ++j;
    } else {
      out.push_back({Token::kInt, text, i});
    }
    return j;
  }
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
    is_double = true;
    ++j;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  }
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    std::size_t k = j + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
      is_double = true;
      j = k;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    }
  }
  std::string text(s.substr(i, j - i));
  if (!is_double && j < s.size() && (s[j] == 'u' || s[j] == 'U')) {
    out.push_back({Token::kUint, text, i});
    ++j;
  } else {
    out.push_back({is_double ? Token::kDouble : Token::kInt, text, i});
  }
  return j;
}

// Appends code point `cp` to `text` as UTF-8.
void AppendUtf8(std::string& text, unsigned long cp) {
  if (cp < 0x80) {
    text += static_cast<char>(cp);
  } else if (cp < 0x800) {
    text += static_cast<char>(0xC0 | (cp >> 6));
    text += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    text += static_cast<char>(0xE0 | (cp >> 12));
    text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    text += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    text += static_cast<char>(0xF0 | (cp >> 18));
    text += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    text += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A quoted string at s[i] (single or triple quotes, with escapes). Returns the index after
// its closing quote.
std::size_t LexQuoted(std::string_view s, std::size_t i, std::vector<Token>& out) {
  const char c = s[i];
  bool triple = s.substr(i, 3) == std::string(3, c);
  std::size_t j = i + (triple ? 3 : 1);
  std::string text;
  for (;;) {
    if (j >= s.size())
      throw SyntaxError(
          i, "Syntax error: token recognition error at: '" + std::string(s.substr(i)) + "'");
    if (triple ? s.substr(j, 3) == std::string(3, c) : s[j] == c) break;
    if (!triple && s[j] == '\n')
      throw SyntaxError(
          i, "Syntax error: token recognition error at: '" + std::string(s.substr(i, j - i)) + "'");
    if (s[j] == '\\' && j + 1 < s.size()) {
      char e = s[++j];
      switch (e) {
        case 'n':
          text += '\n';
          break;
        case 't':
          text += '\t';
          break;
        case 'r':
          text += '\r';
          break;
        case 'a':
          text += '\a';
          break;
        case 'b':
          text += '\b';
          break;
        case 'f':
          text += '\f';
          break;
        case 'v':
          text += '\v';
          break;
        case '\\':
        case '\'':
        case '"':
        case '`':
        case '?':
          text += e;
          break;
        case 'u':
        case 'x':
        case 'U': {
          std::size_t len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (j + len >= s.size()) throw SyntaxError(j, "Syntax error: invalid escape sequence");
          unsigned long cp = std::stoul(std::string(s.substr(j + 1, len)), nullptr, 16);
          j += len;
          AppendUtf8(text, cp);
          break;
        }
        default:
          throw SyntaxError(j - 1,
                            "Syntax error: invalid escape sequence '\\" + std::string(1, e) + "'");
      }
      ++j;
      continue;
    }
    text += s[j++];
  }
  out.push_back({Token::kString, text, i});
  return j + (triple ? 3 : 1);
}

std::vector<Token> Lex(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if ((c == 'r' || c == 'R') && i + 1 < s.size() &&
               (s[i + 1] == '\'' || s[i + 1] == '"')) {
      char q = s[i + 1];
      std::size_t j = i + 2;
      while (j < s.size() && s[j] != q) ++j;
      if (j >= s.size())
        throw SyntaxError(
            i, "Syntax error: token recognition error at: '" + std::string(s.substr(i)) + "'");
      out.push_back({Token::kString, std::string(s.substr(i + 2, j - i - 2)), i});
      i = j + 1;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::kIdent, std::string(s.substr(i, j - i)), i});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() &&
                std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      i = LexNumber(s, i, out);
    } else if (c == '\'' || c == '"') {
      i = LexQuoted(s, i, out);
    } else {
      static const char* kTwo[] = {"==", "!=", "<=", ">=", "&&", "||"};
      std::string op(1, c);
      for (const char* t : kTwo)
        if (s.substr(i, 2) == t) op = t;
      if (op.size() == 1 &&
          std::string_view("<>!+-*/%.,()[]{}?:").find(c) == std::string_view::npos)
        throw SyntaxError(i, std::string("Syntax error: token recognition error at: '") + c + "'");
      if (op == "=") throw SyntaxError(i, "Syntax error: token recognition error at: '='");
      out.push_back({Token::kPunct, op, i});
      i += op.size();
    }
  }
  out.push_back({Token::kEnd, "", s.size()});
  return out;
}

std::unique_ptr<Node> Make(Node::Kind k, std::size_t pos, std::string name = {}) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  n->pos = pos;
  n->name = std::move(name);
  return n;
}

const std::set<std::string>& Reserved() {
  static const std::set<std::string> r = {
      "as",  "break", "const",   "continue",  "else",   "for", "function", "if",   "import",
      "let", "loop",  "package", "namespace", "return", "var", "void",     "while"};
  return r;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> t) : t_(std::move(t)) {}
  std::unique_ptr<Node> Parse() {
    auto e = Expr();
    if (t_[i_].type != Token::kEnd)
      Fail("Syntax error: extraneous input '" + t_[i_].text + "' expecting <EOF>");
    return e;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) { throw SyntaxError(t_[i_].pos, what); }
  bool Is(const char* p) const { return t_[i_].type == Token::kPunct && t_[i_].text == p; }
  bool IsIdent(const char* w) const { return t_[i_].type == Token::kIdent && t_[i_].text == w; }
  void Expect(const char* p) {
    if (!Is(p)) {
      std::string got = t_[i_].type == Token::kEnd ? "<EOF>" : t_[i_].text;
      Fail(std::string("Syntax error: mismatched input '") + got + "' expecting '" + p + "'");
    }
    ++i_;
  }
  std::unique_ptr<Node> Bin(const std::string& op, std::size_t pos, std::unique_ptr<Node> a,
                            std::unique_ptr<Node> b) {
    auto n = Make(Node::kBinary, pos, op);
    n->kids.push_back(std::move(a));
    n->kids.push_back(std::move(b));
    return n;
  }
  std::unique_ptr<Node> Expr() {
    if (++depth_ > 250) Fail("Syntax error: expression nested too deeply");
    auto c = Or();
    if (Is("?")) {
      std::size_t p = t_[i_++].pos;
      auto n = Make(Node::kCond, p);
      n->kids.push_back(std::move(c));
      n->kids.push_back(Or());
      Expect(":");
      n->kids.push_back(Expr());
      c = std::move(n);
    }
    --depth_;
    return c;
  }
  std::unique_ptr<Node> Or() {
    auto a = And();
    while (Is("||")) {
      std::size_t p = t_[i_++].pos;
      a = Bin("||", p, std::move(a), And());
    }
    return a;
  }
  std::unique_ptr<Node> And() {
    auto a = Rel();
    while (Is("&&")) {
      std::size_t p = t_[i_++].pos;
      a = Bin("&&", p, std::move(a), Rel());
    }
    return a;
  }
  std::unique_ptr<Node> Rel() {
    auto a = Add();
    for (;;) {
      std::string op;
      for (const char* p : {"==", "!=", "<", "<=", ">", ">="})
        if (Is(p)) op = p;
      if (IsIdent("in")) op = "in";
      if (op.empty()) return a;
      std::size_t p = t_[i_++].pos;
      a = Bin(op, p, std::move(a), Add());
    }
  }
  std::unique_ptr<Node> Add() {
    auto a = Mul();
    while (Is("+") || Is("-")) {
      std::size_t p = t_[i_].pos;
      std::string op = t_[i_++].text;
      a = Bin(op, p, std::move(a), Mul());
    }
    return a;
  }
  std::unique_ptr<Node> Mul() {
    auto a = Unary();
    while (Is("*") || Is("/") || Is("%")) {
      std::size_t p = t_[i_].pos;
      std::string op = t_[i_++].text;
      a = Bin(op, p, std::move(a), Unary());
    }
    return a;
  }
  std::unique_ptr<Node> Unary() {
    if (Is("!") || Is("-")) {
      std::size_t p = t_[i_].pos;
      std::string op = t_[i_++].text;
      // Fold a negative numeric literal (so that -9223372036854775808 parses).
      if (op == "-" && (t_[i_].type == Token::kInt || t_[i_].type == Token::kDouble) &&
          !(i_ + 1 < t_.size() && t_[i_ + 1].type == Token::kPunct && t_[i_ + 1].text == ".")) {
        const Token& t = t_[i_++];
        auto n = Make(Node::kLit, p);
        if (t.type == Token::kDouble) {
          n->literal = -std::stod(t.text);
        } else {
          try {
            n->literal = std::stoll("-" + t.text);
          } catch (...) {
            i_--;
            Fail("Syntax error: invalid int literal");
          }
        }
        return n;
      }
      auto n = Make(Node::kUnary, p, op);
      n->kids.push_back(Unary());
      return n;
    }
    return Member();
  }
  std::vector<std::unique_ptr<Node>> Args(const char* close = ")") {
    std::vector<std::unique_ptr<Node>> args;
    if (!Is(close)) {
      args.push_back(Expr());
      while (Is(",")) {
        ++i_;
        if (Is(close)) break;  // trailing comma
        args.push_back(Expr());
      }
    }
    Expect(close);
    return args;
  }
  std::unique_ptr<Node> Member() {
    auto x = Primary();
    for (;;) {
      if (Is(".")) {
        std::size_t p = t_[i_++].pos;
        if (t_[i_].type != Token::kIdent) Fail("Syntax error: no viable alternative at input '.'");
        std::string f = t_[i_].text;
        if (Reserved().count(f) || f == "in" || f == "true" || f == "false" || f == "null")
          Fail("Syntax error: no viable alternative at input '." + f + "'");
        ++i_;
        if (Is("(")) {
          ++i_;
          auto call = Make(Node::kCall, p, f);
          call->kids.push_back(std::move(x));
          for (auto& a : Args()) call->kids.push_back(std::move(a));
          x = std::move(call);
        } else {
          auto sel = Make(Node::kSelect, p, f);
          sel->kids.push_back(std::move(x));
          x = std::move(sel);
        }
      } else if (Is("[")) {
        std::size_t p = t_[i_++].pos;
        auto idx = Make(Node::kIndex, p);
        idx->kids.push_back(std::move(x));
        idx->kids.push_back(Expr());
        Expect("]");
        x = std::move(idx);
      } else {
        return x;
      }
    }
  }
  std::unique_ptr<Node> Primary() {
    const Token& t = t_[i_];
    if (t.type == Token::kString || t.type == Token::kInt || t.type == Token::kUint ||
        t.type == Token::kDouble) {
      auto n = Make(Node::kLit, t.pos);
      try {
        if (t.type == Token::kString)
          n->literal = t.text;
        else if (t.type == Token::kInt)
          n->literal = static_cast<std::int64_t>(std::stoll(t.text));
        else if (t.type == Token::kUint)
          n->literal = static_cast<std::int64_t>(std::stoull(t.text));
        else
          n->literal = std::stod(t.text);
      } catch (...) {
        Fail("Syntax error: invalid int literal");
      }
      ++i_;
      return n;
    }
    if (t.type == Token::kIdent) {
      std::string w = t.text;
      std::size_t p = t.pos;
      if (Reserved().count(w) || w == "in") Fail("Syntax error: mismatched input '" + w + "'");
      ++i_;
      if (w == "true" || w == "false" || w == "null") {
        auto n = Make(Node::kLit, p);
        n->literal = w == "null" ? json(nullptr) : json(w == "true");
        return n;
      }
      if (w == "has" && Is("(")) {
        ++i_;
        auto args = Args();
        if (args.size() != 1 || args[0]->kind != Node::kSelect)
          throw SyntaxError(p, "invalid argument to has() macro");
        auto n = Make(Node::kHas, p);
        n->kids.push_back(std::move(args[0]));
        return n;
      }
      if (Is("(")) {
        ++i_;
        auto call = Make(Node::kCall, p, w);
        call->kids.push_back(nullptr);
        for (auto& a : Args()) call->kids.push_back(std::move(a));
        return call;
      }
      return Make(Node::kIdent, p, w);
    }
    if (Is("(")) {
      ++i_;
      auto e = Expr();
      Expect(")");
      return e;
    }
    if (Is("[")) {
      auto n = Make(Node::kList, t_[i_++].pos);
      for (auto& a : Args("]")) n->kids.push_back(std::move(a));
      return n;
    }
    if (Is("{")) {
      auto n = Make(Node::kMap, t_[i_++].pos);
      if (!Is("}")) {
        for (;;) {
          n->kids.push_back(Expr());
          Expect(":");
          n->kids.push_back(Expr());
          if (!Is(",")) break;
          ++i_;
          if (Is("}")) break;
        }
      }
      Expect("}");
      return n;
    }
    std::string got = t.type == Token::kEnd ? "<EOF>" : t.text;
    Fail("Syntax error: mismatched input '" + got +
         "' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, "
         "NUM_UINT, STRING, BYTES, IDENTIFIER}");
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  int depth_ = 0;
};

std::string Located(std::string_view src, std::size_t pos, const std::string& msg) {
  std::size_t line = 1, col = 0;
  for (std::size_t i = 0; i < pos && i < src.size(); ++i) {
    if (src[i] == '\n') {
      ++line;
      col = 0;
    } else {
      ++col;
    }
  }
  return "ERROR: <input>:" + std::to_string(line) + ":" + std::to_string(col + 1) + ": " + msg;
}

Value Err(std::string e) { return Value{nullptr, std::move(e)}; }
Value Ok(json v) { return Value{std::move(v), ""}; }

bool IsDuration(const json& v) {
  return v.is_object() && v.size() == 1 && v.contains(kDurationKey);
}
std::int64_t DurationNs(const json& v) { return v[kDurationKey].get<std::int64_t>(); }
json MakeDuration(std::int64_t ns) { return json{{kDurationKey, ns}}; }

std::string TypeName(const json& v) {
  if (IsDuration(v)) return "google.protobuf.Duration";
  if (v.is_object()) return "map";
  if (v.is_array()) return "list";
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "bool";
  if (v.is_number_integer()) return "int";
  if (v.is_number_float()) return "double";
  return "null_type";
}

bool IsInt(const json& v) { return v.is_number_integer(); }
std::int64_t I(const json& v) {
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    return u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
               ? std::numeric_limits<std::int64_t>::max()
               : static_cast<std::int64_t>(u);
  }
  return v.get<std::int64_t>();
}

// CEL equality: numbers compare by value across int/double; lists and maps element-wise.
bool Equal(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) {
    if (IsInt(a) && IsInt(b)) return I(a) == I(b);
    return a.get<double>() == b.get<double>();
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!Equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto jt = b.find(it.key());
      if (jt == b.end() || !Equal(*it, *jt)) return false;
    }
    return true;
  }
  return a == b;
}

std::size_t Utf8Length(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

// Code points of a UTF-8 string (for charAt/substring/indexOf, which count code points).
std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = 1;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0xF0)
      len = 4;
    else if (c >= 0xE0)
      len = 3;
    else if (c >= 0xC0)
      len = 2;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

const std::regex* CompiledRegex(const std::string& pattern, std::string* err) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<std::regex>> cache;
  std::scoped_lock lock(mu);
  auto it = cache.find(pattern);
  if (it != cache.end()) {
    if (!it->second) *err = "invalid regex";
    return it->second.get();
  }
  std::shared_ptr<std::regex> re;
  try {
    re = std::make_shared<std::regex>(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    *err = std::string("error parsing regexp: ") + e.what();
  }
  if (cache.size() > 1024) cache.clear();
  cache[pattern] = re;
  return re.get();
}

const std::set<std::string>& MacroNames() {
  static const std::set<std::string> m = {"all", "exists", "exists_one", "map", "filter"};
  return m;
}

// Global functions and member functions the evaluator implements.
const std::set<std::string>& GlobalFunctions() {
  static const std::set<std::string> f = {"size", "int", "uint",     "double", "string",
                                          "bool", "dyn", "duration", "type",   "matches"};
  return f;
}
const std::set<std::string>& MemberFunctions() {
  static const std::set<std::string> f = {
      "size",     "contains", "startsWith",  "endsWith",   "matches",
      "charAt",   "indexOf",  "lastIndexOf", "lowerAscii", "upperAscii",
      "replace",  "split",    "substring",   "trim",       "join",
      "isSorted", "sum",      "min",         "max",        "find",
      "findAll",  "getHours", "getMinutes",  "getSeconds", "getMilliseconds"};
  return f;
}

// ---- function calls: one helper per family of overloads ------------------------------
// `args` holds the evaluated arguments; for a member call args[0] is the receiver.

Value NoOverload(const std::string& f, bool member, const std::vector<json>& args) {
  std::string sig;
  for (std::size_t i = member ? 1 : 0; i < args.size(); ++i)
    sig += (sig.empty() ? "" : ", ") + TypeName(args[i]);
  return Err(
      "no such overload: " + (member && !args.empty() ? TypeName(args[0]) + "." : std::string()) +
      f + "(" + sig + ")");
}

const std::string* StrArg(const std::vector<json>& args, std::size_t i) {
  return i < args.size() && args[i].is_string() ? &args[i].get_ref<const std::string&>() : nullptr;
}

std::optional<std::int64_t> IntArg(const std::vector<json>& args, std::size_t i) {
  if (i < args.size() && IsInt(args[i])) return I(args[i]);
  return std::nullopt;
}

Value ConvertToInt(const std::vector<json>& args) {
  const json& x = args[0];
  if (IsInt(x)) return Ok(I(x));
  if (x.is_number_float()) {
    double d = x.get<double>();
    if (!std::isfinite(d) || d >= 9.2233720368547758e18 || d < -9.2233720368547758e18)
      return Err("integer overflow");
    return Ok(static_cast<std::int64_t>(d));
  }
  if (x.is_string()) {
    try {
      std::size_t used = 0;
      long long v = std::stoll(x.get<std::string>(), &used, 10);
      if (used == x.get<std::string>().size()) return Ok(static_cast<std::int64_t>(v));
    } catch (...) {
    }
    return Err("type conversion error from 'string' to 'int'");
  }
  if (IsDuration(x)) return Ok(DurationNs(x) / 1000000000);
  return NoOverload("int", false, args);
}

Value ConvertToString(const std::vector<json>& args) {
  const json& x = args[0];
  if (x.is_string()) return Ok(x);
  if (IsInt(x) || x.is_boolean()) return Ok(x.dump());
  if (x.is_number_float()) {
    std::string s = x.dump();
    return Ok(s);
  }
  if (IsDuration(x)) {
    std::int64_t ns = DurationNs(x);
    if (ns % 1000000000 == 0) return Ok(std::to_string(ns / 1000000000) + "s");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(ns) / 1e9);
    return Ok(std::string(buf) + "s");
  }
  return NoOverload("string", false, args);
}

Value ConvertToBool(const std::vector<json>& args) {
  const json& x = args[0];
  if (x.is_boolean()) return Ok(x);
  if (x.is_string()) {
    std::string s = x.get<std::string>();
    if (s == "true" || s == "True" || s == "TRUE" || s == "t" || s == "1") return Ok(true);
    if (s == "false" || s == "False" || s == "FALSE" || s == "f" || s == "0") return Ok(false);
    return Err("type conversion error from 'string' to 'bool'");
  }
  return NoOverload("bool", false, args);
}

// The global (non-member) functions other than size(): type conversions and type().
Value CallGlobal(const std::string& f, const std::vector<json>& args) {
  if (args.size() != 1) return NoOverload(f, false, args);
  const json& x = args[0];
  if (f == "dyn") return Ok(x);
  if (f == "int") return ConvertToInt(args);
  if (f == "uint") {
    if (IsInt(x) && I(x) >= 0) return Ok(I(x));
    if (IsInt(x)) return Err("unsigned integer overflow");
    return NoOverload(f, false, args);
  }
  if (f == "double") {
    if (x.is_number()) return Ok(x.get<double>());
    if (x.is_string()) {
      try {
        return Ok(std::stod(x.get<std::string>()));
      } catch (...) {
        return Err("type conversion error from 'string' to 'double'");
      }
    }
    return NoOverload(f, false, args);
  }
  if (f == "string") return ConvertToString(args);
  if (f == "bool") return ConvertToBool(args);
  if (f == "duration") {
    if (IsDuration(x)) return Ok(x);
    if (!x.is_string()) return NoOverload(f, false, args);
    std::int64_t ns = 0;
    if (!ParseDuration(x.get<std::string>(), &ns))
      return Err("type conversion error from 'string' to 'google.protobuf.Duration'");
    return Ok(MakeDuration(ns));
  }
  if (f == "type") return Ok(TypeName(x));
  return Err("no such function: " + f);
}

// matches / find / findAll of string `s` against the regular expression `pattern`.
Value StringRegex(const std::string& f, const std::string& s, const std::string& pattern) {
  std::string err;
  const std::regex* re = CompiledRegex(pattern, &err);
  if (!re) return Err(err);
  if (f == "matches") return Ok(std::regex_search(s, *re));
  std::smatch m;
  if (f == "find") return Ok(std::regex_search(s, m, *re) ? m.str(0) : std::string());
  json all = json::array();
  for (auto it = std::sregex_iterator(s.begin(), s.end(), *re); it != std::sregex_iterator(); ++it)
    all.push_back(it->str(0));
  return Ok(all);
}

Value StringSplit(const std::string& s, const std::string& sep) {
  json out = json::array();
  if (sep.empty()) {
    for (auto& cp : CodePoints(s)) out.push_back(cp);
    return Ok(out);
  }
  std::size_t start = 0, at;
  while ((at = s.find(sep, start)) != std::string::npos) {
    out.push_back(s.substr(start, at - start));
    start = at + sep.size();
  }
  out.push_back(s.substr(start));
  return Ok(out);
}

// indexOf / lastIndexOf of `t` in `s`, counted in code points, with the optional start index.
Value StringIndexOf(const std::string& f, const std::string& s, const std::string& t,
                    const std::vector<json>& args) {
  auto cps = CodePoints(s);
  auto sub = CodePoints(t);
  long long n_s = static_cast<long long>(cps.size()), n_t = static_cast<long long>(sub.size());
  auto at = [&](long long i) {
    for (long long k = 0; k < n_t; ++k)
      if (cps[static_cast<std::size_t>(i + k)] != sub[static_cast<std::size_t>(k)]) return false;
    return true;
  };
  if (f == "indexOf") {
    long long from = 0;
    if (args.size() == 3) {
      auto o = IntArg(args, 2);
      if (!o) return NoOverload(f, true, args);
      from = *o;
      if (from < 0 || from >= std::max(1LL, n_s + (n_s == 0)))
        return Err("index out of range: " + std::to_string(from));
    }
    for (long long i = from; i + n_t <= n_s; ++i)
      if (at(i)) return Ok(static_cast<std::int64_t>(i));
    return Ok(static_cast<std::int64_t>(-1));
  }
  long long from = n_s - n_t;
  if (args.size() == 3) {
    auto o = IntArg(args, 2);
    if (!o) return NoOverload(f, true, args);
    if (*o < 0 || *o >= std::max(1LL, n_s)) return Err("index out of range: " + std::to_string(*o));
    from = std::min<long long>(*o, n_s - n_t);
  }
  for (long long i = from; i >= 0; --i)
    if (at(i)) return Ok(static_cast<std::int64_t>(i));
  return Ok(static_cast<std::int64_t>(-1));
}

Value StringSubstring(const std::string& s, const std::vector<json>& args) {
  auto cps = CodePoints(s);
  auto a = IntArg(args, 1);
  std::optional<std::int64_t> b =
      args.size() == 3 ? IntArg(args, 2) : std::optional<std::int64_t>(cps.size());
  if (!a || !b) return NoOverload("substring", true, args);
  if (*a < 0 || *a > static_cast<std::int64_t>(cps.size()))
    return Err("index out of range: " + std::to_string(*a));
  if (*b < *a || *b > static_cast<std::int64_t>(cps.size()))
    return Err("index out of range: " + std::to_string(*b));
  std::string out;
  for (auto k = *a; k < *b; ++k) out += cps[static_cast<std::size_t>(k)];
  return Ok(out);
}

Value StringReplace(const std::string& s, const std::vector<json>& args) {
  const std::string &from = *StrArg(args, 1), &to = *StrArg(args, 2);
  long long limit = args.size() == 4 ? IntArg(args, 3).value_or(-1) : -1;
  if (from.empty() || limit == 0) return Ok(s);
  std::string out;
  std::size_t start = 0, at;
  long long done = 0;
  while ((limit < 0 || done < limit) && (at = s.find(from, start)) != std::string::npos) {
    out += s.substr(start, at - start) + to;
    start = at + from.size();
    ++done;
  }
  return Ok(out + s.substr(start));
}

// The member functions of a string receiver (args[0]).
Value CallStringMethod(const std::string& f, const std::vector<json>& args) {
  const std::string& s = args[0].get_ref<const std::string&>();
  const std::string* t = StrArg(args, 1);
  if (args.size() == 2 && t) {
    if (f == "startsWith") return Ok(s.rfind(*t, 0) == 0);
    if (f == "endsWith")
      return Ok(s.size() >= t->size() && s.compare(s.size() - t->size(), t->size(), *t) == 0);
    if (f == "contains") return Ok(s.find(*t) != std::string::npos);
    if (f == "matches" || f == "find" || f == "findAll") return StringRegex(f, s, *t);
    if (f == "split") return StringSplit(s, *t);
  }
  if (f == "indexOf" || f == "lastIndexOf") {
    if (!t) return NoOverload(f, true, args);
    return StringIndexOf(f, s, *t, args);
  }
  if (f == "charAt" && args.size() == 2) {
    auto i = IntArg(args, 1);
    if (!i) return NoOverload(f, true, args);
    auto cps = CodePoints(s);
    if (*i < 0 || *i > static_cast<std::int64_t>(cps.size()))
      return Err("index out of range: " + std::to_string(*i));
    return Ok(*i == static_cast<std::int64_t>(cps.size()) ? std::string()
                                                          : cps[static_cast<std::size_t>(*i)]);
  }
  if (f == "substring" && (args.size() == 2 || args.size() == 3)) return StringSubstring(s, args);
  if (args.size() == 1) {
    if (f == "lowerAscii" || f == "upperAscii") {
      std::string out = s;
      for (char& c : out)
        c = f == "lowerAscii" ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                              : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return Ok(out);
    }
    if (f == "trim") {
      std::size_t a = s.find_first_not_of(" \t\n\r\f\v");
      if (a == std::string::npos) return Ok(std::string());
      std::size_t b = s.find_last_not_of(" \t\n\r\f\v");
      return Ok(s.substr(a, b - a + 1));
    }
  }
  if (f == "replace" && (args.size() == 3 || args.size() == 4) && StrArg(args, 1) &&
      StrArg(args, 2)) {
    return StringReplace(s, args);
  }
  return NoOverload(f, true, args);
}

// isSorted / sum / min / max over a list receiver (args[0]).
Value ListAggregate(const std::string& f, const std::vector<json>& args) {
  const json& self = args[0];
  auto less = [](const json& a, const json& b) -> std::optional<bool> {
    if (a.is_number() && b.is_number())
      return IsInt(a) && IsInt(b) ? I(a) < I(b) : a.get<double>() < b.get<double>();
    if (a.is_string() && b.is_string()) return a.get<std::string>() < b.get<std::string>();
    if (IsDuration(a) && IsDuration(b)) return DurationNs(a) < DurationNs(b);
    return std::nullopt;
  };
  if (f == "isSorted") {
    for (std::size_t i = 1; i < self.size(); ++i) {
      auto l = less(self[i], self[i - 1]);
      if (!l) return NoOverload(f, true, args);
      if (*l) return Ok(false);
    }
    return Ok(true);
  }
  if (f == "sum") {
    std::int64_t acc = 0;
    double dacc = 0;
    bool any_double = false;
    for (const auto& e : self) {
      if (IsInt(e)) {
        if (__builtin_add_overflow(acc, I(e), &acc)) return Err("integer overflow");
      } else if (e.is_number_float()) {
        any_double = true;
        dacc += e.get<double>();
      } else {
        return NoOverload(f, true, args);
      }
    }
    if (any_double) return Ok(dacc + static_cast<double>(acc));
    return Ok(acc);
  }
  if (self.empty()) return Err(f + "(list) on an empty list");
  json best = self[0];
  for (std::size_t i = 1; i < self.size(); ++i) {
    auto l = less(self[i], best);
    if (!l) return NoOverload(f, true, args);
    if (f == "min" ? *l : !*l && !Equal(self[i], best)) best = self[i];
  }
  return Ok(best);
}

// The member functions of a list receiver (args[0]).
Value CallListMethod(const std::string& f, const std::vector<json>& args) {
  const json& self = args[0];
  if (f == "join" && args.size() <= 2) {
    std::string sep = args.size() == 2 && args[1].is_string() ? args[1].get<std::string>() : "";
    std::string out;
    for (std::size_t i = 0; i < self.size(); ++i) {
      if (!self[i].is_string()) return NoOverload(f, true, args);
      out += (i ? sep : "") + self[i].get<std::string>();
    }
    return Ok(out);
  }
  if (f == "indexOf" || f == "lastIndexOf") {
    if (args.size() != 2) return NoOverload(f, true, args);
    long long n = static_cast<long long>(self.size());
    if (f == "indexOf") {
      for (long long i = 0; i < n; ++i)
        if (Equal(self[static_cast<std::size_t>(i)], args[1]))
          return Ok(static_cast<std::int64_t>(i));
    } else {
      for (long long i = n - 1; i >= 0; --i)
        if (Equal(self[static_cast<std::size_t>(i)], args[1]))
          return Ok(static_cast<std::int64_t>(i));
    }
    return Ok(static_cast<std::int64_t>(-1));
  }
  if (args.size() == 1 && (f == "isSorted" || f == "sum" || f == "min" || f == "max"))
    return ListAggregate(f, args);
  return NoOverload(f, true, args);
}

class Evaluator {
 public:
  explicit Evaluator(const std::map<std::string, json>& vars) : vars_(vars) {}

  Value Eval(const Node& n) {
    switch (n.kind) {
      case Node::kLit:
        return Ok(n.literal);
      case Node::kIdent:
        return Ident(n);
      case Node::kSelect: {
        Value x = Eval(*n.kids[0]);
        if (!x.ok()) return x;
        std::string field = UnescapeProperty(n.name);
        if (!x.v.is_object() || IsDuration(x.v))
          return Err("no such key: " + field + " (on " + TypeName(x.v) + ")");
        auto it = x.v.find(field);
        if (it == x.v.end()) return Err("no such key: " + field);
        return Ok(*it);
      }
      case Node::kHas: {
        const Node& sel = *n.kids[0];
        Value x = Eval(*sel.kids[0]);
        if (!x.ok()) return x;
        if (!x.v.is_object()) return Err("invalid type for field selection: " + TypeName(x.v));
        auto it = x.v.find(UnescapeProperty(sel.name));
        // A field set to null is absent for has() (a nullable field that is unset).
        return Ok(it != x.v.end() && !it->is_null());
      }
      case Node::kIndex:
        return Index(n);
      case Node::kList: {
        json out = json::array();
        for (const auto& k : n.kids) {
          Value v = Eval(*k);
          if (!v.ok()) return v;
          out.push_back(v.v);
        }
        return Ok(out);
      }
      case Node::kMap:
        return MapLiteral(n);
      case Node::kCond: {
        Value c = Eval(*n.kids[0]);
        if (!c.ok()) return c;
        if (!c.v.is_boolean()) return Err("no such overload: " + TypeName(c.v) + " ? _ : _");
        return Eval(*n.kids[c.v.get<bool>() ? 1 : 2]);
      }
      case Node::kUnary:
        return Unary(n);
      case Node::kBinary:
        return Binary(n);
      case Node::kCall:
        return Call(n);
    }
    return Err("unreachable");
  }

 private:
  // A macro variable (innermost first) or a declared variable.
  Value Ident(const Node& n) {
    for (auto it = bound_.rbegin(); it != bound_.rend(); ++it)
      if (it->first == n.name) return Ok(*it->second);
    auto it = vars_.find(n.name);
    if (it == vars_.end()) return Err("undeclared reference to '" + n.name + "'");
    return Ok(it->second);
  }

  // x[i]: a map key or a list index (an integral double counts).
  Value Index(const Node& n) {
    Value x = Eval(*n.kids[0]);
    if (!x.ok()) return x;
    Value i = Eval(*n.kids[1]);
    if (!i.ok()) return i;
    if (x.v.is_object() && i.v.is_string()) {
      auto it = x.v.find(i.v.get<std::string>());
      if (it == x.v.end()) return Err("no such key: " + i.v.get<std::string>());
      return Ok(*it);
    }
    if (x.v.is_array() && (IsInt(i.v) || (i.v.is_number_float() &&
                                          std::floor(i.v.get<double>()) == i.v.get<double>()))) {
      long long k = IsInt(i.v) ? I(i.v) : static_cast<long long>(i.v.get<double>());
      if (k < 0 || k >= static_cast<long long>(x.v.size()))
        return Err("index out of bounds: " + std::to_string(k));
      return Ok(x.v[static_cast<std::size_t>(k)]);
    }
    return Err("no such overload: " + TypeName(x.v) + "[" + TypeName(i.v) + "]");
  }

  // {k: v, ...}: string, int or bool keys, each once.
  Value MapLiteral(const Node& n) {
    json out = json::object();
    for (std::size_t k = 0; k + 1 < n.kids.size(); k += 2) {
      Value key = Eval(*n.kids[k]);
      if (!key.ok()) return key;
      Value v = Eval(*n.kids[k + 1]);
      if (!v.ok()) return v;
      std::string ks;
      if (key.v.is_string())
        ks = key.v.get<std::string>();
      else if (IsInt(key.v) || key.v.is_boolean())
        ks = key.v.dump();
      else
        return Err("unsupported key type: " + TypeName(key.v));
      if (out.contains(ks)) return Err("Failed with repeated key");
      out[ks] = v.v;
    }
    return Ok(out);
  }

  // !x and -x (int overflow is an error).
  Value Unary(const Node& n) {
    Value x = Eval(*n.kids[0]);
    if (!x.ok()) return x;
    if (n.name == "!" && x.v.is_boolean()) return Ok(!x.v.get<bool>());
    if (n.name == "-" && IsInt(x.v)) {
      if (I(x.v) == std::numeric_limits<std::int64_t>::min()) return Err("integer overflow");
      return Ok(-I(x.v));
    }
    if (n.name == "-" && x.v.is_number_float()) return Ok(-x.v.get<double>());
    if (n.name == "-" && IsDuration(x.v)) return Ok(MakeDuration(-DurationNs(x.v)));
    return Err("no such overload: " + n.name + TypeName(x.v));
  }

  // CEL's logical operators are commutative over errors: false && error == false.
  Value Logic(const Node& n, bool is_and) {
    Value a = Eval(*n.kids[0]);
    if (a.ok() && a.v.is_boolean() && a.v.get<bool>() != is_and) return a;
    Value b = Eval(*n.kids[1]);
    if (b.ok() && b.v.is_boolean() && b.v.get<bool>() != is_and) return b;
    if (!a.ok()) return a;
    if (!b.ok()) return b;
    if (!a.v.is_boolean() || !b.v.is_boolean())
      return Err("no such overload: " + TypeName(a.v) + " " + n.name + " " + TypeName(b.v));
    return Ok(is_and);
  }

  static Value IntOp(const std::string& op, std::int64_t x, std::int64_t y) {
    std::int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return Err("integer overflow");
    } else if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return Err("integer overflow");
    } else if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return Err("integer overflow");
    } else if (op == "/" || op == "%") {
      if (y == 0) return Err(op == "/" ? "division by zero" : "modulus by zero");
      if (x == std::numeric_limits<std::int64_t>::min() && y == -1) return Err("integer overflow");
      r = op == "/" ? x / y : x % y;
    }
    return Ok(r);
  }

  Value Binary(const Node& n) {
    if (n.name == "&&") return Logic(n, true);
    if (n.name == "||") return Logic(n, false);
    Value a = Eval(*n.kids[0]);
    if (!a.ok()) return a;
    Value b = Eval(*n.kids[1]);
    if (!b.ok()) return b;
    const json &x = a.v, &y = b.v;
    if (n.name == "==") return Ok(Equal(x, y));
    if (n.name == "!=") return Ok(!Equal(x, y));
    if (n.name == "in") {
      if (y.is_object()) return x.is_string() ? Ok(y.contains(x.get<std::string>())) : Ok(false);
      if (y.is_array()) {
        for (const auto& e : y)
          if (Equal(e, x)) return Ok(true);
        return Ok(false);
      }
      return Err("no such overload: _in_ on " + TypeName(y));
    }
    const bool ints = IsInt(x) && IsInt(y);
    const bool nums = x.is_number() && y.is_number();
    const bool strs = x.is_string() && y.is_string();
    const bool durs = IsDuration(x) && IsDuration(y);
    const std::string& op = n.name;
    if (op == "+" || op == "-" || op == "*" || op == "/" || op == "%") {
      if (ints) return IntOp(op, I(x), I(y));
      if (nums && op != "%" && (x.is_number_float() || y.is_number_float())) {
        // CEL has no implicit int<->double conversion; a real checker refuses 1 + 1.0.
        if (!(x.is_number_float() && y.is_number_float()))
          return Err("no such overload: " + TypeName(x) + " " + op + " " + TypeName(y));
        double p = x.get<double>(), q = y.get<double>();
        if (op == "+") return Ok(p + q);
        if (op == "-") return Ok(p - q);
        if (op == "*") return Ok(p * q);
        return Ok(p / q);
      }
      if (op == "+" && strs) return Ok(x.get<std::string>() + y.get<std::string>());
      if (op == "+" && x.is_array() && y.is_array()) {
        json out = x;
        for (const auto& e : y) out.push_back(e);
        return Ok(out);
      }
      if (durs && (op == "+" || op == "-")) {
        Value r = IntOp(op, DurationNs(x), DurationNs(y));
        if (!r.ok()) return r;
        return Ok(MakeDuration(r.v.get<std::int64_t>()));
      }
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int c = 0;
      bool ok = true;
      if (ints) {
        c = I(x) < I(y) ? -1 : I(x) > I(y);
      } else if (nums) {
        double p = x.get<double>(), q = y.get<double>();
        c = p < q ? -1 : p > q;
      } else if (strs) {
        int k = x.get<std::string>().compare(y.get<std::string>());
        c = k < 0 ? -1 : k > 0;
      } else if (durs) {
        c = DurationNs(x) < DurationNs(y) ? -1 : DurationNs(x) > DurationNs(y);
      } else if (x.is_boolean() && y.is_boolean()) {
        c = static_cast<int>(x.get<bool>()) - static_cast<int>(y.get<bool>());
      } else {
        ok = false;
      }
      if (ok) {
        if (op == "<") return Ok(c < 0);
        if (op == "<=") return Ok(c <= 0);
        if (op == ">") return Ok(c > 0);
        return Ok(c >= 0);
      }
    }
    return Err("no such overload: " + TypeName(x) + " " + op + " " + TypeName(y));
  }

  // Macros bind a variable over a list's elements or a map's keys.
  Value Macro(const Node& n, const json& range) {
    const bool three = n.name == "map" && n.kids.size() == 4;
    if ((n.kids.size() != 3 && !three) || n.kids[1]->kind != Node::kIdent)
      return Err(n.name + "() needs (var, expression)");
    const std::string var = n.kids[1]->name;
    std::vector<json> items;
    if (range.is_object() && !IsDuration(range)) {
      for (auto it = range.begin(); it != range.end(); ++it) items.push_back(it.key());
    } else if (range.is_array()) {
      for (const auto& e : range) items.push_back(e);
    } else {
      return Err("no such overload: " + TypeName(range) + "." + n.name + "()");
    }
    json out = json::array();
    std::string first_error;
    bool decided = false, result = n.name == "all";
    long long true_count = 0;
    for (const auto& item : items) {
      bound_.emplace_back(var, &item);
      Value v = Eval(*n.kids[2]);
      if (three && v.ok() && v.v == true)
        v = Eval(*n.kids[3]);
      else if (three && v.ok() && v.v == false) {
        bound_.pop_back();
        continue;
      }
      bound_.pop_back();
      if (n.name == "map") {
        if (!v.ok()) return v;
        out.push_back(v.v);
        continue;
      }
      if (!v.ok()) {
        if (n.name == "filter" || n.name == "exists_one") return v;
        if (first_error.empty()) first_error = v.error;
        continue;
      }
      if (!v.v.is_boolean())
        return Err("no such overload: predicate of " + n.name + "() is " + TypeName(v.v));
      bool b = v.v.get<bool>();
      if (n.name == "filter") {
        if (b) out.push_back(item);
      } else if (n.name == "exists_one") {
        if (b) ++true_count;
      } else if (n.name == "all" && !b) {
        decided = true, result = false;
        break;
      } else if (n.name == "exists" && b) {
        decided = true, result = true;
        break;
      }
    }
    if (n.name == "filter" || n.name == "map") return Ok(out);
    if (n.name == "exists_one") return Ok(true_count == 1);
    if (decided) return Ok(result);
    if (!first_error.empty()) return Err(first_error);
    return Ok(result);
  }

  Value Call(const Node& n) {
    const bool member = n.kids[0] != nullptr;
    if (member && MacroNames().count(n.name) && n.kids.size() >= 3 && n.kids[1] &&
        n.kids[1]->kind == Node::kIdent) {
      Value range = Eval(*n.kids[0]);
      if (!range.ok()) return range;
      return Macro(n, range.v);
    }
    std::vector<json> args;
    for (std::size_t k = 0; k < n.kids.size(); ++k) {
      if (!n.kids[k]) continue;
      Value v = Eval(*n.kids[k]);
      if (!v.ok()) return v;
      args.push_back(std::move(v.v));
    }
    const std::string& f = n.name;
    if (f == "size" && args.size() == 1) {
      const json& x = args[0];
      if (x.is_string()) return Ok(static_cast<std::int64_t>(Utf8Length(x.get<std::string>())));
      if ((x.is_array() || x.is_object()) && !IsDuration(x))
        return Ok(static_cast<std::int64_t>(x.size()));
      return NoOverload(f, member, args);
    }
    if (!member) return CallGlobal(f, args);
    const json& self = args[0];
    if (self.is_string()) return CallStringMethod(f, args);
    if (self.is_array()) return CallListMethod(f, args);
    if (IsDuration(self) && args.size() == 1) {
      std::int64_t ns = DurationNs(self);
      if (f == "getHours") return Ok(ns / 3600000000000LL);
      if (f == "getMinutes") return Ok(ns / 60000000000LL);
      if (f == "getSeconds") return Ok(ns / 1000000000LL);
      if (f == "getMilliseconds") return Ok(ns / 1000000LL);
    }
    if (!MemberFunctions().count(f)) return Err("no such function: " + f);
    return NoOverload(f, true, args);
  }

  const std::map<std::string, json>& vars_;
  std::vector<std::pair<std::string, const json*>> bound_;  // macro variables, innermost last
};

// ---- compile-time checks and cost ---------------------------------------------------

constexpr std::uint64_t kUnbounded = std::numeric_limits<std::uint64_t>::max();

std::uint64_t SatAdd(std::uint64_t a, std::uint64_t b) {
  return a > kUnbounded - b ? kUnbounded : a + b;
}
std::uint64_t SatMul(std::uint64_t a, std::uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kUnbounded / b ? kUnbounded : a * b;
}
std::uint64_t Tenth(std::uint64_t n) { return n / 10 + (n % 10 ? 1 : 0); }  // ceil(0.1 n)

const json& Dyn() {
  static const json kNull;
  return kNull;
}

// The schema of field `f` of a value with schema `s` (null: dyn); `missing` set when the
// schema declares fields and `f` is not one of them.
const json& FieldSchema(const json& s, const std::string& f, bool* missing) {
  *missing = false;
  if (!s.is_object()) return Dyn();
  if (auto p = s.find("properties"); p != s.end() && p->is_object()) {
    if (auto it = p->find(f); it != p->end()) return *it;
  }
  if (auto a = s.find("additionalProperties"); a != s.end() && a->is_object()) return *a;
  if (s.value("x-kubernetes-preserve-unknown-fields", false)) return Dyn();
  if (s.value("x-kubernetes-embedded-resource", false) &&
      (f == "apiVersion" || f == "kind" || f == "metadata"))
    return Dyn();
  if (s.contains("properties") || s.value("type", "") == "object" ||
      s.contains("additionalProperties")) {
    *missing = s.value("type", "object") == "object" && !s.contains("additionalProperties");
  }
  return Dyn();
}

const json& ElemSchema(const json& s) {
  if (!s.is_object()) return Dyn();
  if (auto it = s.find("items"); it != s.end() && it->is_object()) return *it;
  if (auto a = s.find("additionalProperties"); a != s.end() && a->is_object()) return *a;
  return Dyn();
}

std::uint64_t MinJsonSize(const json& s) {
  if (!s.is_object()) return 1;
  if (s.value("x-kubernetes-int-or-string", false)) return 1;
  std::string t = s.value("type", "");
  if (t == "string") return 2 + static_cast<std::uint64_t>(s.value("minLength", 0));
  if (t == "boolean") return 4;
  if (t == "integer" || t == "number") return 1;
  if (t == "array" || t == "object") return 2;
  return 1;
}

struct Static {
  std::uint64_t cost = 0;
  const json* schema = nullptr;  // nullptr: dyn
  std::uint64_t size = 0;        // strings: max length, lists/maps: max element count; 0: scalar
};

class Checker {
 public:
  explicit Checker(const Declarations& decls) : decls_(decls) {}
  std::string error;
  std::size_t error_pos = 0;

  Static Walk(const Node& n) {
    Static r;
    switch (n.kind) {
      case Node::kLit:
        if (n.literal.is_string()) r.size = n.literal.get<std::string>().size();
        return r;
      case Node::kIdent:
        return WalkIdent(n);
      case Node::kSelect:
      case Node::kHas:
        return WalkSelect(n);
      case Node::kIndex: {
        Static a = Walk(*n.kids[0]);
        Static b = Walk(*n.kids[1]);
        r.cost = SatAdd(SatAdd(a.cost, b.cost), 1);
        if (a.schema) {
          const json& es = ElemSchema(*a.schema);
          r.schema = es.is_null() ? nullptr : &es;
        }
        Sizes(r);
        return r;
      }
      case Node::kList:
      case Node::kMap: {
        r.cost = n.kind == Node::kList ? 10 : 30;
        for (const auto& k : n.kids) r.cost = SatAdd(r.cost, Walk(*k).cost);
        r.size = n.kind == Node::kList ? n.kids.size() : n.kids.size() / 2;
        return r;
      }
      case Node::kCond: {
        Static c = Walk(*n.kids[0]);
        Static a = Walk(*n.kids[1]);
        Static b = Walk(*n.kids[2]);
        r.cost = SatAdd(c.cost, std::max(a.cost, b.cost));
        r.size = std::max(a.size, b.size);
        return r;
      }
      case Node::kUnary: {
        Static a = Walk(*n.kids[0]);
        r.cost = SatAdd(a.cost, 1);
        return r;
      }
      case Node::kBinary:
        return WalkBinary(n);
      case Node::kCall:
        return Call(n);
    }
    return r;
  }

 private:
  // A macro variable or a declaration: its schema and sizes; undeclared is an error.
  Static WalkIdent(const Node& n) {
    Static r;
    r.cost = 1;
    for (auto it = bound_.rbegin(); it != bound_.rend(); ++it)
      if (it->first == n.name) {
        r.schema = it->second;
        Sizes(r);
        return r;
      }
    auto it = decls_.find(n.name);
    if (it == decls_.end()) {
      Fail(n.pos, "undeclared reference to '" + n.name + "' (in container '')");
      return r;
    }
    r.schema = it->second.is_null() ? nullptr : &it->second;
    Sizes(r);
    return r;
  }

  // x.f and has(x.f): the field must exist in x's schema (when x has one).
  Static WalkSelect(const Node& n) {
    Static r;
    const Node& sel = n.kind == Node::kHas ? *n.kids[0] : n;
    Static base = Walk(*sel.kids[0]);
    r.cost = SatAdd(base.cost, 1);
    if (base.schema) {
      bool missing = false;
      const json& fs = FieldSchema(*base.schema, UnescapeProperty(sel.name), &missing);
      if (missing) Fail(sel.pos, "undefined field '" + sel.name + "'");
      r.schema = fs.is_null() ? nullptr : &fs;
    }
    if (n.kind == Node::kHas) {
      r.schema = nullptr;
      r.size = 0;
      return r;
    }
    Sizes(r);
    return r;
  }

  // Operators: comparisons cost with the shorter operand, `in` with the list, + with the result.
  Static WalkBinary(const Node& n) {
    Static r;
    Static a = Walk(*n.kids[0]);
    Static b = Walk(*n.kids[1]);
    r.cost = SatAdd(a.cost, b.cost);
    const std::string& op = n.name;
    if (op == "&&" || op == "||") return r;
    std::uint64_t extra = 1;
    if (op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=") {
      // Strings and lists compare in time proportional to the shorter one.
      extra = SatAdd(1, Tenth(std::min(a.size, b.size)));
    } else if (op == "in") {
      extra = SatAdd(1, b.size);
    } else if (op == "+") {
      r.size = SatAdd(a.size, b.size);
      extra = SatAdd(1, Tenth(r.size));
    }
    r.cost = SatAdd(r.cost, extra);
    return r;
  }

  void Fail(std::size_t pos, std::string msg) {
    if (error.empty()) {
      error = std::move(msg);
      error_pos = pos;
    }
  }
  void Sizes(Static& r) {
    if (!r.schema) return;
    std::string t = r.schema->value("type", "");
    if (t == "string")
      r.size = MaxStringLength(*r.schema);
    else if (t == "array")
      r.size = MaxListItems(*r.schema);
    else if (t == "object" && r.schema->contains("additionalProperties"))
      r.size = MaxMapProperties(*r.schema);
  }
  static std::uint64_t KnownSize(const Static& s) { return s.size; }

  Static Call(const Node& n) {
    Static r;
    const bool member = n.kids[0] != nullptr;
    if (member && MacroNames().count(n.name) && n.kids.size() >= 3 && n.kids[1] &&
        n.kids[1]->kind == Node::kIdent) {
      Static range = Walk(*n.kids[0]);
      const json* elem = nullptr;
      if (range.schema) {
        if (range.schema->value("type", "") == "object" &&
            !range.schema->contains("additionalProperties")) {
          static const json kString = {{"type", "string"}};
          elem = &kString;  // iterating an object's keys
        } else {
          const json& es = ElemSchema(*range.schema);
          elem = es.is_null() ? nullptr : &es;
        }
      }
      bound_.emplace_back(n.kids[1]->name, elem);
      std::uint64_t body = 0;
      for (std::size_t k = 2; k < n.kids.size(); ++k) body = SatAdd(body, Walk(*n.kids[k]).cost);
      bound_.pop_back();
      std::uint64_t iterations = KnownSize(range);
      // Each iteration: the loop condition, the step (body) and the accumulator update.
      r.cost = SatAdd(range.cost, SatMul(iterations, SatAdd(body, 2)));
      if (n.name == "filter" || n.name == "map") {
        r.cost = SatAdd(r.cost, SatMul(iterations, 1));
        r.size = range.size;
      }
      return r;
    }
    if (member && MacroNames().count(n.name)) {
      Fail(n.pos, n.name + "() needs (variable, expression)");
      return r;
    }
    const std::set<std::string>& known = member ? MemberFunctions() : GlobalFunctions();
    if (!known.count(n.name)) {
      if (member)
        Fail(n.pos, "undeclared reference to '" + n.name + "' (in container '')");
      else
        Fail(n.pos, "undeclared reference to '" + n.name + "' (in container '')");
      return r;
    }
    std::vector<Static> args;
    for (const auto& k : n.kids) {
      if (!k) continue;
      args.push_back(Walk(*k));
      r.cost = SatAdd(r.cost, args.back().cost);
    }
    std::uint64_t self_size = args.empty() ? 0 : KnownSize(args[0]);
    const std::string& f = n.name;
    std::uint64_t extra = 1;
    if (f == "contains" || f == "startsWith" || f == "endsWith" || f == "lowerAscii" ||
        f == "upperAscii" || f == "trim" || f == "split" || f == "replace" || f == "join" ||
        f == "indexOf" || f == "lastIndexOf" || f == "substring" || f == "charAt") {
      extra = SatAdd(1, Tenth(self_size));
    } else if (f == "matches" || f == "find" || f == "findAll") {
      std::uint64_t pat = args.size() >= 2 ? KnownSize(args[1]) : 1;
      extra = SatAdd(1, SatMul(Tenth(self_size), std::max<std::uint64_t>(1, Tenth(pat) * 2)));
    } else if (f == "isSorted" || f == "sum" || f == "min" || f == "max") {
      extra = SatAdd(1, self_size);
    }
    r.cost = SatAdd(r.cost, extra);
    // Results that keep their input's size bound.
    if (f == "lowerAscii" || f == "upperAscii" || f == "trim" || f == "substring" ||
        f == "filter" || f == "split" || f == "replace" || f == "join" || f == "findAll")
      r.size = self_size;
    return r;
  }

  const Declarations& decls_;
  std::vector<std::pair<std::string, const json*>> bound_;
};

bool Mentions(const Node& n, std::string_view name) {
  if (n.kind == Node::kIdent && n.name == name) return true;
  for (const auto& k : n.kids)
    if (k && Mentions(*k, name)) return true;
  return false;
}

}  // namespace

std::string UnescapeProperty(const std::string& name) {
  if (name.find("__") == std::string::npos) return name;
  if (name.size() > 4 && name.rfind("__", 0) == 0 && name.compare(name.size() - 2, 2, "__") == 0) {
    std::string inner = name.substr(2, name.size() - 4);
    if (Reserved().count(inner) || inner == "true" || inner == "false" || inner == "null" ||
        inner == "in")
      return inner;
  }
  std::string out;
  for (std::size_t i = 0; i < name.size();) {
    if (name.compare(i, 2, "__") == 0) {
      std::size_t end = name.find("__", i + 2);
      if (end != std::string::npos) {
        std::string word = name.substr(i + 2, end - i - 2);
        const char* rep = word == "underscores" ? "__"
                          : word == "dot"       ? "."
                          : word == "dash"      ? "-"
                          : word == "slash"     ? "/"
                                                : nullptr;
        if (rep) {
          out += rep;
          i = end + 2;
          continue;
        }
      }
    }
    out += name[i++];
  }
  return out;
}

bool ParseDuration(std::string_view s, std::int64_t* ns) {
  if (s.empty()) return false;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") {
    *ns = 0;
    return true;
  }
  if (s.empty()) return false;
  long double total = 0;
  while (!s.empty()) {
    std::size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == 0) return false;
    long double v;
    try {
      v = std::stold(std::string(s.substr(0, i)));
    } catch (...) {
      return false;
    }
    s.remove_prefix(i);
    std::size_t u = 0;
    while (u < s.size() && !std::isdigit(static_cast<unsigned char>(s[u])) && s[u] != '.') ++u;
    std::string_view unit = s.substr(0, u);
    s.remove_prefix(u);
    long double mult;
    if (unit == "ns")
      mult = 1;
    else if (unit == "us" || unit == "µs" || unit == "μs")
      mult = 1e3L;
    else if (unit == "ms")
      mult = 1e6L;
    else if (unit == "s")
      mult = 1e9L;
    else if (unit == "m")
      mult = 60e9L;
    else if (unit == "h")
      mult = 3600e9L;
    else
      return false;
    total += v * mult;
  }
  if (total > 9.2233720368547758e18L) return false;
  *ns = static_cast<std::int64_t>(neg ? -total : total);
  return true;
}

std::uint64_t MaxListItems(const json& s) {
  if (s.is_object())
    if (auto m = s.find("maxItems"); m != s.end() && m->is_number_integer())
      return m->get<std::uint64_t>();
  return (kMaxRequestSizeBytes - 2) / (MinJsonSize(ElemSchema(s)) + 1);
}
std::uint64_t MaxStringLength(const json& s) {
  if (s.is_object()) {
    // maxLength counts characters; a character is up to 4 bytes of UTF-8, and the estimator
    // sizes strings in bytes.
    if (auto m = s.find("maxLength"); m != s.end() && m->is_number_integer())
      return 4 * m->get<std::uint64_t>();
    if (auto e = s.find("enum"); e != s.end() && e->is_array()) {
      std::uint64_t longest = 0;
      for (const auto& v : *e)
        if (v.is_string()) longest = std::max<std::uint64_t>(longest, v.get<std::string>().size());
      return longest;
    }
    std::string fmt = s.value("format", "");
    if (fmt == "date-time") return 32;
    if (fmt == "date") return 10;
    if (fmt == "duration") return 64;
  }
  return kMaxRequestSizeBytes - 2;
}
std::uint64_t MaxMapProperties(const json& s) {
  if (s.is_object())
    if (auto m = s.find("maxProperties"); m != s.end() && m->is_number_integer())
      return m->get<std::uint64_t>();
  // A property is at least `"":` plus its value plus a comma.
  return (kMaxRequestSizeBytes - 2) / (MinJsonSize(ElemSchema(s)) + 4);
}

Program::Program(std::string_view expr) : source_(expr) {
  try {
    root_ = Parser(Lex(expr)).Parse();
  } catch (const SyntaxError& e) {
    root_.reset();
    error_ = Located(expr, e.pos, e.what());
  } catch (const std::exception& e) {
    root_.reset();
    error_ = Located(expr, 0, std::string("Syntax error: ") + e.what());
  }
}
Program::~Program() = default;
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;

std::string Program::Check(const Declarations& decls) const {
  if (!root_) return error_;
  Checker c(decls);
  c.Walk(*root_);
  if (c.error.empty()) return "";
  return Located(source_, c.error_pos, c.error);
}

bool Program::References(std::string_view name) const { return root_ && Mentions(*root_, name); }

CostEstimate Program::EstimateCost(const Declarations& decls) const {
  CostEstimate e;
  if (!root_) return e;
  Checker c(decls);
  e.max = c.Walk(*root_).cost;
  return e;
}

Value Program::Eval(const std::map<std::string, json>& vars) const {
  if (!root_) return Err("not parsed: " + error_);
  return Evaluator(vars).Eval(*root_);
}

}  // namespace gg::cel
