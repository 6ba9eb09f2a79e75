// mhc_pre (docs/ops.md §8, delayed form): mixes pre/post/comb of the residual x, and
// layer_input = rmsnorm(bf16(sum_m pre_in[m] x[m]), norm_weight). Implemented by MhcMixFamily.
#include "Families.h"
#include "MhcMixFamily.h"

namespace deepinfer {

const KernelFamily& mhcPreFamily() {
  static const MhcMixFamily f(/*fused=*/false);
  return f;
}

}  // namespace deepinfer
