// The dimensions of an op instance that, besides its shape bucket (ShapeBuckets.h), decide
// whether a tuned config is valid for it or fast on it: heads, index widths, window, ratio,
// block sizes, hidden size, Sinkhorn rounds. They are part of the tuning key, so a winner tuned
// for one model (V4.1-Flash, 64 heads) is never applied to another (tiny, 8 heads); per-call
// sizes (rows, batch, pool pages) are left to the bucket.
//
// Which dimensions those are is a fact of each op's family (KernelFamily::tuningDims), e.g.
// sparse_mla_decode: H, Sq, swa_k, extra_k, swa_bs, extra_bs; topk: k; combine_topk_swa: topk,
// window, ratio; weight_gemm none (its bucket class holds the matrix).
#pragma once
#include <optional>
#include <string>

#include "deepinfer/KernelFamily.h"

namespace deepinfer {

// "H=64,Sq=1,swa_k=128,extra_k=512,swa_bs=64,extra_bs=64" ("" for an op without such dims);
// nullopt for an unknown op or when a tensor or attribute the op needs is missing (such a
// description fails validation anyway).
std::optional<std::string> tuningDims(const OpDesc& d);

}  // namespace deepinfer
