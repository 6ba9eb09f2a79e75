#include "CpuForwardTrace.h"

#include <algorithm>
#include <fmt/format.h>

namespace deepinfer {

const char* decisionKindName(CpuDecisionKind k) {
  switch (k) {
    case CpuDecisionKind::Router: return "router";
    case CpuDecisionKind::IndexTopk: return "index_topk";
    case CpuDecisionKind::CandidateBlocks: return "candidate_blocks";
  }
  return "?";
}

std::map<CpuDecisionKind, CpuFlipStats> compareDecisionTraces(const CpuDecisionTrace& a,
                                                              const CpuDecisionTrace& b) {
  std::map<CpuDecisionKind, CpuFlipStats> out;
  for (const auto& [key, setA] : a.decisions) {
    auto it = b.decisions.find(key);
    if (it == b.decisions.end()) continue;
    const std::vector<int32_t>& setB = it->second;
    CpuFlipStats& s = out[CpuDecisionKind(std::get<0>(key))];
    ++s.sets;
    if (setA != setB) ++s.setsDiffering;
    s.members += int64_t(setA.size());
    for (int32_t m : setA)
      if (!std::binary_search(setB.begin(), setB.end(), m)) ++s.membersFlipped;
  }
  return out;
}

std::string formatFlipStats(const std::map<CpuDecisionKind, CpuFlipStats>& stats) {
  std::string s;
  for (const auto& [kind, st] : stats)
    s += fmt::format("{}: {}/{} sets differ ({:.3f}%), {}/{} members flipped ({:.3f}%)\n",
                     decisionKindName(kind), st.setsDiffering, st.sets, 100 * st.setRate(),
                     st.membersFlipped, st.members, 100 * st.memberRate());
  return s;
}

}  // namespace deepinfer
