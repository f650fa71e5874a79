// A small evaluator for the subset of CEL that deploy/admission/ uses, with CEL's semantics
// where they matter for admission: a missing key is an error (not false), `&&`/`||` absorb an
// error when the other side decides, `all`/`exists` likewise, `in` on a map tests keys, and
// `has(x.f)` tests presence. Values are JSON (the admission objects are JSON). Anything outside
// the subset is a parse error, so a policy change the evaluator cannot follow fails the test
// instead of being skipped.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gg::cel {

// The result of an evaluation: a value or a CEL runtime error.
struct Value {
  nlohmann::json v;
  std::string error;  // non-empty: an error ("no such key: labels")
  bool ok() const { return error.empty(); }
};

struct Node;  // AST

class Program {
 public:
  // Parses `expr`; on failure ok() is false and error() says where.
  explicit Program(std::string_view expr);
  ~Program();
  Program(Program&&) noexcept;
  bool ok() const { return root_ != nullptr; }
  const std::string& error() const { return error_; }
  Value Eval(const std::map<std::string, nlohmann::json>& vars) const;

 private:
  std::unique_ptr<Node> root_;
  std::string error_;
};

}  // namespace gg::cel
