// The .npy reader and writer (formats/npy.hpp): the header numpy 1.x writes for a 2×2 float32 array (copied
// from `np.save`'s output: the writer must produce it byte for byte), round trips of every dtype, and a
// FormatError naming the file and the field for each malformed header. tests/cli/test_cli.py checks files
// against numpy itself.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "meganeura/core/error.hpp"
#include "meganeura/formats/npy.hpp"

using namespace meganeura;

namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string with_header(const std::string& dict, const std::string& data) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h + data;
}

std::string format_error(const std::string& file) {
  try {
    parse_npy(bytes_of(file), "x.npy");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Npy, WritesNumpysHeaderAndReadsItBack) {
  const HostTensor t({2, 2}, {1.5, -2.0, 3.0, 4.25});
  const std::vector<std::byte> b = serialize_npy(t, "<f4");
  ASSERT_EQ(b.size(), 144u);  // np.save of this array: 128 header bytes + 16 data bytes
  const std::string head(reinterpret_cast<const char*>(b.data()), 128);
  EXPECT_EQ(head.substr(0, 69), std::string("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, "
                                            "'shape': (2, 2), }",
                                            69));  // 10 bytes of magic, version and length, then the dict
  EXPECT_EQ(head.back(), '\n');
  const NpyArray a = parse_npy(b, "t.npy");
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_EQ(a.value.shape, (Shape{2, 2}));
  EXPECT_EQ(a.value.data, t.data);
}

TEST(Npy, RoundTripsEveryDtype) {
  const HostTensor small({3}, {0, 1, 100});
  for (const char* d : {"<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"}) {
    const HostTensor want = std::string(d) == "|b1" ? HostTensor({3}, {0, 1, 1}) : small;
    const NpyArray a = parse_npy(serialize_npy(small, d), d);
    EXPECT_EQ(a.value.data, want.data) << d;
    EXPECT_EQ(a.value.shape, want.shape) << d;
  }
  const NpyArray scalar = parse_npy(serialize_npy(HostTensor::scalar(7), "<i8"), "s");
  EXPECT_TRUE(scalar.value.shape.empty());
  EXPECT_EQ(scalar.value.data, std::vector<double>{7});
  EXPECT_THROW(serialize_npy(HostTensor({1}, {300}), "|u1"), ConfigError);
  EXPECT_THROW(serialize_npy(small, ">f4"), ConfigError);
}

TEST(Npy, MalformedFilesNameTheField) {
  const std::string four(8, '\0');
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(format_error(with_header(ok, four)), "no error");
  struct Case {
    std::string file, message;
  } cases[] = {
      {"PK\x03\x04 not numpy", "expected the magic"},
      {std::string("\x93NUMPY\x09\x00\x10\x00", 10), "expected format version 1.0, 2.0 or 3.0, got 9.0"},
      {std::string("\x93NUMPY\x01\x00\xff\x7f{}", 12), "inside the file"},
      {with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", four), "got '<c8'"},
      {with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", four), "got '>f4'"},
      {with_header("{'descr': '<f4', 'shape': (2,), }", four), "got no 'fortran_order'"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", four), "got 'x'"},
      {with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", four), "C order"},
      {with_header("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", four), "True or False"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", four),
       "a dimension of 'shape'"},
      {with_header(ok, four + "x"), "expected 8 data bytes for shape and '<f4', got 9"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 9999999), }",
                   ""),
       "overflow"},
  };
  for (const Case& c : cases) {
    const std::string m = format_error(c.file);
    EXPECT_NE(m.find(c.message), std::string::npos) << m;
    if (m != "no error") {
      EXPECT_NE(m.find("x.npy"), std::string::npos) << m;
    }
  }
}

}  // namespace
