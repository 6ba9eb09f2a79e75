// Inspection hooks of the CPU reference: counters that show each mechanism engaged, and a
// record of every discrete decision (router experts, index top-k, candidate blocks) so two
// runs, e.g. fp32 and fp64 accumulation, can be compared (docs/model.md §9 flip rate).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace deepinfer {

// Running totals for one request; each counts (layer, token) events unless said otherwise.
struct CpuMechanismCounters {
  int64_t windowSlides = 0;            // attention whose window left older positions out
  int64_t indexerDrops = 0;            // index selections that dropped candidates (> top-k)
  int64_t indexerScored = 0;           // index selections that needed scores at all
  int64_t indexerBoundaryTies = 0;     // dropping selections whose last kept and first dropped
                                       // scores tie exactly (decided by the lower-index rule)
  int64_t compressedEntries = 0;       // entries added to compressed caches (all kv sources)
  int64_t oddTailsCarried = 0;         // ratio-2 entries completed from a tail carried over
                                       // from an earlier prefill/decode call
  int64_t candidateBlocksDropped = 0;  // tokens at the candidate source that dropped blocks
  int64_t candidateEntriesMasked = 0;  // restricted selections where the mask removed entries
  int64_t engramLookups = 0;           // (engram layer, token) table gathers
};

enum class CpuDecisionKind { Router = 0, IndexTopk = 1, CandidateBlocks = 2 };
const char* decisionKindName(CpuDecisionKind k);

// Every decision of a run, keyed by (kind, layer, position); the value is the chosen set,
// sorted ascending.
struct CpuDecisionTrace {
  std::map<std::tuple<int, int, int64_t>, std::vector<int32_t>> decisions;
  void record(CpuDecisionKind kind, int layer, int64_t pos, std::vector<int32_t> chosen) {
    decisions[{int(kind), layer, pos}] = std::move(chosen);
  }
};

// How often two traces of the same token sequence disagree, per decision kind.
struct CpuFlipStats {
  int64_t sets = 0;           // decisions present in both traces
  int64_t setsDiffering = 0;  // decisions whose chosen sets differ
  int64_t members = 0;        // chosen members in the first trace
  int64_t membersFlipped = 0; // members of the first trace's sets missing from the second's
  double setRate() const { return sets ? double(setsDiffering) / double(sets) : 0.0; }
  double memberRate() const { return members ? double(membersFlipped) / double(members) : 0.0; }
};
std::map<CpuDecisionKind, CpuFlipStats> compareDecisionTraces(const CpuDecisionTrace& a,
                                                              const CpuDecisionTrace& b);
std::string formatFlipStats(const std::map<CpuDecisionKind, CpuFlipStats>& stats);

}  // namespace deepinfer
