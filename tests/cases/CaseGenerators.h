// One case generator per op (casesFor in CaseRegistry.cpp dispatches to them).
#pragma once
#include "cases/OpCases.h"

namespace deepinfer::testing {

std::vector<OpCase> kvQuantInsertCases(uint64_t seed, bool large);     // KvQuantInsertCases.cpp
std::vector<OpCase> gatherKcacheCases(uint64_t seed, bool large);      // GatherKcacheCases.cpp
std::vector<OpCase> combineTopkSwaCases(uint64_t seed, bool large);    // CombineTopkSwaCases.cpp
std::vector<OpCase> gatherKcacheCombineCases(uint64_t seed, bool large);  // GatherKcacheCombineCases.cpp
std::vector<OpCase> sparseMlaPrefillCases(uint64_t seed, bool large);  // SparseMlaPrefillCases.cpp
std::vector<OpCase> sparseMlaDecodeCases(uint64_t seed, bool large);   // SparseMlaDecodeCases.cpp
std::vector<OpCase> indexerLogitsCases(uint64_t seed, bool large);     // IndexerLogitsCases.cpp
std::vector<OpCase> topkCases(uint64_t seed, bool large);              // TopkCases.cpp
std::vector<OpCase> mhcPreCases(uint64_t seed, bool large);            // MhcCases.cpp
std::vector<OpCase> mhcPostCases(uint64_t seed, bool large);           // MhcCases.cpp
std::vector<OpCase> mhcFusedPostPreCases(uint64_t seed, bool large);   // MhcCases.cpp
std::vector<OpCase> mhcCollapseCases(uint64_t seed, bool large);       // MhcCases.cpp
std::vector<OpCase> weightGemmCases(uint64_t seed, bool large);        // WeightGemmCases.cpp
std::vector<OpCase> moeExpertsCases(uint64_t seed, bool large);        // MoeExpertsCases.cpp

}  // namespace deepinfer::testing
