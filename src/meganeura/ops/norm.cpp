// Rows for: layer_norm, rms_norm, batch_norm, group_norm. Owned by helper B2; this placeholder only keeps the table's registration list linking
// until those rows land. Until then Graph::make throws GraphError for these ops.
#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

void register_norm(OpTable&) {}

}  // namespace meganeura::ops
