// OptimizeReport's readable form (the rewrite stage fills the report; the session adds the kernel count).
#include <sstream>

#include "meganeura/config/report.hpp"

namespace meganeura {

std::string OptimizeReport::to_text() const {
  std::ostringstream os;
  os << "nodes " << nodes_before << " -> " << nodes_after << ", kernels " << kernels
     << ", stop: " << (stop_reason.empty() ? "-" : stop_reason) << "\n";
  for (const auto& [rule, times] : rules_fired) os << "  " << rule << " x" << times << "\n";
  return os.str();
}

}  // namespace meganeura
