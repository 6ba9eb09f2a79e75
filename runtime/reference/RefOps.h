// One function per reference op; Dispatch.cpp maps op names to them after the signature
// checks (attributes completed with defaults, required tensors present with their dtypes).
#pragma once
#include "reference/RefArgs.h"

namespace deepinfer::ref {

Status kvQuantInsert(RefArgs& a);     // KvCacheRef.cpp
Status gatherKcache(RefArgs& a);      // KvCacheRef.cpp
Status combineTopkSwa(RefArgs& a);    // CombineRef.cpp
Status gatherKcacheCombine(RefArgs& a);  // GatherCombineRef.cpp
Status sparseMlaPrefill(RefArgs& a);  // SparseMlaRef.cpp
Status sparseMlaDecode(RefArgs& a);   // SparseMlaRef.cpp
Status indexerLogits(RefArgs& a);     // IndexerRef.cpp
Status topk(RefArgs& a);              // TopkRef.cpp
Status mhcPre(RefArgs& a);            // MhcRef.cpp
Status mhcPost(RefArgs& a);           // MhcRef.cpp
Status mhcFusedPostPre(RefArgs& a);   // MhcRef.cpp
Status mhcCollapse(RefArgs& a);       // MhcRef.cpp
Status weightGemm(RefArgs& a);        // WeightGemmRef.cpp
Status moeExperts(RefArgs& a);        // MoeExpertsRef.cpp

}  // namespace deepinfer::ref
