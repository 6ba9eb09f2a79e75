// runReference: op name -> reference function, after the checks every op shares (attributes
// completed from OpSignature.h, required tensors present with their dtypes).
#include <utility>

#include "deepinfer/OpSignature.h"
#include "deepinfer/Reference.h"
#include "reference/QuantGemmRef.h"
#include "reference/RefOps.h"

namespace deepinfer {
namespace {

using RefFn = Status (*)(ref::RefArgs&);

const std::vector<std::pair<std::string, RefFn>>& refTable() {
  static const std::vector<std::pair<std::string, RefFn>> table = {
      {"kv_quant_insert", ref::kvQuantInsert},
      {"gather_kcache", ref::gatherKcache},
      {"combine_topk_swa", ref::combineTopkSwa},
      {"gather_kcache_combine", ref::gatherKcacheCombine},
      {"sparse_mla_prefill", ref::sparseMlaPrefill},
      {"sparse_mla_decode", ref::sparseMlaDecode},
      {"indexer_logits", ref::indexerLogits},
      {"topk", ref::topk},
      {"mhc_pre", ref::mhcPre},
      {"mhc_post", ref::mhcPost},
      {"mhc_fused_post_pre", ref::mhcFusedPostPre},
      {"mhc_collapse", ref::mhcCollapse},
      {"weight_gemm", ref::weightGemm},
      {"moe_experts", ref::moeExperts},
  };
  return table;
}

using BoundFn = Result<HostTensor> (*)(ref::RefArgs&);

const std::vector<std::pair<std::string, BoundFn>>& boundTable() {
  static const std::vector<std::pair<std::string, BoundFn>> table = {
      {"weight_gemm", ref::weightGemmErrorBound},
      {"moe_experts", ref::moeExpertsErrorBound},
  };
  return table;
}

// The checks every op shares (attributes completed from OpSignature.h, required tensors present
// with their dtypes), then `fn` on the checked arguments.
template <class Fn>
auto withCheckedArgs(const OpSignature& sig, const OpAttrs& attrs, TensorMap& tensors, Fn fn) -> decltype(fn(
    std::declval<ref::RefArgs&>())) {
  auto full = completeAttrs(sig, attrs);
  if (!full.ok()) return full.error();
  ref::RefArgs args(sig, std::move(full).value(), tensors);
  DI_TRY(args.checkSignature());
  return fn(args);
}

}  // namespace

std::vector<std::string> referenceOps() {
  std::vector<std::string> ops;
  for (const auto& [name, fn] : refTable()) ops.push_back(name);
  return ops;
}

Status runReference(const std::string& op, const OpAttrs& attrs, TensorMap& tensors) {
  RefFn fn = nullptr;
  for (const auto& [name, f] : refTable())
    if (name == op) fn = f;
  const OpSignature* sig = findOpSignature(op);
  if (!fn || !sig) {
    std::string known;
    for (const auto& [name, f] : refTable()) known += (known.empty() ? "" : ", ") + name;
    return Error{fmt::format("no reference for op '{}' (known: {})", op, known)};
  }
  return withCheckedArgs(*sig, attrs, tensors, fn);
}

Result<HostTensor> referenceErrorBound(const std::string& op, const OpAttrs& attrs, const TensorMap& inputs) {
  const OpSignature* sig = findOpSignature(op);
  for (const auto& [name, fn] : boundTable())
    if (name == op && sig) {
      TensorMap m = inputs;
      return withCheckedArgs(*sig, attrs, m, fn);
    }
  return Error{fmt::format("op '{}' has no derived error bound (its outputs compare by a fixed tolerance)", op)};
}

}  // namespace deepinfer
