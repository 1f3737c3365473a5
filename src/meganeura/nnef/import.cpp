// load_nnef: parse graph.nnef, evaluate the graph body (expanding compound fragments, the standard's and the
// file's own), lower primitives through the table of ops.cpp, bind `external` to inputs and `variable` to
// parameters read from .dat files, and collect what cannot be lowered into one ImportError.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/mmap.hpp"
#include "meganeura/nnef/lower.hpp"
#include "meganeura/nnef/nnef.hpp"
#include "meganeura/nnef/syntax.hpp"

namespace meganeura {
namespace nnef {
namespace {

constexpr int kMaxFragmentDepth = 64;
constexpr size_t kMaxSteps =
    4'000'000;  // evaluation steps of one file: bounds comprehensions of hostile input
constexpr size_t kMaxArray = 1 << 20;

using K = Val::K;
using Env = std::map<std::string, Val>;

bool poisoned(const Val& v) {
  if (v.k == K::Poison) return true;
  for (const Val& i : v.items)
    if (poisoned(i)) return true;
  return false;
}

std::string kind_name(K k) {
  switch (k) {
    case K::Int: return "an integer";
    case K::Real: return "a scalar";
    case K::Bool: return "a logical";
    case K::Str: return "a string";
    case K::Tensor: return "a tensor";
    case K::Array: return "an array";
    case K::Tuple: return "a tuple";
    default: return "nothing";
  }
}

class Evaluator {
 public:
  Evaluator(Lowering& L, const std::map<std::string, const Fragment*>& fragments)
      : L_(L), fragments_(fragments) {}

  std::vector<ImportError::Item> items;

  Val eval(const Expr& e, const Env& env) {
    if (++steps_ > kMaxSteps)
      fail(e.pos, "expected evaluation within " + std::to_string(kMaxSteps) + " steps");
    switch (e.kind) {
      case Expr::Kind::Int: return Val::integer(e.number);
      case Expr::Kind::Real: return Val::real(e.number);
      case Expr::Kind::Bool: return Val::logical(e.flag);
      case Expr::Kind::Str: return Val::str(e.text);
      case Expr::Kind::Ident: {
        auto it = env.find(e.text);
        if (it == env.end()) fail(e.pos, "expected a defined identifier, got '" + e.text + "'");
        return it->second;
      }
      case Expr::Kind::Array:
      case Expr::Kind::Tuple: {
        std::vector<Val> items;
        for (const ExprPtr& i : e.items) items.push_back(eval(*i, env));
        return Val::list(e.kind == Expr::Kind::Array ? K::Array : K::Tuple, std::move(items));
      }
      case Expr::Kind::Unary: return unary(e, eval(*e.items[0], env));
      case Expr::Kind::Binary: {
        Val a = eval(*e.items[0], env);
        if (e.text == "&&" || e.text == "||") {  // short-circuit, as the spec's if/else relies on
          if (a.k != K::Bool)
            fail(e.pos, "expected a logical operand of '" + e.text + "', got " + kind_name(a.k));
          if (e.text == "&&" ? !a.b : a.b) return a;
          Val b = eval(*e.items[1], env);
          if (b.k != K::Bool)
            fail(e.pos, "expected a logical operand of '" + e.text + "', got " + kind_name(b.k));
          return b;
        }
        return binary(e, a, eval(*e.items[1], env));
      }
      case Expr::Kind::IfElse: {
        Val c = eval(*e.items[0], env);
        if (c.k != K::Bool) fail(e.pos, "expected a logical condition, got " + kind_name(c.k));
        return eval(*e.items[c.b ? 1 : 2], env);
      }
      case Expr::Kind::Index: return index(e, eval(*e.items[0], env), eval(*e.items[1], env));
      case Expr::Kind::Slice: return slice(e, env);
      case Expr::Kind::For: return comprehension(e, env);
      case Expr::Kind::Call: return call(e, env);
    }
    fail(e.pos, "expected an expression");
  }

  // binds the identifiers of an lvalue
  void bind(const Expr& lhs, const Val& v, Env& env, bool top) {
    if (lhs.kind == Expr::Kind::Ident) {
      if (top && env.count(lhs.text))
        fail(lhs.pos, "expected '" + lhs.text + "' to be assigned once, got a second assignment");
      env[lhs.text] = v;
      if (top && v.k == K::Tensor && !L_.g.find(lhs.text)) L_.g.alias(v.node, lhs.text);
      return;
    }
    if (v.k == K::Poison) {
      for (const ExprPtr& i : lhs.items) bind(*i, v, env, top);
      return;
    }
    const K want = lhs.kind == Expr::Kind::Array ? K::Array : K::Tuple;
    if (v.k != want || v.items.size() != lhs.items.size())
      fail(lhs.pos, "expected " + kind_name(v.k) + " of " + std::to_string(lhs.items.size()) +
                        " items to unpack, got " + kind_name(v.k) +
                        (v.items.empty() ? "" : " of " + std::to_string(v.items.size())));
    for (size_t i = 0; i < lhs.items.size(); ++i) bind(*lhs.items[i], v.items[i], env, top);
  }

  [[noreturn]] void fail(Pos p, const std::string& what) const {
    throw FormatError("[load_nnef] " + at(L_.origin, p) + ": " + what);
  }

 private:
  Lowering& L_;
  const std::map<std::string, const Fragment*>& fragments_;
  size_t steps_ = 0;
  int depth_ = 0;

  Graph& g() { return L_.g; }

  Val unary(const Expr& e, const Val& x) {
    if (x.k == K::Poison) return x;
    if (e.text == "!") {
      if (x.k != K::Bool) fail(e.pos, "expected a logical operand of '!', got " + kind_name(x.k));
      return Val::logical(!x.b);
    }
    if (x.numeric()) return e.text == "-" ? Val::of(x.k, -x.num) : x;
    if (x.k == K::Tensor) return e.text == "-" ? Val::tensor(g().neg(x.node)) : x;
    fail(e.pos, "expected a number or tensor operand of '" + e.text + "', got " + kind_name(x.k));
  }

  Val binary(const Expr& e, const Val& a, const Val& b) {
    const std::string& op = e.text;
    if (a.k == K::Poison || b.k == K::Poison) return Val::poison();
    if (a.k == K::Tensor || b.k == K::Tensor) return tensor_binary(e, a, b);
    if (op == "in") {
      if (b.k != K::Array) fail(e.pos, "expected an array on the right of 'in', got " + kind_name(b.k));
      for (const Val& i : b.items)
        if (equal(a, i)) return Val::logical(true);
      return Val::logical(false);
    }
    if (op == "==" || op == "!=") return Val::logical(equal(a, b) == (op == "=="));
    if (a.k == K::Array && b.k == K::Array && op == "+") {
      if (a.items.size() + b.items.size() > kMaxArray) fail(e.pos, "expected arrays below 2^20 items");
      Val r = a;
      r.items.insert(r.items.end(), b.items.begin(), b.items.end());
      return r;
    }
    if (a.k == K::Str && b.k == K::Str && op == "+") return Val::str(a.s + b.s);
    if (a.k == K::Str && b.k == K::Str && (op == "<" || op == "<=" || op == ">" || op == ">="))
      return Val::logical(op == "<"    ? a.s < b.s
                          : op == "<=" ? a.s <= b.s
                          : op == ">"  ? a.s > b.s
                                       : a.s >= b.s);
    if (!a.numeric() || !b.numeric())
      fail(e.pos, "expected numbers on both sides of '" + op + "', got " + kind_name(a.k) + " and " +
                      kind_name(b.k));
    const double x = a.num, y = b.num;
    const bool ints = a.k == K::Int && b.k == K::Int;
    if (op == "<") return Val::logical(x < y);
    if (op == "<=") return Val::logical(x <= y);
    if (op == ">") return Val::logical(x > y);
    if (op == ">=") return Val::logical(x >= y);
    double r = 0;
    if (op == "+")
      r = x + y;
    else if (op == "-")
      r = x - y;
    else if (op == "*")
      r = x * y;
    else if (op == "/") {
      if (ints && y == 0) fail(e.pos, "expected a non-zero integer divisor");
      r = ints ? std::trunc(x / y) : x / y;
    } else if (op == "^")
      r = std::pow(x, y);
    else
      fail(e.pos, "expected an operator on numbers, got '" + op + "'");
    if (!std::isfinite(r) || (ints && std::fabs(r) > 9007199254740992.0))
      fail(e.pos, "expected a finite result of '" + op + "'");
    return ints ? Val::integer(r) : Val::real(r);
  }

  static bool equal(const Val& a, const Val& b) {
    if (a.numeric() && b.numeric()) return a.num == b.num;
    if (a.k != b.k) return false;
    switch (a.k) {
      case K::Bool: return a.b == b.b;
      case K::Str: return a.s == b.s;
      case K::Array:
      case K::Tuple:
        if (a.items.size() != b.items.size()) return false;
        for (size_t i = 0; i < a.items.size(); ++i)
          if (!equal(a.items[i], b.items[i])) return false;
        return true;
      default: return false;
    }
  }

  NodeId as_tensor(const Expr& e, const Val& v) {
    if (v.k == K::Tensor) return v.node;
    if (v.numeric()) return g().scalar(v.num);
    if (v.k == K::Bool) return g().scalar(v.b ? 1.0 : 0.0);
    fail(e.pos, "expected a tensor or number operand of '" + e.text + "', got " + kind_name(v.k));
  }

  // operator expressions on tensors (KHR_enable_operator_expressions) are the elementwise primitives
  Val tensor_binary(const Expr& e, const Val& a, const Val& b) {
    static const std::map<std::string, std::string> ops = {
        {"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"}, {"^", "pow"}, {"<", "lt"},
        {"<=", "le"}, {">", "gt"},  {">=", "ge"}, {"==", "eq"}, {"!=", "ne"}};
    auto it = ops.find(e.text);
    if (it == ops.end()) fail(e.pos, "expected an elementwise operator on tensors, got '" + e.text + "'");
    NodeId x = as_tensor(e, a), y = as_tensor(e, b);
    return primitive(it->second, "", {{"x", Val::tensor(x)}, {"y", Val::tensor(y)}});
  }

  Val index(const Expr& e, const Val& x, const Val& i) {
    if (x.k == K::Poison) return x;
    if (i.k != K::Int) fail(e.pos, "expected an integer index, got " + kind_name(i.k));
    const int64_t n = x.k == K::Str ? int64_t(x.s.size()) : int64_t(x.items.size());
    if (x.k != K::Array && x.k != K::Tuple && x.k != K::Str)
      fail(e.pos, "expected an array, tuple or string to index, got " + kind_name(x.k));
    if (i.num < 0 || i.num >= double(n))
      fail(e.pos,
           "expected an index in [0, " + std::to_string(n) + "), got " + std::to_string(int64_t(i.num)));
    if (x.k == K::Str) return Val::str(std::string(1, x.s[size_t(i.num)]));
    return x.items[size_t(i.num)];
  }

  Val slice(const Expr& e, const Env& env) {
    Val x = eval(*e.items[0], env);
    if (x.k == K::Poison) return x;
    if (x.k != K::Array && x.k != K::Str)
      fail(e.pos, "expected an array or string to slice, got " + kind_name(x.k));
    const int64_t n = x.k == K::Str ? int64_t(x.s.size()) : int64_t(x.items.size());
    auto bound = [&](const ExprPtr& p, int64_t fallback) {
      if (!p) return fallback;
      Val v = eval(*p, env);
      if (v.k != K::Int) fail(e.pos, "expected integer slice bounds, got " + kind_name(v.k));
      return std::clamp<int64_t>(int64_t(v.num), 0, n);
    };
    const int64_t b = bound(e.items[1], 0), end = std::max(b, bound(e.items[2], n));
    if (x.k == K::Str) return Val::str(x.s.substr(size_t(b), size_t(end - b)));
    return Val::list(K::Array, std::vector<Val>(x.items.begin() + b, x.items.begin() + end));
  }

  Val comprehension(const Expr& e, const Env& env) {
    std::vector<Val> iters;
    size_t n = 0;
    for (size_t k = 0; k < e.named.size(); ++k) {
      Val it = eval(*e.named[k].second, env);
      if (it.k == K::Poison) return it;
      if (it.k != K::Array) fail(e.pos, "expected an array to iterate over, got " + kind_name(it.k));
      if (k > 0 && it.items.size() != n)
        fail(e.pos, "expected loop arrays of one length (they iterate together)");
      n = it.items.size();
      iters.push_back(std::move(it));
    }
    std::vector<Val> out;
    Env local = env;
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < iters.size(); ++k) local[e.named[k].first] = iters[k].items[i];
      if (e.items[1]) {
        Val c = eval(*e.items[1], local);
        if (c.k != K::Bool) fail(e.pos, "expected a logical condition, got " + kind_name(c.k));
        if (!c.b) continue;
      }
      out.push_back(eval(*e.items[0], local));
    }
    return Val::list(K::Array, std::move(out));
  }

  Val builtin(const Expr& e, const std::string& name, const Val& x) {
    if (x.k == K::Poison) return x;
    if (name == "shape_of") {
      std::vector<Val> dims;
      if (x.k == K::Tensor)
        for (int64_t d : g().node(x.node).shape) dims.push_back(Val::integer(double(d)));
      else if (!x.numeric() && x.k != K::Bool)
        fail(e.pos, "expected a tensor for shape_of, got " + kind_name(x.k));
      return Val::list(K::Array, std::move(dims));
    }
    if (name == "length_of") {
      if (x.k == K::Str) return Val::integer(double(x.s.size()));
      if (x.k != K::Array) fail(e.pos, "expected an array for length_of, got " + kind_name(x.k));
      return Val::integer(double(x.items.size()));
    }
    if (name == "range_of") {
      if (x.k != K::Array && x.k != K::Str)
        fail(e.pos, "expected an array for range_of, got " + kind_name(x.k));
      const size_t n = x.k == K::Str ? x.s.size() : x.items.size();
      std::vector<Val> r;
      for (size_t i = 0; i < n; ++i) r.push_back(Val::integer(double(i)));
      return Val::list(K::Array, std::move(r));
    }
    // integer(), scalar(), logical(), string(): conversions of literals
    if (name == "string") {
      if (x.k == K::Str) return x;
      if (x.k == K::Bool) return Val::str(x.b ? "true" : "false");
      if (x.numeric())
        return Val::str(x.k == K::Int ? std::to_string(int64_t(x.num)) : std::to_string(x.num));
    } else if (name == "logical") {
      if (x.k == K::Bool) return x;
      if (x.numeric()) return Val::logical(x.num != 0);
      if (x.k == K::Str) return Val::logical(!x.s.empty());
    } else if (x.numeric() || x.k == K::Bool) {
      const double v = x.k == K::Bool ? (x.b ? 1.0 : 0.0) : x.num;
      if (name == "integer" && std::fabs(v) > 9007199254740992.0)
        fail(e.pos, "expected a value below 2^53 to convert with integer()");
      return name == "integer" ? Val::integer(std::trunc(v)) : Val::real(v);
    }
    fail(e.pos, "expected a literal to convert with " + name + "(), got " + kind_name(x.k));
  }

  Val call(const Expr& e, const Env& env) {
    static const std::set<std::string> builtins = {"shape_of", "length_of", "range_of", "integer",
                                                   "scalar",   "logical",   "string"};
    if (builtins.count(e.text)) {
      if (e.items.size() != 1 || !e.named.empty()) fail(e.pos, "expected one argument to " + e.text + "()");
      return builtin(e, e.text, eval(*e.items[0], env));
    }
    auto it = fragments_.find(e.text);
    if (it == fragments_.end()) {
      items.push_back(
          {e.text, "", L_.node, "no such operation (neither the standard's nor a fragment of the file)"});
      for (const ExprPtr& a : e.items) eval(*a, env);  // still checks the arguments' syntax and names
      return Val::poison();
    }
    const Fragment& f = *it->second;
    // bind arguments to parameters
    if (e.items.size() > f.params.size())
      fail(e.pos, "expected at most " + std::to_string(f.params.size()) + " arguments to " + f.name +
                      ", got " + std::to_string(e.items.size()));
    Env args;
    for (size_t i = 0; i < e.items.size(); ++i) args[f.params[i].name] = eval(*e.items[i], env);
    for (const auto& [name, x] : e.named) {
      auto p = std::find_if(f.params.begin(), f.params.end(), [&](const Param& q) { return q.name == name; });
      if (p == f.params.end()) fail(x->pos, "expected a parameter of " + f.name + ", got '" + name + "'");
      if (args.count(name)) fail(x->pos, "expected '" + name + "' once, got it twice");
      args[name] = eval(*x, env);
    }
    for (const Param& p : f.params)
      if (!args.count(p.name)) {
        if (!p.default_value) fail(e.pos, "expected an argument for " + f.name + "'s '" + p.name + "'");
        args[p.name] = eval(*p.default_value, Env{});
      }
    for (const auto& [name, v] : args)
      if (poisoned(v)) return Val::poison();
    std::string generic = e.generic;
    if (generic.empty()) generic = f.generic_default.empty() ? "scalar" : f.generic_default;
    if (!f.has_body) return primitive(f.name, generic, std::move(args), &e);
    if (++depth_ > kMaxFragmentDepth)
      fail(e.pos, "expected fragments nested at most 64 deep (a recursive fragment?)");
    Env local = args;
    for (const Assignment& a : f.body) bind(*a.lhs, eval(*a.rhs, local), local, false);
    --depth_;
    std::vector<Val> results;
    for (const Param& r : f.results) {
      auto v = local.find(r.name);
      if (v == local.end())
        fail(f.pos, "expected fragment " + f.name + " to assign its result '" + r.name + "'");
      results.push_back(v->second);
    }
    return results.size() == 1 ? results[0] : Val::list(K::Tuple, std::move(results));
  }

  Val primitive(const std::string& op, const std::string& generic, Env args, const Expr* e = nullptr) {
    if (op == "external" || op == "variable" || op == "constant") return leaf(op, generic, args, e);
    const auto& table = primitives();
    auto it = table.find(op);
    if (it == table.end()) {
      items.push_back({op, "", L_.node, "no lowering for this operation"});
      return Val::poison();
    }
    Args a{L_, L_.g, op, generic, std::move(args)};
    try {
      return it->second(a);
    } catch (const Unsupported& u) {
      items.push_back({op, "", L_.node, u.reason});
    } catch (const FormatError&) {
      throw;
    } catch (const Error& err) {
      // a Graph builder refused what the lowering made of this invocation
      items.push_back({op, "", L_.node, err.what()});
    }
    return Val::poison();
  }

  std::vector<int64_t> shape_arg(const std::string& op, const Env& args, const Expr* e) {
    const Val& s = args.at("shape");
    std::vector<int64_t> dims;
    if (s.k == K::Array)
      for (const Val& d : s.items)
        if (d.k == K::Int) dims.push_back(int64_t(d.num));
    if (s.k != K::Array || dims.size() != s.items.size())
      fail(e ? e->pos : Pos{}, "expected an integer array for " + op + "'s shape, got " + kind_name(s.k));
    return dims;
  }

  Val leaf(const std::string& op, const std::string& generic, const Env& args, const Expr* e) {
    const Pos pos = e ? e->pos : Pos{};
    Shape shape;
    try {
      shape = checked_shape(shape_arg(op, args, e), op + "'s shape");
    } catch (const Unsupported& u) {
      fail(pos, u.reason);
    }
    if (generic != "scalar" && generic != "integer" && generic != "logical")
      fail(pos, "expected " + op + "<scalar>, <integer> or <logical>, got <" + generic + ">");
    if (op == "external") {
      if (L_.node.empty() || L_.node.find(',') != std::string::npos)
        fail(pos, "expected external to be assigned to one identifier");
      if (L_.g.find(L_.node)) fail(pos, "expected one tensor named '" + L_.node + "'");
      const DType dt = generic == "scalar" ? DType::F32 : DType::I32;
      NodeId n = L_.g.input(L_.node, shape, dt);
      L_.model.inputs.push_back({L_.node, shape});
      return Val::tensor(dt == DType::F32 ? n : L_.g.cast(n, DType::F32));
    }
    if (op == "constant") {
      const Val& v = args.at("value");
      std::vector<float> data;
      if (v.k == K::Array)
        for (const Val& i : v.items) {
          if (!i.numeric() && i.k != K::Bool) fail(pos, "expected numbers in constant's value");
          data.push_back(float(i.k == K::Bool ? double(i.b) : i.num));
        }
      else if (v.numeric())
        data.push_back(float(v.num));
      else
        fail(pos, "expected a number array for constant's value, got " + kind_name(v.k));
      const int64_t n = numel(shape);
      if (data.size() == 1)
        return Val::tensor(shape.empty() ? L_.g.scalar(data[0]) : L_.g.fill(data[0], shape));
      if (int64_t(data.size()) != n)
        fail(pos, "expected constant's value to hold 1 or " + std::to_string(n) + " items, got " +
                      std::to_string(data.size()));
      return Val::tensor(L_.g.constant(std::move(data), shape));
    }
    // variable: the label's .dat file; float variables are parameters, integer and logical ones constants
    const Val& lv = args.at("label");
    if (lv.k != K::Str || lv.s.empty()) fail(pos, "expected a non-empty string label for variable");
    const std::string& label = lv.s;
    if (label.find("..") != std::string::npos || label[0] == '/')
      fail(pos, "expected a label inside the model folder, got '" + label + "'");
    auto known = L_.variables.find(label);
    if (known != L_.variables.end()) {
      if (L_.g.node(known->second).shape != shape)
        fail(pos, "expected variable '" + label + "' to have one shape wherever it is used");
      return Val::tensor(known->second);
    }
    std::optional<std::vector<std::byte>> bytes = L_.source(label);
    std::vector<double> values;
    if (!bytes) {
      if (!L_.options.allow_missing_tensors)
        fail(pos, "expected the tensor file '" + label + ".dat' of variable '" + L_.node + "', got none");
      // no values: a parameter without an initial value (inspect; set_parameter later), a zero constant
      NodeId node = generic == "scalar" ? L_.g.parameter(label, shape) : L_.g.fill(0.0, shape);
      if (generic == "scalar") L_.model.parameters.emplace_back(label, std::vector<float>{});
      L_.variables[label] = node;
      return Val::tensor(node);
    } else {
      NnefTensor t = read_nnef_tensor_bytes(*bytes, label + ".dat");
      if (t.value.shape != shape)
        fail(pos, "expected '" + label + ".dat' to hold shape " + shape_str(shape) + " as declared, got " +
                      shape_str(t.value.shape));
      values = std::move(t.value.data);
      if (t.item_type != NnefTensor::Float && generic == "scalar")
        fail(pos, "expected float data in '" + label + ".dat' for variable<scalar>, got item type " +
                      std::to_string(t.item_type));
    }
    NodeId node;
    if (generic == "scalar") {
      node = L_.g.parameter(label, shape);
      L_.model.parameters.emplace_back(label, std::vector<float>(values.begin(), values.end()));
    } else {
      if (values.empty()) fail(pos, "expected a non-empty variable");
      node = L_.g.constant(std::vector<float>(values.begin(), values.end()), shape);
    }
    L_.variables[label] = node;
    return Val::tensor(node);
  }
};

std::map<std::string, const Fragment*> fragment_table(const Document& std_doc, const Document& doc) {
  std::map<std::string, const Fragment*> r;
  for (const Fragment& f : std_doc.fragments) r[f.name] = &f;
  // the file's own: a definition replaces a standard one; a bare declaration (a custom primitive, as
  // nnef-tools writes for ops it mirrors) only adds a name, which then lowers to "unsupported"
  for (const Fragment& f : doc.fragments)
    if (f.has_body || !r.count(f.name)) r[f.name] = &f;
  return r;
}

const Document& standard_document() {
  static const Document d = parse(standard_fragments(), "<standard fragments>", true);
  return d;
}

std::string lhs_names(const Expr& e) {
  if (e.kind == Expr::Kind::Ident) return e.text;
  std::string r;
  for (const ExprPtr& i : e.items) r += (r.empty() ? "" : ", ") + lhs_names(*i);
  return r;
}

}  // namespace
}  // namespace nnef

namespace {

// The whole lowering; what could not be lowered is left in `items` (load_nnef_text throws it, inspect_nnef
// lists it).
NnefModel lower(std::string_view text, const std::string& origin, const NnefTensorSource& tensors,
                const NnefOptions& options, std::vector<ImportError::Item>& items) {
  using namespace nnef;
  const Document doc = parse(text, origin);
  if (doc.version.empty() || doc.version[0] != '1' || (doc.version.size() > 1 && doc.version[1] != '.'))
    throw FormatError("[load_nnef] " + origin + ":1:1: expected version 1.x, got " + doc.version);
  NnefModel model;
  model.version = doc.version;
  model.extensions = doc.extensions;
  Lowering L(model, tensors, options, origin);
  const auto fragments = fragment_table(standard_document(), doc);
  Evaluator ev(L, fragments);
  Env env;
  for (const Assignment& a : doc.body) {
    L.node = lhs_names(*a.lhs);
    if (a.rhs->kind == Expr::Kind::Call) ++model.op_histogram[a.rhs->text];
    ev.bind(*a.lhs, ev.eval(*a.rhs, env), env, true);
  }
  // the graph's inputs are its externals
  std::set<std::string> externals;
  for (const NnefValueInfo& i : model.inputs) externals.insert(i.name);
  for (const std::string& name : doc.inputs)
    if (!externals.count(name))
      ev.fail(doc.graph_pos, "expected graph input '" + name + "' to be defined by external, got none");
  std::vector<NnefValueInfo> ordered;
  for (const std::string& name : doc.inputs)
    for (const NnefValueInfo& i : model.inputs)
      if (i.name == name) ordered.push_back(i);
  for (const NnefValueInfo& i : model.inputs)
    if (std::find(doc.inputs.begin(), doc.inputs.end(), i.name) == doc.inputs.end()) ordered.push_back(i);
  model.inputs = std::move(ordered);
  std::vector<NodeId> outs;
  for (const std::string& name : doc.outputs) {
    auto it = env.find(name);
    if (it == env.end())
      ev.fail(doc.graph_pos, "expected graph output '" + name + "' to be assigned, got none");
    if (poisoned(it->second)) {  // computed by an unsupported operation: named for inspect, shape unknown
      model.outputs.push_back({name, Shape{-1}});
      continue;
    }
    if (it->second.k != Val::K::Tensor) {
      ev.items.push_back({"(graph)", "", name, "expected a tensor output, got " + kind_name(it->second.k)});
      continue;
    }
    outs.push_back(it->second.node);
    model.outputs.push_back({name, model.graph.node(it->second.node).shape});
  }
  items = std::move(ev.items);
  if (items.empty()) model.graph.set_outputs(outs);
  return model;
}

}  // namespace

NnefModel load_nnef_text(std::string_view text, const std::string& origin, const NnefTensorSource& tensors,
                         const NnefOptions& options) {
  std::vector<ImportError::Item> items;
  NnefModel model = lower(text, origin, tensors, options, items);
  if (!items.empty()) {
    std::string msg = "[load_nnef] " + origin + ": expected operations the importer lowers, got " +
                      std::to_string(items.size()) + " it does not:";
    for (const auto& i : items) msg += "\n  " + i.op + " at '" + i.node + "': " + i.reason;
    throw ImportError(msg, std::move(items));
  }
  return model;
}

namespace {

template <typename Fn>
auto with_folder(const std::string& path, Fn fn) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::path file = fs::is_directory(p, ec) ? p / "graph.nnef" : p;
  const fs::path dir = file.parent_path();
  MappedFile text(file.string());
  const auto bytes = text.bytes();
  NnefTensorSource source = [&](const std::string& label) -> std::optional<std::vector<std::byte>> {
    const fs::path f = dir / (label + ".dat");
    if (!fs::is_regular_file(f, ec)) return std::nullopt;
    MappedFile m(f.string());
    return std::vector<std::byte>(m.bytes().begin(), m.bytes().end());
  };
  return fn(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), file.string(),
            source);
}

}  // namespace

NnefModel load_nnef(const std::string& path, const NnefOptions& options) {
  return with_folder(path,
                     [&](std::string_view text, const std::string& origin, const NnefTensorSource& source) {
                       return load_nnef_text(text, origin, source, options);
                     });
}

NnefInspection inspect_nnef(const std::string& path) {
  return with_folder(path,
                     [&](std::string_view text, const std::string& origin, const NnefTensorSource& source) {
                       NnefOptions options;
                       options.allow_missing_tensors = true;
                       NnefInspection r;
                       NnefModel m = lower(text, origin, source, options, r.unsupported);
                       r.version = m.version;
                       r.inputs = m.inputs;
                       r.outputs = m.outputs;
                       for (const auto& [name, values] : m.parameters)
                         r.parameters.push_back({name, m.graph.node(*m.graph.find(name)).shape});
                       r.op_histogram = m.op_histogram;
                       return r;
                     });
}

std::string describe(const NnefInspection& m) {
  std::string s = "NNEF " + m.version + "\ninputs:\n";
  for (const auto& i : m.inputs) s += "  " + i.name + " " + shape_str(i.shape) + "\n";
  s += "outputs:\n";
  for (const auto& o : m.outputs) s += "  " + o.name + " " + shape_str(o.shape) + "\n";
  int64_t total = 0;
  for (const auto& p : m.parameters) total += numel(p.shape);
  s += "parameters: " + std::to_string(m.parameters.size()) + " tensors, " + std::to_string(total) +
       " values\n";
  for (const auto& p : m.parameters) s += "  " + p.name + " " + shape_str(p.shape) + "\n";
  s += "operations:\n";
  for (const auto& [op, n] : m.op_histogram) s += "  " + op + " " + std::to_string(n) + "\n";
  s += "unsupported: " + std::to_string(m.unsupported.size()) + "\n";
  for (const auto& i : m.unsupported) s += "  " + i.op + " at '" + i.node + "': " + i.reason + "\n";
  return s;
}

std::vector<std::string> nnef_supported_ops() {
  std::vector<std::string> r = {"external", "variable", "constant"};
  for (const auto& [name, fn] : nnef::primitives()) r.push_back(name);
  for (const nnef::Fragment& f : nnef::standard_document().fragments)
    if (f.has_body) r.push_back(f.name);
  std::sort(r.begin(), r.end());
  return r;
}

}  // namespace meganeura
