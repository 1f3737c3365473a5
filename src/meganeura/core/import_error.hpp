#pragma once
// ImportError, a member of the project's error hierarchy (core/error.hpp) kept in its own header so that the
// importers' error does not make every file of the library depend on it.
#include <string>
#include <vector>

#include "meganeura/core/error.hpp"

namespace meganeura {

// A model file uses what the importer cannot lower (load_onnx): every unsupported (op, attribute, node) of
// the model at once, not the first only. what() lists them one per line.
class ImportError : public Error {
 public:
  struct Item {
    std::string op;         // "Resize" or "com.microsoft.FusedGemm"
    std::string attribute;  // "" when the op itself is unsupported
    std::string node;       // the node's name, or its first output's name when it has none
    std::string reason;     // what was expected and found
  };
  ImportError(const std::string& message, std::vector<Item> items)
      : Error(message), items_(std::move(items)) {}
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
};

}  // namespace meganeura
