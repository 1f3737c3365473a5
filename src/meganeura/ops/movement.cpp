// Rows for: slice, concat, pad, gather, scatter_add. Owned by helper B2; this placeholder only keeps the table's registration list linking
// until those rows land. Until then Graph::make throws GraphError for these ops.
#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

void register_movement(OpTable&) {}

}  // namespace meganeura::ops
