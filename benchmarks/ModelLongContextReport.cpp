// deepinfer-model-bench --long-context: its part of the table and the JSON file.
#include <fmt/format.h>

#include <cmath>

#include "ModelBenchReport.h"
#include "ReportText.h"

namespace deepinfer::bench {
namespace {

std::string jn(double v) { return std::isfinite(v) && v != 0 ? fmt::format("{:.6g}", v) : "null"; }
std::string pct(double f) { return f > 0 && std::isfinite(f) ? fmt::format("{:.1f}%", 100 * f) : "-"; }
std::string ctxName(int64_t c) { return c % 1024 == 0 ? fmt::format("{}K", c / 1024) : fmt::format("{}", c); }
double gb(int64_t b) { return double(b) / 1e9; }

}  // namespace

double LongContextReport::flatness() const {
  if (decode.size() < 2) return 0;
  const double first = decode.front().row.tokPerS(), last = decode.back().row.tokPerS();
  return first > 0 && last > 0 && decode.back().row.error.empty() && decode.front().row.error.empty() ? last / first
                                                                                                        : 0;
}

void printLongContext(const LongContextReport& r) {
  fmt::print("\nlong context: {} tokens in chunks of {}; {}; the runtime's cache holds {} tokens\n", r.context, r.chunk,
             describeLongContextMemory(r.memory, r.weightBytes, r.freeBytesBeforeLoad), r.capacityTokens);
  fmt::print("prefill of one request to {} positions (the context less the {} decode tokens): ", r.promptTokens,
             r.decodeTokens);
  if (!r.error.empty())
    fmt::print("FAILED at position {} after {:.1f} s: {}\n", r.reached, r.prefillSeconds, r.error);
  else if (r.stopped)
    fmt::print("STOPPED at position {} after {:.1f} s of prefill: the time budget ({} s of the run) ran out; the "
               "remaining segments were not measured\n",
               r.reached, r.prefillSeconds, r.timeBudget);
  else
    fmt::print("{:.1f} s, {:.0f} tok/s; time to first token {:.2f} s\n", r.prefillSeconds,
               r.prefillSeconds > 0 ? double(r.reached) / r.prefillSeconds : 0.0, r.firstTokenMs / 1e3);
  fmt::print("{:>18} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9}\n", "positions", "seconds", "tok/s", "chunks", "compiles",
             "floor s", "roofline");
  for (const LongSegment& s : r.segments)
    fmt::print("{:>18} {:>9.2f} {:>9.0f} {:>8} {:>8} {:>9.2f} {:>9}\n",
               fmt::format("{}..{}", ctxName(s.begin), ctxName(s.end)), s.seconds, s.tokPerS(), s.chunks,
               s.jitCompiles, s.floorSeconds, pct(s.fraction()));
  if (r.freeBytesAfterLoad > 0 && r.freeBytesAfterPrefill > 0)
    fmt::print("device memory the forward passes took by the end of the long prefill: {:.2f} GB (free after loading "
               "- free now); planned {:.2f} GB of scratch + {:.2f} GB of reserve\n",
               gb(r.freeBytesAfterLoad - r.freeBytesAfterPrefill), gb(r.memory.scratchBytes()),
               gb(r.memory.reserveBytes));
  fmt::print("\nsingle-stream decode at each context (a request prefilled to the context less {} tokens, 2 untimed "
             "steps, then the timed ones; one forward call per step)\n",
             r.decodeTokens);
  fmt::print("{:>9} {:>11} {:>13} {:>9} {:>9} {:>14} {:>9}\n", "context", "prefill s", "prefill tok/s", "tok/s",
             "step ms", "floor step ms", "roofline");
  for (const LongDecode& d : r.decode) {
    if (!d.row.error.empty()) {
      fmt::print("{:>9} ERROR {}\n", ctxName(d.context), d.row.error);
      continue;
    }
    fmt::print("{:>9} {:>11.2f} {:>13.0f} {:>9.1f} {:>9.2f} {:>14.3f} {:>9}\n", ctxName(d.context), d.prefillSeconds,
               d.prefillSeconds > 0 ? double(d.prefillTokens) / d.prefillSeconds : 0.0, d.row.tokPerS(),
               d.row.stepMs(), d.row.floorSecondsBatched * 1e3, pct(d.row.fraction()));
  }
  if (r.flatness() > 0)
    fmt::print("how flat: decode at {} runs at {:.2f}x the tok/s at {}\n", ctxName(r.decode.back().context),
               r.flatness(), ctxName(r.decode.front().context));
}

std::string longContextJson(const LongContextReport& r) {
  const LongContextMemory& m = r.memory;
  std::string segs, decode, chunks;
  for (const LongSegment& s : r.segments)
    segs += fmt::format(
        "{}\n      {{\"begin\": {}, \"end\": {}, \"chunks\": {}, \"seconds\": {}, \"tok_s\": {}, \"jit_compiles\": {}, "
        "\"roofline_floor_seconds\": {}, \"roofline_fraction\": {}, \"launches_last_chunk\": {}}}",
        segs.empty() ? "" : ",", s.begin, s.end, s.chunks, jn(s.seconds), jn(s.tokPerS()), s.jitCompiles,
        jn(s.floorSeconds), jn(s.fraction()), launchesJson(s.lastChunkLaunches));
  for (const LongDecode& d : r.decode)
    decode += fmt::format(
        "{}\n      {{\"context\": {}, \"prefill_tokens\": {}, \"prefill_seconds\": {}, \"prefill_tok_s\": {}, "
        "\"prefill_jit_compiles\": {}, \"decode\": {}}}",
        decode.empty() ? "" : ",", d.context, d.prefillTokens, jn(d.prefillSeconds),
        jn(d.prefillSeconds > 0 ? double(d.prefillTokens) / d.prefillSeconds : 0), d.jitCompiles,
        decodeRowJson(d.row));
  for (double ms : r.chunkMs) chunks += fmt::format("{}{:.3f}", chunks.empty() ? "" : ", ", ms);
  const bool complete = r.error.empty() && !r.stopped;
  return fmt::format(
      "{{\"context\": {}, \"chunk\": {}, \"segment\": {}, \"decode_tokens\": {}, \"time_budget_s\": {}, "
      "\"memory\": {{\"weight_bytes\": {}, \"kv_bytes\": {}, \"kv_bytes_per_token\": {}, \"window_bytes\": {}, "
      "\"scratch_bytes\": {}, \"indexer_scores_bytes\": {}, \"attention_workspace_bytes\": {}, "
      "\"block_scores_bytes\": {}, \"reserve_bytes\": {}, \"total_bytes\": {}, \"free_bytes_before_load\": {}, "
      "\"forward_bytes_measured\": {}, \"capacity_tokens\": {}}},\n"
      "    \"prefill\": {{\"prompt_tokens\": {}, \"reached\": {}, \"complete\": {}, \"stopped_by_time_budget\": {}, "
      "\"error\": {}, \"seconds\": {}, \"tok_s\": {}, \"time_to_first_token_ms\": {}, \"segments\": [{}\n    ], "
      "\"chunk_ms\": [{}]}},\n"
      "    \"decode\": [{}\n    ],\n"
      "    \"decode_flatness\": {}}}",
      r.context, r.chunk, r.segment, r.decodeTokens, r.timeBudget > 0 ? std::to_string(r.timeBudget) : "null",
      r.weightBytes, m.kvBytes,
      jn(m.kvBytesPerToken), m.windowBytes, m.scratchBytes(), m.scoresBytes, m.workspaceBytes, m.blockScoresBytes,
      m.reserveBytes, r.weightBytes + m.total(), r.freeBytesBeforeLoad,
      r.freeBytesAfterLoad > 0 && r.freeBytesAfterPrefill > 0
          ? std::to_string(r.freeBytesAfterLoad - r.freeBytesAfterPrefill)
          : "null",
      r.capacityTokens, r.promptTokens, r.reached, complete ? "true" : "false", r.stopped ? "true" : "false",
      r.error.empty() ? "null" : js(r.error), jn(r.prefillSeconds),
      jn(r.prefillSeconds > 0 ? double(r.reached) / r.prefillSeconds : 0), complete ? jn(r.firstTokenMs) : "null",
      segs, chunks, decode,
      r.flatness() > 0 ? fmt::format("{{\"ratio\": {}, \"from_context\": {}, \"to_context\": {}}}", jn(r.flatness()),
                                     r.decode.front().context, r.decode.back().context)
                       : "null");
}

}  // namespace deepinfer::bench
