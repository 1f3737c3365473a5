#pragma once
// What the binding files share: the Session handle Python holds, NumPy conversions, UTF-8 text.
//
// Copies, once and for all (docs/python.md lists them for users):
//   in   set_input / set_parameter read the caller's array where it is C-contiguous of the input's dtype
//        (float32, or int32 for integer inputs); anything else is converted by NumPy first. The session then
//        copies into device memory (the one copy a discrete GPU needs).
//   out  read_output / read_parameter / read_gradient download into a std::vector that the returned array
//        takes over (moved, not copied again).
//   views OnnxModel.parameters and LanguageModel.weight_bytes are read-only arrays over the loader's memory
//   (the
//        ONNX file's decoded initializers, the GGUF / safetensors mapping): no copy, kept alive by the model.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meganeura/meganeura.hpp"

namespace meganeura::python {

namespace nb = nanobind;

// A Session owned by Python, or one lent by the Trainer that took it over (kept alive by that Trainer).
struct PySession {
  std::unique_ptr<Session> owned;
  Session* lent = nullptr;
  Session& get() {
    if (owned) return *owned;
    if (lent) return *lent;
    throw SessionError(
        "[Session] expected a live session, got one handed to a Trainer (use trainer.session)");
  }
};

inline PySession wrap_session(Session s) {
  PySession p;
  p.owned = std::make_unique<Session>(std::move(s));
  return p;
}

// f() with the GIL released: compiling a session or running the GPU lets other Python threads go on.
template <typename F>
auto released(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

// A vector's values as a shaped NumPy array that owns them (1-D when `shape` does not account for them).
template <typename T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T> v, const Shape& shape) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule free_it(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  std::vector<size_t> dims(shape.begin(), shape.end());
  size_t count = 1;
  for (size_t d : dims) count *= d;
  if (count != owned->size()) dims = {owned->size()};
  return nb::ndarray<nb::numpy, T>(owned->data(), dims.size(), dims.data(), free_it);
}

// Text from the library as a str; bytes that are not UTF-8 become U+FFFD instead of an exception.
inline nb::str utf8(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
  if (!o) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

// The binding files' parts of the module.
void bind_models(nb::module_& m);
void bind_onnx(nb::module_& m);

}  // namespace meganeura::python
