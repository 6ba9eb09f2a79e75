// casesFor: op name -> generator.
#include <stdexcept>
#include <utility>

#include "cases/CaseGenerators.h"
#include "deepinfer/OpSignature.h"

namespace deepinfer::testing {
namespace {

using Generator = std::vector<OpCase> (*)(uint64_t, bool);

const std::vector<std::pair<std::string, Generator>>& generators() {
  static const std::vector<std::pair<std::string, Generator>> g = {
      {"kv_quant_insert", kvQuantInsertCases},
      {"gather_kcache", gatherKcacheCases},
      {"combine_topk_swa", combineTopkSwaCases},
      {"gather_kcache_combine", gatherKcacheCombineCases},
      {"sparse_mla_prefill", sparseMlaPrefillCases},
      {"sparse_mla_decode", sparseMlaDecodeCases},
      {"indexer_logits", indexerLogitsCases},
      {"topk", topkCases},
      {"mhc_pre", mhcPreCases},
      {"mhc_post", mhcPostCases},
      {"mhc_fused_post_pre", mhcFusedPostPreCases},
      {"mhc_collapse", mhcCollapseCases},
      {"weight_gemm", weightGemmCases},
      {"moe_experts", moeExpertsCases},
  };
  return g;
}

}  // namespace

std::vector<OpCase> casesFor(const std::string& op, uint64_t seed, bool large) {
  for (const auto& [name, gen] : generators())
    if (name == op) return gen(seed, large);
  throw std::invalid_argument("casesFor: no test cases for op '" + op + "'");
}

}  // namespace deepinfer::testing
