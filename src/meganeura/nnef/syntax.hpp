#pragma once
// Private to nnef/: the syntax tree of an NNEF 1.0 graph description (graph.nnef) and its parser. The parser
// accepts the whole textual grammar (version, extensions, fragment declarations and definitions, the graph
// and the operator expressions of compound fragments); it never crashes on any input: every syntax error is a
// FormatError naming origin:line:column, and nesting is bounded.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace meganeura::nnef {

struct Pos {
  int line = 1, column = 1;
};

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind {
    Int,
    Real,
    Bool,
    Str,
    Ident,
    Array,
    Tuple,
    Unary,
    Binary,
    IfElse,
    Index,
    Slice,
    Call,
    For
  };
  Kind kind = Kind::Int;
  Pos pos;
  double number = 0;    // Int, Real
  bool flag = false;    // Bool
  std::string text;     // Str value, Ident name, Unary/Binary operator, Call name
  std::string generic;  // Call: the type in name<type>(...), "" when none
  // Array/Tuple: elements. Unary: [x]. Binary: [a, b]. IfElse: [cond, then, else]. Index: [x, i].
  // Slice: [x, begin or null, end or null]. Call: positional arguments. For: [yield, condition or null].
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> named;  // Call: named arguments; For: loop variables
};

struct Param {
  std::string name;
  std::string type;  // as written, normalised: "tensor<scalar>", "integer[]", "(integer,integer)[]"
  ExprPtr default_value;
  Pos pos;
};

struct Assignment {
  ExprPtr lhs, rhs;
  Pos pos;
};

struct Fragment {
  std::string name;
  bool generic = false;
  std::string generic_default;  // "" when `<?>` has no default
  std::vector<Param> params, results;
  bool has_body = false;
  std::vector<Assignment> body;
  Pos pos;
};

struct Document {
  std::string version;
  std::vector<std::string> extensions;
  std::vector<Fragment> fragments;
  bool has_graph = false;
  std::string graph_name;
  std::vector<std::string> inputs, outputs;
  std::vector<Assignment> body;
  Pos graph_pos;
};

// A whole document (version ... graph). `fragments_only` parses a list of fragment declarations/definitions
// with no version and no graph (the built-in standard library text).
Document parse(std::string_view text, const std::string& origin, bool fragments_only = false);

// "origin:line:column"
std::string at(const std::string& origin, Pos p);

}  // namespace meganeura::nnef
