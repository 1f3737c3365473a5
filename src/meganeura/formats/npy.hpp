#pragma once
// NumPy's .npy files (format versions 1.0, 2.0 and 3.0): the magic "\x93NUMPY", a version, a header length,
// a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces to a
// multiple of 64 bytes, then the array's bytes in C order. The reader checks every part before it reads a
// value (magic, version, header length inside the file, the three keys and nothing else, a known dtype,
// C order, dimensions without overflow, data size = shape × item size) and names the file and the field
// at fault in a FormatError. Values come back as float64 (integers exact up to 2^53), as HostTensor holds
// them; `meganeura run` feeds them to sessions and writes outputs back with write_npy.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "meganeura/ir/host_tensor.hpp"

namespace meganeura {

// The dtypes read and written, by their descr: f2 f4 f8, i1 i2 i4 i8, u1 u2 u4 u8 (little-endian or
// byte-sized) and b1 (bool).
struct NpyArray {
  std::string descr;  // as written, e.g. "<f4", "|b1"
  HostTensor value;
};

NpyArray parse_npy(std::span<const std::byte> file, const std::string& origin);
NpyArray read_npy(const std::string& path);  // FormatError when missing, unreadable or malformed

// A version 1.0 file of `descr` ("<f4", "<f8", "<i4", "<i8", "|b1", ...) holding `value` converted to it (a
// value that does not fit an integer dtype is a ConfigError naming `origin`, as is an unknown descr).
std::vector<std::byte> serialize_npy(const HostTensor& value, const std::string& descr,
                                     const std::string& origin = "npy");
void write_npy(const std::string& path, const HostTensor& value, const std::string& descr = "<f4");

}  // namespace meganeura
