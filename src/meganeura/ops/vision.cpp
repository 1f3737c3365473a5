// Rows for: conv2d and its gradients, pools, upsample_nearest. Owned by helper B2; this placeholder only keeps the table's registration list linking
// until those rows land. Until then Graph::make throws GraphError for these ops.
#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

void register_vision(OpTable&) {}

}  // namespace meganeura::ops
