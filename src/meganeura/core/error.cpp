#include "meganeura/core/error.hpp"

#include <string_view>

namespace meganeura {

std::string where(const std::source_location& loc) {
  std::string_view file = loc.file_name();
  return std::string(file) + ":" + std::to_string(loc.line());
}

}  // namespace meganeura
