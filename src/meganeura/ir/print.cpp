// Graph::to_text and Graph::to_dot: listings with names, attributes and builder lines.
#include <cstdio>
#include <string_view>

#include "meganeura/ir/graph.hpp"

namespace meganeura {

namespace {

std::string ints_str(const std::vector<int64_t>& v) { return shape_str(v); }

std::string reals_str(const std::vector<double>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v[i]);
    r += (i ? "," : "");
    r += buf;
  }
  return r + "]";
}

bool is_loss(Op op) {
  return op == Op::CrossEntropy || op == Op::CrossEntropyIndex || op == Op::MseLoss || op == Op::L1Loss ||
         op == Op::BceWithLogits;
}

std::string attrs_str(const Node& n) {
  const Attrs& a = n.attrs;
  std::vector<std::string> parts;
  bool leaf = n.op == Op::Input || n.op == Op::Parameter || n.op == Op::Constant || n.op == Op::Fill;
  if (!a.axes.empty()) parts.push_back("axes=" + ints_str(a.axes));
  if (n.op == Op::RoundToFormat && a.ints.size() == 3) {
    static const char* const rounding[] = {"nearest_even", "up", "down"};
    parts.push_back(std::string("format=") + format_info(NumberFormat(a.ints[0])).name);
    parts.push_back(a.ints[1] ? "saturate" : "no_saturate");
    parts.push_back(std::string("rounding=") + rounding[size_t(a.ints[2]) % 3]);
  } else if (!a.ints.empty() && !leaf) {
    parts.push_back("ints=" + ints_str(a.ints));
  }
  if (!a.reals.empty()) parts.push_back((n.op == Op::Fill ? "value=" : "reals=") + reals_str(a.reals));
  if (a.keepdim) parts.push_back("keepdim");
  if (a.flag_a) parts.push_back(n.op == Op::MatMul ? "transpose_a" : "flag_a");
  if (a.flag_b) parts.push_back(n.op == Op::MatMul ? "transpose_b" : "flag_b");
  if (is_loss(n.op))
    parts.push_back(a.reduction == Reduction::Mean ? "mean" : a.reduction == Reduction::Sum ? "sum" : "none");
  if (n.op == Op::Cast) parts.push_back(std::string("to=") + dtype_name(a.dtype));
  if (a.seed) parts.push_back("seed=" + std::to_string(a.seed));
  std::string r;
  for (size_t i = 0; i < parts.size(); ++i) r += (i ? " " : "") + parts[i];
  return r;
}

std::string short_where(const std::source_location& loc) {
  std::string_view f = loc.file_name();
  size_t slash = f.find_last_of('/');
  if (slash != std::string_view::npos) f = f.substr(slash + 1);
  return std::string(f) + ":" + std::to_string(loc.line());
}

std::string id_str(NodeId id) {
  std::string r = "%";
  r += std::to_string(id.v);
  return r;
}

std::string dot_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

}  // namespace

std::string Graph::to_text() const {
  std::string out;
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    std::string line = id_str(NodeId{i}) + " = " + op_name(n.op);
    if (!n.inputs.empty()) {
      line += "(";
      for (size_t k = 0; k < n.inputs.size(); ++k) line += (k ? ", " : "") + id_str(n.inputs[k]);
      line += ")";
    }
    line += " ";
    line += dtype_name(n.dtype);
    line += shape_str(n.shape);
    std::string at = attrs_str(n);
    if (!at.empty()) line += " {" + at + "}";
    if (!n.prov.name.empty()) line += " \"" + n.prov.name + "\"";
    line += "  # " + short_where(n.prov.loc);
    if (!n.prov.rule.empty()) {
      line += " [" + n.prov.rule;
      for (NodeId d : n.prov.derived_from) line += " <- " + id_str(d);
      line += "]";
    }
    out += line + "\n";
  }
  if (!outputs_.empty()) {
    out += "outputs:";
    for (NodeId o : outputs_) {
      out += ' ';
      out += id_str(o);
    }
    out += "\n";
  }
  for (const auto& [w, gr] : gradients_) {
    out += "gradient ";
    out += id_str(w);
    out += " -> ";
    out += id_str(gr);
    out += '\n';
  }
  return out;
}

std::string Graph::to_dot() const {
  std::string out = "digraph meganeura {\n  rankdir=TB;\n  node [fontname=\"monospace\" fontsize=10];\n";
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    std::string label = id_str(NodeId{i}) + " " + op_name(n.op);
    if (!n.prov.name.empty()) label += "\\n" + dot_escape(n.prov.name);
    label += "\\n" + std::string(dtype_name(n.dtype)) + shape_str(n.shape);
    std::string at = attrs_str(n);
    if (!at.empty()) label += "\\n" + dot_escape(at);
    const char* style = n.op == Op::Parameter ? "shape=box style=filled fillcolor=lightblue"
                        : n.op == Op::Input   ? "shape=box style=filled fillcolor=lightyellow"
                        : (n.op == Op::Constant || n.op == Op::Fill) ? "shape=box style=dashed"
                        : n.prov.rule.empty()                        ? "shape=ellipse"
                                              : "shape=ellipse style=filled fillcolor=mistyrose";
    out += "  n" + std::to_string(i) + " [label=\"" + label + "\" " + style + "];\n";
    for (NodeId in : n.inputs) out += "  n" + std::to_string(in.v) + " -> n" + std::to_string(i) + ";\n";
  }
  for (NodeId o : outputs_) out += "  n" + std::to_string(o.v) + " [peripheries=2];\n";
  return out + "}\n";
}

}  // namespace meganeura
