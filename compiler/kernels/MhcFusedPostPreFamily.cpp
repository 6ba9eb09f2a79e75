// mhc_fused_post_pre (docs/ops.md §8): the post step of the finished sublayer fused with the
// (delayed) pre step of the next one. The new bf16 residual is written once and the next
// sublayer's mixes are computed from that bf16 residual in the same pass, so the fused and
// unfused paths agree. Implemented by MhcMixFamily.
#include "Families.h"
#include "MhcMixFamily.h"

namespace deepinfer {

const KernelFamily& mhcFusedPostPreFamily() {
  static const MhcMixFamily f(/*fused=*/true);
  return f;
}

}  // namespace deepinfer
