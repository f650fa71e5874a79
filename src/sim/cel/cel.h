// The simulator's CEL (Common Expression Language) implementation: what CRD validation rules
// (x-kubernetes-validations) and ValidatingAdmissionPolicy expressions need, with CEL's
// semantics where they matter for admission:
//  * a missing key is an error (not false); `&&`/`||` absorb an error when the other side
//    decides, and so do `all`/`exists`; `in` on a map tests keys; `has(x.f)` tests presence;
//  * literals: int, uint (`1u`), double, string (escapes, r'raw'), bytes are not supported,
//    bool, null, lists `[..]`, maps `{k: v}`; operators `! - * / % + - < <= > >= == != in && ||
//    ?:`; int arithmetic is checked for overflow and division by zero;
//  * macros `has all exists exists_one map(x, e) map(x, p, e) filter`;
//  * functions: size, int, uint, double, string, bool, dyn, duration, matches (ECMAScript regex
//    standing in for RE2), contains/startsWith/endsWith, the Kubernetes strings library
//    (charAt indexOf lastIndexOf lowerAscii upperAscii replace split substring trim join) and
//    list library (isSorted sum min max indexOf lastIndexOf), regex find/findAll, duration
//    getHours/getMinutes/getSeconds/getMilliseconds;
//  * Kubernetes property-name escaping: `self.__for__` reads field "for", `__dash__` `-`,
//    `__dot__` `.`, `__slash__` `/`, `__underscores__` `__`.
// Values are JSON; a duration is the object {"@cel.duration": <nanoseconds>}.
// Anything outside this subset fails to compile (ERROR: <input>:L:C: ...), as an unknown
// function does on a real server, so a rule the simulator cannot follow is never skipped.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gg::cel {

// The result of an evaluation: a value or a CEL runtime error.
struct Value {
  nlohmann::json v;
  std::string error;  // non-empty: an error ("no such key: labels")
  bool ok() const { return error.empty(); }
};

struct Node;  // AST

// What a compile check knows about a variable: the OpenAPI (structural) schema of its value,
// or null when it is `dyn` (any value). Used for "undefined field" errors and cost bounds.
using Declarations = std::map<std::string, nlohmann::json>;

// Static cost estimate (CEL cost units, as the API server's estimator counts them,
// approximately: see docs/sim.md). Saturates at UINT64_MAX.
struct CostEstimate {
  std::uint64_t max = 0;
};

class Program {
 public:
  // Parses `expr`; on failure ok() is false and error() says where
  // ("ERROR: <input>:1:7: Syntax error: ...").
  explicit Program(std::string_view expr);
  ~Program();
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  bool ok() const { return root_ != nullptr; }
  const std::string& error() const { return error_; }
  const std::string& source() const { return source_; }

  // Type-level checks a real server's compiler makes: every identifier is declared (or
  // bound by a macro), every function exists, and fields selected from a declared schema
  // exist in it (unless it preserves unknown fields). "" when fine, else the error text.
  std::string Check(const Declarations& decls) const;
  // Whether the expression mentions `name` as a variable (e.g. oldSelf: a transition rule).
  bool References(std::string_view name) const;
  // Worst-case cost given the declared schemas' maxItems/maxLength/maxProperties bounds.
  CostEstimate EstimateCost(const Declarations& decls) const;

  Value Eval(const std::map<std::string, nlohmann::json>& vars) const;

 private:
  std::unique_ptr<Node> root_;
  std::string error_;
  std::string source_;
};

// Go duration string ("1h30m", "250ms", "0") -> nanoseconds; false when malformed.
bool ParseDuration(std::string_view s, std::int64_t* ns);
// The Kubernetes CEL property-name unescaping (`__for__` -> "for").
std::string UnescapeProperty(const std::string& name);

// Sizes the estimator assumes for unbounded values: a request body is at most 3 MiB, so an
// unbounded list holds at most (3 MiB - 2) / (smallest element + 1) elements.
constexpr std::uint64_t kMaxRequestSizeBytes = 3 * 1024 * 1024;
std::uint64_t MaxListItems(const nlohmann::json& schema);      // maxItems or the estimate
std::uint64_t MaxStringLength(const nlohmann::json& schema);   // bytes: 4 * maxLength or estimate
std::uint64_t MaxMapProperties(const nlohmann::json& schema);  // maxProperties or estimate

}  // namespace gg::cel
