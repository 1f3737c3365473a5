#include "meganeura/onnx/proto.hpp"

#include <cstring>

#include "meganeura/core/error.hpp"

namespace meganeura::onnx {

const char* elem_type_name(int32_t t) {
  static const char* names[] = {"undefined",      "float",    "uint8",        "int8",           "uint16",
                                "int16",          "int32",    "int64",        "string",         "bool",
                                "float16",        "double",   "uint32",       "uint64",         "complex64",
                                "complex128",     "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                                "float8e5m2fnuz", "uint4",    "int4",         "float4e2m1",     "float8e8m0",
                                "uint2",          "int2",     "float6e2m3",   "float6e3m2"};
  if (t >= 0 && t < int32_t(sizeof(names) / sizeof(names[0]))) return names[t];
  static thread_local std::string other;
  other = "type " + std::to_string(t);
  return other.c_str();
}

namespace {

enum Wire : uint32_t { Varint = 0, Fixed64 = 1, Bytes = 2, Fixed32 = 5 };

// One message's bytes. `path` names the message for errors ("graph.node[3]").
class Reader {
 public:
  Reader(const std::byte* p, size_t n, const std::string& origin, std::string path)
      : p_(reinterpret_cast<const uint8_t*>(p)), n_(n), origin_(origin), path_(std::move(path)) {}

  bool done() const { return pos_ >= n_; }

  [[noreturn]] void fail(const std::string& what, const std::string& field = "") const {
    throw FormatError("[load_onnx] " + origin_ + ": " + path_ + (field.empty() ? "" : "." + field) + ": " +
                      what);
  }

  uint64_t varint(const char* field) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= n_)
        fail("expected a varint, got the end of the message at byte " + std::to_string(pos_), field);
      const uint8_t b = p_[pos_++];
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("expected a varint of at most 10 bytes, got a longer one", field);
  }

  // Reads a key; returns false at the end of the message.
  bool next(uint32_t& field, uint32_t& wire) {
    if (done()) return false;
    const uint64_t key = varint("key");
    field = uint32_t(key >> 3);
    wire = uint32_t(key & 7);
    if (field == 0 || key >> 32) fail("expected a field number in 1..2^29, got key " + std::to_string(key));
    return true;
  }

  std::span<const std::byte> bytes(const char* field) {
    const uint64_t len = varint(field);
    if (len > n_ - pos_)
      fail("expected " + std::to_string(len) + " bytes, got " + std::to_string(n_ - pos_) + " left", field);
    std::span<const std::byte> s(reinterpret_cast<const std::byte*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }

  template <class T>
  T fixed(const char* field) {
    if (sizeof(T) > n_ - pos_)
      fail("expected a " + std::to_string(sizeof(T)) + "-byte value, got the end", field);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  void skip(uint32_t wire, uint32_t field) {
    const std::string f = "field " + std::to_string(field);
    switch (wire) {
      case Varint: varint(f.c_str()); return;
      case Fixed64: fixed<uint64_t>(f.c_str()); return;
      case Bytes: bytes(f.c_str()); return;
      case Fixed32: fixed<uint32_t>(f.c_str()); return;
      default: fail("expected wire type 0, 1, 2 or 5, got " + std::to_string(wire), f);
    }
  }

  void expect(uint32_t wire, uint32_t want, const char* field) const {
    if (wire != want)
      fail("expected wire type " + std::to_string(want) + ", got " + std::to_string(wire), field);
  }

  std::string string(uint32_t wire, const char* field) {
    expect(wire, Bytes, field);
    auto s = bytes(field);
    return std::string(reinterpret_cast<const char*>(s.data()), s.size());
  }
  int64_t int64(uint32_t wire, const char* field) {
    expect(wire, Varint, field);
    return int64_t(varint(field));
  }

  // A repeated varint field, packed or not.
  template <class T>
  void varints(uint32_t wire, std::vector<T>& out, const char* field) {
    if (wire == Varint) {
      out.push_back(T(varint(field)));
      return;
    }
    expect(wire, Bytes, field);
    Reader packed = sub(field);
    while (!packed.done()) out.push_back(T(packed.varint(field)));
  }
  // A repeated fixed-width field, packed or not.
  template <class T>
  void fixeds(uint32_t wire, std::vector<T>& out, const char* field) {
    const uint32_t want = sizeof(T) == 4 ? Fixed32 : Fixed64;
    if (wire == want) {
      out.push_back(fixed<T>(field));
      return;
    }
    expect(wire, Bytes, field);
    auto s = bytes(field);
    if (s.size() % sizeof(T))
      fail("expected a multiple of " + std::to_string(sizeof(T)) + " bytes, got " + std::to_string(s.size()),
           field);
    const size_t old = out.size();
    out.resize(old + s.size() / sizeof(T));
    if (!s.empty()) std::memcpy(out.data() + old, s.data(), s.size());
  }

  Reader sub(const std::string& field) {
    auto s = bytes(field.c_str());
    return Reader(s.data(), s.size(), origin_, path_ + "." + field);
  }
  Reader sub_msg(uint32_t wire, const std::string& field) {
    expect(wire, Bytes, field.c_str());
    return sub(field);
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& origin_;
  std::string path_;
};

std::string indexed(const char* name, size_t i) { return std::string(name) + "[" + std::to_string(i) + "]"; }

TensorProto read_tensor(Reader r) {
  TensorProto t;
  uint32_t f, w;
  while (r.next(f, w)) {
    switch (f) {
      case 1: r.varints(w, t.dims, "dims"); break;
      case 2: t.data_type = int32_t(r.int64(w, "data_type")); break;
      case 3:
        t.has_segment = true;
        r.skip(w, f);
        break;
      case 4: r.fixeds(w, t.float_data, "float_data"); break;
      case 5: r.varints(w, t.int32_data, "int32_data"); break;
      case 6: t.string_data.push_back(r.string(w, "string_data")); break;
      case 7: r.varints(w, t.int64_data, "int64_data"); break;
      case 8: t.name = r.string(w, "name"); break;
      case 9: t.raw_data = r.string(w, "raw_data"); break;
      case 10: r.fixeds(w, t.double_data, "double_data"); break;
      case 11: r.varints(w, t.uint64_data, "uint64_data"); break;
      case 13: {
        Reader e = r.sub_msg(w, indexed("external_data", t.external_data.size()));
        std::pair<std::string, std::string> kv;
        uint32_t ef, ew;
        while (e.next(ef, ew)) {
          if (ef == 1)
            kv.first = e.string(ew, "key");
          else if (ef == 2)
            kv.second = e.string(ew, "value");
          else
            e.skip(ew, ef);
        }
        t.external_data.push_back(std::move(kv));
        break;
      }
      case 14: t.external = r.int64(w, "data_location") == 1; break;
      default: r.skip(w, f);
    }
  }
  return t;
}

AttributeProto read_attribute(Reader r) {
  AttributeProto a;
  uint32_t f, w;
  while (r.next(f, w)) {
    switch (f) {
      case 1: a.name = r.string(w, "name"); break;
      case 2:
        r.expect(w, Fixed32, "f");
        a.f = r.fixed<float>("f");
        break;
      case 3: a.i = r.int64(w, "i"); break;
      case 4: a.s = r.string(w, "s"); break;
      case 5: a.t.push_back(read_tensor(r.sub_msg(w, "t"))); break;
      case 6:
      case 11:
        ++a.graphs;
        r.skip(w, f);
        break;
      case 7: r.fixeds(w, a.floats, "floats"); break;
      case 8: r.varints(w, a.ints, "ints"); break;
      case 9: a.strings.push_back(r.string(w, "strings")); break;
      case 10: a.tensors.push_back(read_tensor(r.sub_msg(w, indexed("tensors", a.tensors.size())))); break;
      case 20: a.type = int32_t(r.int64(w, "type")); break;
      case 21: a.ref_attr_name = r.string(w, "ref_attr_name"); break;
      default: r.skip(w, f);
    }
  }
  if (a.t.size() > 1) a.t.erase(a.t.begin(), a.t.end() - 1);  // a repeated singular field: the last wins
  return a;
}

NodeProto read_node(Reader r) {
  NodeProto n;
  uint32_t f, w;
  while (r.next(f, w)) {
    switch (f) {
      case 1: n.input.push_back(r.string(w, "input")); break;
      case 2: n.output.push_back(r.string(w, "output")); break;
      case 3: n.name = r.string(w, "name"); break;
      case 4: n.op_type = r.string(w, "op_type"); break;
      case 5:
        n.attribute.push_back(read_attribute(r.sub_msg(w, indexed("attribute", n.attribute.size()))));
        break;
      case 7: n.domain = r.string(w, "domain"); break;
      default: r.skip(w, f);
    }
  }
  return n;
}

ValueInfoProto read_value_info(Reader r) {
  ValueInfoProto v;
  uint32_t f, w;
  while (r.next(f, w)) {
    if (f == 1) {
      v.name = r.string(w, "name");
    } else if (f == 2) {
      Reader type = r.sub_msg(w, "type");
      uint32_t tf, tw;
      while (type.next(tf, tw)) {
        if (tf != 1) {
          type.skip(tw, tf);
          continue;
        }
        v.is_tensor = true;
        Reader tensor = type.sub_msg(tw, "tensor_type");
        uint32_t xf, xw;
        while (tensor.next(xf, xw)) {
          if (xf == 1) {
            v.elem_type = int32_t(tensor.int64(xw, "elem_type"));
          } else if (xf == 2) {
            v.has_shape = true;
            Reader shape = tensor.sub_msg(xw, "shape");
            uint32_t sf, sw;
            while (shape.next(sf, sw)) {
              if (sf != 1) {
                shape.skip(sw, sf);
                continue;
              }
              Reader dim = shape.sub_msg(sw, indexed("dim", v.dims.size()));
              Dim d;
              uint32_t df, dw;
              while (dim.next(df, dw)) {
                if (df == 1) {
                  d.has_value = true;
                  d.value = dim.int64(dw, "dim_value");
                } else if (df == 2) {
                  d.param = dim.string(dw, "dim_param");
                } else {
                  dim.skip(dw, df);
                }
              }
              v.dims.push_back(std::move(d));
            }
          } else {
            tensor.skip(xw, xf);
          }
        }
      }
    } else {
      r.skip(w, f);
    }
  }
  return v;
}

GraphProto read_graph(Reader r) {
  GraphProto g;
  uint32_t f, w;
  while (r.next(f, w)) {
    switch (f) {
      case 1: g.node.push_back(read_node(r.sub_msg(w, indexed("node", g.node.size())))); break;
      case 2: g.name = r.string(w, "name"); break;
      case 5:
        g.initializer.push_back(read_tensor(r.sub_msg(w, indexed("initializer", g.initializer.size()))));
        break;
      case 11: g.input.push_back(read_value_info(r.sub_msg(w, indexed("input", g.input.size())))); break;
      case 12: g.output.push_back(read_value_info(r.sub_msg(w, indexed("output", g.output.size())))); break;
      case 13:
        g.value_info.push_back(read_value_info(r.sub_msg(w, indexed("value_info", g.value_info.size()))));
        break;
      case 15:
        ++g.sparse_initializers;
        r.skip(w, f);
        break;
      default: r.skip(w, f);
    }
  }
  return g;
}

}  // namespace

ModelProto parse_model(std::span<const std::byte> bytes, const std::string& origin) {
  Reader r(bytes.data(), bytes.size(), origin, "model");
  ModelProto m;
  uint32_t f, w;
  while (r.next(f, w)) {
    switch (f) {
      case 1: m.ir_version = r.int64(w, "ir_version"); break;
      case 2: m.producer_name = r.string(w, "producer_name"); break;
      case 7:
        m.graph = read_graph(r.sub_msg(w, "graph"));
        m.has_graph = true;
        break;
      case 8: {
        Reader o = r.sub_msg(w, indexed("opset_import", m.opset_import.size()));
        OpsetId id;
        uint32_t of, ow;
        while (o.next(of, ow)) {
          if (of == 1)
            id.domain = o.string(ow, "domain");
          else if (of == 2)
            id.version = o.int64(ow, "version");
          else
            o.skip(ow, of);
        }
        m.opset_import.push_back(std::move(id));
        break;
      }
      case 25:
        ++m.functions;
        r.skip(w, f);
        break;
      default: r.skip(w, f);
    }
  }
  if (!m.has_graph) r.fail("expected a graph (field 7), got none");
  return m;
}

TensorProto parse_tensor(std::span<const std::byte> bytes, const std::string& origin) {
  return read_tensor(Reader(bytes.data(), bytes.size(), origin, "tensor"));
}

}  // namespace meganeura::onnx
