// The NNEF 1.0 textual grammar: a hand-written lexer and recursive-descent parser. Every error names
// origin:line:column and says what was expected and what was found; expression nesting is bounded so a
// hostile file cannot exhaust the stack.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "meganeura/core/error.hpp"
#include "meganeura/nnef/syntax.hpp"

namespace meganeura::nnef {

std::string at(const std::string& origin, Pos p) {
  return origin + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

namespace {

constexpr int kMaxDepth = 200;

enum class Tok { End, Ident, Int, Real, Str, Punct };

struct Token {
  Tok kind = Tok::End;
  std::string text;
  double number = 0;
  Pos pos;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of file";
    case Tok::Str: return "string '" + t.text + "'";
    default: return "'" + t.text + "'";
  }
}

class Lexer {
 public:
  Lexer(std::string_view text, const std::string& origin) : s_(text), origin_(origin) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.pos = pos_;
      if (i_ >= s_.size()) {
        out.push_back(t);
        return out;
      }
      const char c = s_[i_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        t.kind = Tok::Ident;
        while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
          t.text += take();
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number(t);
      } else if (c == '\'' || c == '"') {
        string(t, c);
      } else {
        t.kind = Tok::Punct;
        static const char* two[] = {"->", "<=", ">=", "==", "!=", "&&", "||"};
        for (const char* p : two)
          if (s_.substr(i_, 2) == p) t.text = p;
        if (t.text.empty()) {
          if (std::string_view("(){}[]<>,;:=+-*/^!?").find(c) == std::string_view::npos)
            fail(pos_, "expected a token, got " + printable(c));
          t.text = std::string(1, c);
        }
        for (size_t k = 0; k < t.text.size(); ++k) take();
      }
      out.push_back(std::move(t));
    }
  }

 private:
  std::string_view s_;
  const std::string& origin_;
  size_t i_ = 0;
  Pos pos_;

  [[noreturn]] void fail(Pos p, const std::string& what) const {
    throw FormatError("[load_nnef] " + at(origin_, p) + ": " + what);
  }
  static std::string printable(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
  }
  char take() {
    const char c = s_[i_++];
    if (c == '\n') {
      ++pos_.line;
      pos_.column = 1;
    } else {
      ++pos_.column;
    }
    return c;
  }
  void skip_space() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') take();
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        take();
      } else {
        return;
      }
    }
  }
  void digits(std::string& out) {
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) out += take();
  }
  void number(Token& t) {
    std::string text;
    digits(text);
    bool real = false;
    if (i_ + 1 < s_.size() && s_[i_] == '.' && std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))) {
      real = true;
      text += take();
      digits(text);
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      size_t k = i_ + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      if (k < s_.size() && std::isdigit(static_cast<unsigned char>(s_[k]))) {
        real = true;
        while (i_ < k) text += take();
        digits(text);
      }
    }
    t.kind = real ? Tok::Real : Tok::Int;
    t.text = text;
    t.number = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(t.number)) fail(t.pos, "expected a finite number, got " + text);
    if (!real && t.number > 9007199254740992.0) fail(t.pos, "expected an integer below 2^53, got " + text);
  }
  void string(Token& t, char quote) {
    take();
    t.kind = Tok::Str;
    for (;;) {
      if (i_ >= s_.size() || s_[i_] == '\n')
        fail(t.pos, "expected the string's closing quote, got end of line");
      const char c = take();
      if (c == quote) return;
      if (c == '\\') {
        if (i_ >= s_.size()) fail(t.pos, "expected an escaped character, got end of file");
        t.text += take();
      } else {
        t.text += c;
      }
    }
  }
};

const std::set<std::string> kTypeNames = {"integer", "scalar", "logical", "string", "?"};

class Parser {
 public:
  Parser(std::vector<Token> toks, const std::string& origin) : t_(std::move(toks)), origin_(origin) {}

  Document document(bool fragments_only) {
    Document d;
    if (!fragments_only) {
      expect_word("version");
      const Token& v = peek();
      if (v.kind != Tok::Real && v.kind != Tok::Int) fail(v, "expected a version number like 1.0");
      d.version = v.text;
      next();
      expect(";");
      while (is_word("extension")) {
        next();
        d.extensions.push_back(ident("an extension name"));
        while (accept(",")) d.extensions.push_back(ident("an extension name"));
        expect(";");
      }
    }
    while (is_word("fragment")) d.fragments.push_back(fragment());
    if (fragments_only) {
      if (peek().kind != Tok::End) fail(peek(), "expected 'fragment' or end of file");
      return d;
    }
    d.graph_pos = peek().pos;
    expect_word("graph");
    d.has_graph = true;
    d.graph_name = ident("the graph's name");
    d.inputs = ident_list();
    expect("->");
    d.outputs = ident_list();
    d.body = body();
    if (peek().kind != Tok::End) fail(peek(), "expected end of file after the graph");
    return d;
  }

 private:
  std::vector<Token> t_;
  size_t k_ = 0;
  const std::string& origin_;
  int depth_ = 0;

  struct Guard {
    Parser& p;
    explicit Guard(Parser& parser, const Token& t) : p(parser) {
      if (++p.depth_ > kMaxDepth)
        p.fail(t, "expected expressions nested at most " + std::to_string(kMaxDepth) + " deep");
    }
    ~Guard() { --p.depth_; }
  };

  const Token& peek(size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  void next() {
    if (k_ + 1 < t_.size()) ++k_;
  }
  [[noreturn]] void fail(const Token& t, const std::string& what) const {
    throw FormatError("[load_nnef] " + at(origin_, t.pos) + ": " + what + ", got " + describe(t));
  }
  bool is(const char* p) const { return peek().kind == Tok::Punct && peek().text == p; }
  bool is_word(const char* w) const { return peek().kind == Tok::Ident && peek().text == w; }
  bool accept(const char* p) {
    if (!is(p)) return false;
    next();
    return true;
  }
  void expect(const char* p) {
    if (!accept(p)) fail(peek(), std::string("expected '") + p + "'");
  }
  void expect_word(const char* w) {
    if (!is_word(w)) fail(peek(), std::string("expected '") + w + "'");
    next();
  }
  std::string ident(const char* what) {
    if (peek().kind != Tok::Ident) fail(peek(), std::string("expected ") + what);
    std::string s = peek().text;
    next();
    return s;
  }
  std::vector<std::string> ident_list() {
    std::vector<std::string> r;
    expect("(");
    if (accept(")")) return r;
    do r.push_back(ident("an identifier"));
    while (accept(","));
    expect(")");
    return r;
  }

  std::string type_name() {
    if (accept("?")) return "?";
    if (peek().kind == Tok::Ident && kTypeNames.count(peek().text)) {
      std::string s = peek().text;
      next();
      return s;
    }
    fail(peek(), "expected a type name (integer, scalar, logical, string or ?)");
  }
  std::string type_spec() {
    Guard guard(*this, peek());
    std::string base;
    if (is_word("tensor")) {
      next();
      expect("<");
      base = "tensor<";
      if (!is(">")) base += type_name();
      expect(">");
      base += ">";
    } else if (accept("(")) {
      base = "(" + type_spec();
      while (accept(",")) base += "," + type_spec();
      expect(")");
      base += ")";
    } else {
      base = type_name();
    }
    while (is("[") && peek(1).kind == Tok::Punct && peek(1).text == "]") {
      next();
      next();
      base += "[]";
    }
    return base;
  }

  Fragment fragment() {
    Fragment f;
    f.pos = peek().pos;
    expect_word("fragment");
    f.name = ident("the fragment's name");
    if (accept("<")) {
      expect("?");
      f.generic = true;
      if (accept("=")) f.generic_default = type_name();
      expect(">");
    }
    expect("(");
    if (!is(")")) {
      do f.params.push_back(param(true));
      while (accept(","));
    }
    expect(")");
    expect("->");
    expect("(");
    do f.results.push_back(param(false));
    while (accept(","));
    expect(")");
    if (accept(";")) return f;
    f.has_body = true;
    f.body = body();
    return f;
  }
  Param param(bool with_default) {
    Param p;
    p.pos = peek().pos;
    p.name = ident("a parameter name");
    expect(":");
    p.type = type_spec();
    if (with_default && accept("=")) p.default_value = expr();
    return p;
  }
  std::vector<Assignment> body() {
    std::vector<Assignment> r;
    expect("{");
    while (!accept("}")) {
      if (peek().kind == Tok::End) fail(peek(), "expected '}'");
      Assignment a;
      a.pos = peek().pos;
      a.lhs = lvalue();
      expect("=");
      a.rhs = expr();
      expect(";");
      r.push_back(std::move(a));
    }
    return r;
  }
  ExprPtr lvalue() {
    Guard guard(*this, peek());
    auto e = std::make_shared<Expr>();
    e->pos = peek().pos;
    if (peek().kind == Tok::Ident) {
      e->kind = Expr::Kind::Ident;
      e->text = ident("an identifier");
      return e;
    }
    const bool array = is("[");
    if (!array && !is("(")) fail(peek(), "expected an identifier, '[' or '(' on the left of '='");
    next();
    e->kind = array ? Expr::Kind::Array : Expr::Kind::Tuple;
    do e->items.push_back(lvalue());
    while (accept(","));
    expect(array ? "]" : ")");
    return e;
  }

  // rvalue expressions, lowest precedence first
  ExprPtr expr() {
    Guard guard(*this, peek());
    ExprPtr e = binary(0);
    if (is_word("if")) {
      auto r = std::make_shared<Expr>();
      r->kind = Expr::Kind::IfElse;
      r->pos = peek().pos;
      next();
      ExprPtr cond = binary(0);
      expect_word("else");
      r->items = {cond, e, expr()};
      return r;
    }
    return e;
  }
  static int level_of(const Token& t) {
    if (t.kind == Tok::Ident) return t.text == "in" ? 3 : -1;
    if (t.kind != Tok::Punct) return -1;
    const std::string& s = t.text;
    if (s == "||") return 1;
    if (s == "&&") return 2;
    if (s == "==" || s == "!=") return 4;
    if (s == "<" || s == "<=" || s == ">" || s == ">=") return 5;
    if (s == "+" || s == "-") return 6;
    if (s == "*" || s == "/") return 7;
    if (s == "^") return 8;
    return -1;
  }
  // operators of at least `min` precedence; `^` is right-associative, the others left
  ExprPtr binary(int min) {
    Guard guard(*this, peek());
    ExprPtr lhs = unary();
    for (;;) {
      const int level = level_of(peek());
      if (level < 0 || level < min) return lhs;
      auto e = std::make_shared<Expr>();
      e->kind = Expr::Kind::Binary;
      e->pos = peek().pos;
      e->text = peek().text;
      next();
      ExprPtr rhs = binary(level == 8 ? level : level + 1);
      e->items = {lhs, rhs};
      lhs = e;
    }
  }
  ExprPtr unary() {
    Guard guard(*this, peek());
    if (is("-") || is("+") || is("!")) {
      auto e = std::make_shared<Expr>();
      e->kind = Expr::Kind::Unary;
      e->pos = peek().pos;
      e->text = peek().text;
      next();
      e->items = {unary()};
      return e;
    }
    return postfix(primary());
  }
  ExprPtr postfix(ExprPtr x) {
    while (is("[")) {
      Guard guard(*this, peek());
      auto e = std::make_shared<Expr>();
      e->pos = peek().pos;
      next();
      ExprPtr begin = is(":") ? nullptr : expr();
      if (accept(":")) {
        e->kind = Expr::Kind::Slice;
        ExprPtr end = is("]") ? nullptr : expr();
        e->items = {x, begin, end};
      } else {
        e->kind = Expr::Kind::Index;
        e->items = {x, begin};
      }
      expect("]");
      x = e;
    }
    return x;
  }
  bool generic_call_ahead() const {
    // name<type>( ... : a call with a generic type, not a comparison
    if (!(peek(1).kind == Tok::Punct && peek(1).text == "<")) return false;
    const Token& t = peek(2);
    const bool type =
        (t.kind == Tok::Ident && kTypeNames.count(t.text)) || (t.kind == Tok::Punct && t.text == "?");
    return type && peek(3).kind == Tok::Punct && peek(3).text == ">" && peek(4).kind == Tok::Punct &&
           peek(4).text == "(";
  }
  ExprPtr primary() {
    Guard guard(*this, peek());
    const Token t = peek();
    auto e = std::make_shared<Expr>();
    e->pos = t.pos;
    switch (t.kind) {
      case Tok::Int:
      case Tok::Real:
        e->kind = t.kind == Tok::Int ? Expr::Kind::Int : Expr::Kind::Real;
        e->number = t.number;
        next();
        return e;
      case Tok::Str:
        e->kind = Expr::Kind::Str;
        e->text = t.text;
        next();
        return e;
      case Tok::Ident:
        if (t.text == "true" || t.text == "false") {
          e->kind = Expr::Kind::Bool;
          e->flag = t.text == "true";
          next();
          return e;
        }
        e->text = t.text;
        if (generic_call_ahead()) {
          next();
          next();
          e->generic = type_name();
          expect(">");
        } else {
          next();
        }
        if (!is("(")) {
          if (!e->generic.empty()) fail(peek(), "expected '('");
          e->kind = Expr::Kind::Ident;
          return e;
        }
        e->kind = Expr::Kind::Call;
        arguments(*e);
        return e;
      case Tok::Punct:
        if (t.text == "[") return array();
        if (t.text == "(") {
          next();
          ExprPtr first = expr();
          if (accept(")")) return first;  // parenthesised
          e->kind = Expr::Kind::Tuple;
          e->items.push_back(first);
          while (accept(",")) e->items.push_back(expr());
          expect(")");
          return e;
        }
        break;
      default: break;
    }
    fail(t, "expected an expression");
  }
  void arguments(Expr& call) {
    expect("(");
    if (accept(")")) return;
    do {
      if (peek().kind == Tok::Ident && peek(1).kind == Tok::Punct && peek(1).text == "=") {
        std::string name = peek().text;
        next();
        next();
        call.named.emplace_back(std::move(name), expr());
      } else {
        if (!call.named.empty()) fail(peek(), "expected a named argument after named arguments");
        call.items.push_back(expr());
      }
    } while (accept(","));
    expect(")");
  }
  ExprPtr array() {
    auto e = std::make_shared<Expr>();
    e->pos = peek().pos;
    expect("[");
    if (is_word("for")) {
      next();
      e->kind = Expr::Kind::For;
      do {
        std::string var = ident("a loop variable");
        expect_word("in");
        e->named.emplace_back(std::move(var), binary(4));  // above `in`, so the iterator's `in` is not eaten
      } while (accept(","));
      ExprPtr cond;
      if (is_word("if")) {
        next();
        cond = binary(0);
      }
      expect_word("yield");
      e->items = {expr(), cond};
      expect("]");
      return e;
    }
    e->kind = Expr::Kind::Array;
    if (accept("]")) return e;
    do e->items.push_back(expr());
    while (accept(","));
    expect("]");
    return e;
  }
};

}  // namespace

Document parse(std::string_view text, const std::string& origin, bool fragments_only) {
  Parser p(Lexer(text, origin).run(), origin);
  return p.document(fragments_only);
}

}  // namespace meganeura::nnef
