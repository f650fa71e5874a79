// The CEL subset evaluator (see cel.h): lexer, recursive-descent parser to an AST, and a
// tree-walking evaluator over JSON values.
#include "admission/cel.h"

#include <cctype>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

namespace gg::cel {

using json = nlohmann::json;

struct Node {
  enum Kind { kLit, kIdent, kSelect, kIndex, kCall, kUnary, kBinary, kCond, kList, kHas } kind;
  std::string name;  // ident, field, function or operator
  json literal;
  std::vector<std::unique_ptr<Node>> kids;  // kCall: kids[0] = target (nullptr: global)
};

namespace {

struct Token {
  enum Type { kIdent, kString, kInt, kPunct, kEnd } type;
  std::string text;
  std::size_t pos;
};

std::vector<Token> Lex(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::kIdent, std::string(s.substr(i, j - i)), i});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back({Token::kInt, std::string(s.substr(i, j - i)), i});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string text;
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != c) {
        if (s[j] == '\\' && j + 1 < s.size()) ++j;
        text += s[j++];
      }
      if (j >= s.size()) throw std::runtime_error("unterminated string at " + std::to_string(i));
      out.push_back({Token::kString, text, i});
      i = j + 1;
    } else {
      static const char* kTwo[] = {"==", "!=", "<=", ">=", "&&", "||"};
      std::string op(1, c);
      for (const char* t : kTwo)
        if (s.substr(i, 2) == t) op = t;
      if (op.size() == 1 && std::string_view("<>!+-.,()[]?:").find(c) == std::string_view::npos)
        throw std::runtime_error(std::string("unexpected '") + c + "' at " + std::to_string(i));
      out.push_back({Token::kPunct, op, i});
      i += op.size();
    }
  }
  out.push_back({Token::kEnd, "", s.size()});
  return out;
}

std::unique_ptr<Node> Make(Node::Kind k, std::string name = {}) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  n->name = std::move(name);
  return n;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> t) : t_(std::move(t)) {}
  std::unique_ptr<Node> Parse() {
    auto e = Expr();
    if (t_[i_].type != Token::kEnd) Fail("trailing input");
    return e;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) {
    throw std::runtime_error(what + " at " + std::to_string(t_[i_].pos) + " ('" + t_[i_].text + "')");
  }
  bool Is(const char* p) const { return t_[i_].type == Token::kPunct && t_[i_].text == p; }
  bool IsIdent(const char* w) const { return t_[i_].type == Token::kIdent && t_[i_].text == w; }
  void Expect(const char* p) {
    if (!Is(p)) Fail(std::string("expected '") + p + "'");
    ++i_;
  }
  std::unique_ptr<Node> Bin(const std::string& op, std::unique_ptr<Node> a, std::unique_ptr<Node> b) {
    auto n = Make(Node::kBinary, op);
    n->kids.push_back(std::move(a));
    n->kids.push_back(std::move(b));
    return n;
  }
  std::unique_ptr<Node> Expr() {
    auto c = Or();
    if (!Is("?")) return c;
    ++i_;
    auto n = Make(Node::kCond);
    n->kids.push_back(std::move(c));
    n->kids.push_back(Or());
    Expect(":");
    n->kids.push_back(Expr());
    return n;
  }
  std::unique_ptr<Node> Or() {
    auto a = And();
    while (Is("||")) {
      ++i_;
      a = Bin("||", std::move(a), And());
    }
    return a;
  }
  std::unique_ptr<Node> And() {
    auto a = Rel();
    while (Is("&&")) {
      ++i_;
      a = Bin("&&", std::move(a), Rel());
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
      ++i_;
      a = Bin(op, std::move(a), Add());
    }
  }
  std::unique_ptr<Node> Add() {
    auto a = Unary();
    while (Is("+") || Is("-")) {
      std::string op = t_[i_++].text;
      a = Bin(op, std::move(a), Unary());
    }
    return a;
  }
  std::unique_ptr<Node> Unary() {
    if (Is("!") || Is("-")) {
      auto n = Make(Node::kUnary, t_[i_++].text);
      n->kids.push_back(Unary());
      return n;
    }
    return Member();
  }
  std::vector<std::unique_ptr<Node>> Args() {
    std::vector<std::unique_ptr<Node>> args;
    Expect("(");
    if (!Is(")")) {
      args.push_back(Expr());
      while (Is(",")) {
        ++i_;
        args.push_back(Expr());
      }
    }
    Expect(")");
    return args;
  }
  std::unique_ptr<Node> Member() {
    auto x = Primary();
    for (;;) {
      if (Is(".")) {
        ++i_;
        if (t_[i_].type != Token::kIdent) Fail("expected a field name");
        std::string f = t_[i_++].text;
        if (Is("(")) {
          auto call = Make(Node::kCall, f);
          call->kids.push_back(std::move(x));
          for (auto& a : Args()) call->kids.push_back(std::move(a));
          x = std::move(call);
        } else {
          auto sel = Make(Node::kSelect, f);
          sel->kids.push_back(std::move(x));
          x = std::move(sel);
        }
      } else if (Is("[")) {
        ++i_;
        auto idx = Make(Node::kIndex);
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
    if (t.type == Token::kString || t.type == Token::kInt) {
      auto n = Make(Node::kLit);
      n->literal = t.type == Token::kString ? json(t.text) : json(std::stoll(t.text));
      ++i_;
      return n;
    }
    if (t.type == Token::kIdent) {
      std::string w = t.text;
      ++i_;
      if (w == "true" || w == "false" || w == "null") {
        auto n = Make(Node::kLit);
        n->literal = w == "null" ? json(nullptr) : json(w == "true");
        return n;
      }
      if (w == "has") {
        auto args = Args();
        if (args.size() != 1 || args[0]->kind != Node::kSelect) Fail("has() needs a field selection");
        auto n = Make(Node::kHas);
        n->kids.push_back(std::move(args[0]));
        return n;
      }
      if (Is("(")) {
        auto call = Make(Node::kCall, w);
        call->kids.push_back(nullptr);
        for (auto& a : Args()) call->kids.push_back(std::move(a));
        return call;
      }
      return Make(Node::kIdent, w);
    }
    if (Is("(")) {
      ++i_;
      auto e = Expr();
      Expect(")");
      return e;
    }
    if (Is("[")) {
      ++i_;
      auto n = Make(Node::kList);
      if (!Is("]")) {
        n->kids.push_back(Expr());
        while (Is(",")) {
          ++i_;
          n->kids.push_back(Expr());
        }
      }
      Expect("]");
      return n;
    }
    Fail("unexpected token");
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
};

Value Err(std::string e) { return Value{nullptr, std::move(e)}; }
Value Ok(json v) { return Value{std::move(v), ""}; }

std::string TypeName(const json& v) {
  if (v.is_object()) return "map";
  if (v.is_array()) return "list";
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "bool";
  if (v.is_number()) return "int";
  return "null";
}

class Evaluator {
 public:
  explicit Evaluator(std::map<std::string, json> vars) : vars_(std::move(vars)) {}

  Value Eval(const Node& n) {
    switch (n.kind) {
      case Node::kLit: return Ok(n.literal);
      case Node::kIdent: {
        auto it = vars_.find(n.name);
        if (it == vars_.end()) return Err("undeclared reference to '" + n.name + "'");
        return Ok(it->second);
      }
      case Node::kSelect: {
        Value x = Eval(*n.kids[0]);
        if (!x.ok()) return x;
        if (!x.v.is_object()) return Err("no such key: " + n.name + " (on " + TypeName(x.v) + ")");
        auto it = x.v.find(n.name);
        if (it == x.v.end()) return Err("no such key: " + n.name);
        return Ok(*it);
      }
      case Node::kHas: {
        const Node& sel = *n.kids[0];
        Value x = Eval(*sel.kids[0]);
        if (!x.ok()) return x;
        if (!x.v.is_object()) return Err("has() on " + TypeName(x.v));
        return Ok(x.v.contains(sel.name));
      }
      case Node::kIndex: {
        Value x = Eval(*n.kids[0]);
        if (!x.ok()) return x;
        Value i = Eval(*n.kids[1]);
        if (!i.ok()) return i;
        if (x.v.is_object() && i.v.is_string()) {
          auto it = x.v.find(i.v.get<std::string>());
          if (it == x.v.end()) return Err("no such key: " + i.v.get<std::string>());
          return Ok(*it);
        }
        if (x.v.is_array() && i.v.is_number_integer()) {
          long long k = i.v.get<long long>();
          if (k < 0 || k >= static_cast<long long>(x.v.size()))
            return Err("index out of bounds: " + std::to_string(k));
          return Ok(x.v[static_cast<std::size_t>(k)]);
        }
        return Err("no such overload: " + TypeName(x.v) + "[" + TypeName(i.v) + "]");
      }
      case Node::kList: {
        json out = json::array();
        for (const auto& k : n.kids) {
          Value v = Eval(*k);
          if (!v.ok()) return v;
          out.push_back(v.v);
        }
        return Ok(out);
      }
      case Node::kCond: {
        Value c = Eval(*n.kids[0]);
        if (!c.ok()) return c;
        if (!c.v.is_boolean()) return Err("no such overload: " + TypeName(c.v) + " ? _ : _");
        return Eval(*n.kids[c.v.get<bool>() ? 1 : 2]);
      }
      case Node::kUnary: {
        Value x = Eval(*n.kids[0]);
        if (!x.ok()) return x;
        if (n.name == "!" && x.v.is_boolean()) return Ok(!x.v.get<bool>());
        if (n.name == "-" && x.v.is_number_integer()) return Ok(-x.v.get<long long>());
        return Err("no such overload: " + n.name + TypeName(x.v));
      }
      case Node::kBinary: return Binary(n);
      case Node::kCall: return Call(n);
    }
    return Err("unreachable");
  }

 private:
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

  Value Binary(const Node& n) {
    if (n.name == "&&") return Logic(n, true);
    if (n.name == "||") return Logic(n, false);
    Value a = Eval(*n.kids[0]);
    if (!a.ok()) return a;
    Value b = Eval(*n.kids[1]);
    if (!b.ok()) return b;
    const json &x = a.v, &y = b.v;
    if (n.name == "==") return Ok(x == y);
    if (n.name == "!=") return Ok(x != y);
    if (n.name == "in") {
      if (y.is_object()) return x.is_string() ? Ok(y.contains(x.get<std::string>())) : Ok(false);
      if (y.is_array()) {
        for (const auto& e : y)
          if (e == x) return Ok(true);
        return Ok(false);
      }
      return Err("no such overload: _in_ on " + TypeName(y));
    }
    bool nums = x.is_number_integer() && y.is_number_integer();
    bool strs = x.is_string() && y.is_string();
    if (n.name == "+") {
      if (nums) return Ok(x.get<long long>() + y.get<long long>());
      if (strs) return Ok(x.get<std::string>() + y.get<std::string>());
      if (x.is_array() && y.is_array()) {
        json out = x;
        for (const auto& e : y) out.push_back(e);
        return Ok(out);
      }
    }
    if (n.name == "-" && nums) return Ok(x.get<long long>() - y.get<long long>());
    if ((nums || strs) && (n.name == "<" || n.name == "<=" || n.name == ">" || n.name == ">=")) {
      int c = nums ? (x.get<long long>() < y.get<long long>() ? -1 : x.get<long long>() > y.get<long long>())
                   : x.get<std::string>().compare(y.get<std::string>());
      if (n.name == "<") return Ok(c < 0);
      if (n.name == "<=") return Ok(c <= 0);
      if (n.name == ">") return Ok(c > 0);
      return Ok(c >= 0);
    }
    return Err("no such overload: " + TypeName(x) + " " + n.name + " " + TypeName(y));
  }

  // Macros bind a variable over a list's elements or a map's keys.
  Value Macro(const Node& n, const json& range) {
    if (n.kids.size() != 3 || n.kids[1]->kind != Node::kIdent)
      return Err(n.name + "() needs (var, expression)");
    const std::string var = n.kids[1]->name;
    std::vector<json> items;
    if (range.is_object()) {
      for (auto it = range.begin(); it != range.end(); ++it) items.push_back(it.key());
    } else if (range.is_array()) {
      for (const auto& e : range) items.push_back(e);
    } else {
      return Err(n.name + "() on " + TypeName(range));
    }
    auto saved = vars_.find(var) == vars_.end() ? std::optional<json>() : std::optional<json>(vars_[var]);
    json out = json::array();
    std::string first_error;
    bool decided = false, result = n.name == "all";
    for (const auto& item : items) {
      vars_[var] = item;
      Value v = Eval(*n.kids[2]);
      if (n.name == "map") {
        if (!v.ok()) { first_error = v.error; break; }
        out.push_back(v.v);
        continue;
      }
      if (!v.ok()) {
        if (first_error.empty()) first_error = v.error;
        if (n.name == "filter") break;
        continue;
      }
      if (!v.v.is_boolean()) {
        if (first_error.empty()) first_error = "predicate is not a bool";
        continue;
      }
      bool b = v.v.get<bool>();
      if (n.name == "filter") {
        if (b) out.push_back(item);
      } else if (n.name == "all" && !b) {
        decided = true, result = false;
      } else if (n.name == "exists" && b) {
        decided = true, result = true;
      }
    }
    if (saved) vars_[var] = *saved; else vars_.erase(var);
    if (n.name == "filter" || n.name == "map") return first_error.empty() ? Ok(out) : Err(first_error);
    if (decided) return Ok(result);
    if (!first_error.empty()) return Err(first_error);
    return Ok(result);
  }

  Value Call(const Node& n) {
    const bool member = n.kids[0] != nullptr;
    if (member && (n.name == "all" || n.name == "exists" || n.name == "filter" || n.name == "map")) {
      Value range = Eval(*n.kids[0]);
      if (!range.ok()) return range;
      return Macro(n, range.v);
    }
    std::vector<json> args;
    for (std::size_t k = 0; k < n.kids.size(); ++k) {
      if (!n.kids[k]) continue;
      Value v = Eval(*n.kids[k]);
      if (!v.ok()) return v;
      args.push_back(v.v);
    }
    if (n.name == "size" && args.size() == 1) {
      const json& x = args[0];
      if (x.is_string() || x.is_array() || x.is_object())
        return Ok(static_cast<long long>(x.is_string() ? x.get<std::string>().size() : x.size()));
    }
    if (member && args.size() == 2 && args[0].is_string() && args[1].is_string()) {
      const std::string s = args[0], t = args[1];
      if (n.name == "startsWith") return Ok(s.rfind(t, 0) == 0);
      if (n.name == "endsWith") return Ok(s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0);
      if (n.name == "contains") return Ok(s.find(t) != std::string::npos);
    }
    return Err("no such function: " + n.name);
  }

  std::map<std::string, json> vars_;
};

}  // namespace

Program::Program(std::string_view expr) {
  try {
    root_ = Parser(Lex(expr)).Parse();
  } catch (const std::exception& e) {
    root_.reset();
    error_ = e.what();
  }
}
Program::~Program() = default;
Program::Program(Program&&) noexcept = default;

Value Program::Eval(const std::map<std::string, json>& vars) const {
  if (!root_) return Err("not parsed: " + error_);
  return Evaluator(vars).Eval(*root_);
}

}  // namespace gg::cel
