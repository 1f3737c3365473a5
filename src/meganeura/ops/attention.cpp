// Rows for: scaled_dot_product_attention and its gradients, rope, dropout, swiglu. Owned by helper B2; this placeholder only keeps the table's registration list linking
// until those rows land. Until then Graph::make throws GraphError for these ops.
#include "meganeura/ops/ops.hpp"

namespace meganeura::ops {

void register_attention(OpTable&) {}

}  // namespace meganeura::ops
