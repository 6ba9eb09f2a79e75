// deepinfer-model-bench's speculative rows without a GPU (benchmarks/ModelBenchSpecRows.h): the
// oracle's drafts, the per-step check that an oracle step accepted exactly the forced a, the
// tally that turns a step that did not into a row error, and the fields of the table and JSON.
// A simulated greedy verifier shows the point of the recording: a continuation computed the way
// the verify steps compute it is accepted exactly for every forced a, while one from another
// rounding regime (one near-tie decided the other way) is caught at the step where it parts.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ModelBenchSpecRows.h"

using namespace deepinfer::bench;

namespace {

constexpr int kB = 5;
constexpr int64_t kV = 1000;

// The target's greedy choice after `history` in a rounding regime: a hash of the last tokens;
// `flipAt` >= 0 decides the near-tie at that history length the other way.
int32_t target(const std::vector<int32_t>& history, int64_t flipAt) {
  uint64_t h = 0x9E3779B97F4A7C15ull * (history.size() + 1);
  for (size_t i = history.size() >= 3 ? history.size() - 3 : 0; i < history.size(); ++i)
    h = (h ^ uint64_t(history[i])) * 0xBF58476D1CE4E5B9ull;
  int32_t t = int32_t((h >> 33) % uint64_t(kV));
  if (int64_t(history.size()) == flipAt) t = (t + 7) % int32_t(kV);
  return t;
}

// One greedy verify step: the longest prefix of `drafts` the target agrees with, then its own token.
struct Step {
  int accepted = 0;
  std::vector<int32_t> emitted;
};
Step verify(std::vector<int32_t>& history, const std::vector<int32_t>& drafts, int64_t flipAt) {
  Step s;
  for (int32_t d : drafts) {
    if (d != target(history, flipAt)) break;
    history.push_back(d);
    s.emitted.push_back(d);
    ++s.accepted;
  }
  s.emitted.push_back(target(history, flipAt));
  history.push_back(s.emitted.back());
  return s;
}

// The recording: steps until `need` tokens, whatever the drafts (here: all wrong).
std::vector<int32_t> record(const std::vector<int32_t>& prompt, int32_t first, int64_t need, int64_t flipAt) {
  std::vector<int32_t> history = prompt, c{first};
  history.push_back(first);
  while (int64_t(c.size()) < need) {
    const Step s = verify(history, std::vector<int32_t>(kB, int32_t(kV)), flipAt);  // kV: never a token
    c.insert(c.end(), s.emitted.begin(), s.emitted.end());
  }
  return c;
}

// `steps` oracle steps at forced a against `c`, in the verifier's regime `flipAt`.
SpecRow runOracle(const std::vector<int32_t>& prompt, const std::vector<int32_t>& c, int forced, int steps,
                  int64_t flipAt) {
  SpecRow row;
  row.kind = "oracle";
  row.forced = forced;
  row.streams = 1;
  AcceptTally tally;
  std::vector<int32_t> history = prompt;
  history.push_back(c[0]);
  int64_t at = 1;
  for (int i = 0; i < steps; ++i) {
    const std::vector<int32_t> d = oracleDrafts(c, at, forced, kB, kV);
    EXPECT_EQ(d.size(), size_t(kB));
    const Step s = verify(history, d, flipAt);
    const std::string miss = oracleStepMismatch(c, at, forced, s.accepted, s.emitted);
    if (!miss.empty()) tally.mismatch(0, i, miss);
    tally.add(s.accepted);
    at += int64_t(s.emitted.size());
  }
  tally.finish(row);
  return row;
}

TEST(ModelBenchSpecRows, ContinuationLengthCoversEveryStep) {
  // One untimed + 32 timed steps of 6 tokens each, after the prompt's own first token.
  EXPECT_EQ(oracleContinuationLength(33, 5), 1 + 33 * 6);
  EXPECT_EQ(oracleContinuationLength(1, 5), 7);
  EXPECT_EQ(oracleContinuationLength(0, 5), 1);
}

TEST(ModelBenchSpecRows, OracleDraftsMakeExactlyTheForcedOneWrong) {
  const std::vector<int32_t> c = {10, 11, 12, 13, 14, 15, 999, 17};
  EXPECT_EQ(oracleDrafts(c, 1, 5, 5, kV), (std::vector<int32_t>{11, 12, 13, 14, 15}));
  EXPECT_EQ(oracleDrafts(c, 1, 0, 5, kV), (std::vector<int32_t>{12, 12, 13, 14, 15}));
  EXPECT_EQ(oracleDrafts(c, 1, 3, 5, kV), (std::vector<int32_t>{11, 12, 13, 15, 15}));
  EXPECT_EQ(oracleDrafts(c, 2, 4, 5, kV), (std::vector<int32_t>{12, 13, 14, 15, 0}));  // 999 + 1 wraps
  EXPECT_TRUE(oracleDrafts(c, 4, 5, 5, kV).empty());  // past the recording
  EXPECT_TRUE(oracleDrafts(c, 0, 5, 5, kV).empty());  // the anchor is not a draft
}

TEST(ModelBenchSpecRows, StepMismatchNamesWhatDiffers) {
  const std::vector<int32_t> c = {10, 11, 12, 13, 14, 15, 16, 17};
  EXPECT_EQ(oracleStepMismatch(c, 1, 2, 2, {11, 12, 13}), "");
  EXPECT_EQ(oracleStepMismatch(c, 1, 0, 0, {11}), "");
  EXPECT_EQ(oracleStepMismatch(c, 2, 5, 5, {12, 13, 14, 15, 16, 17}), "");
  EXPECT_EQ(oracleStepMismatch(c, 1, 2, 1, {11, 40}), "accepted 1 of the forced 2, emitted [11, 40] where the "
                                                      "recording has [11, 12, 13]");
  // Right count, wrong token after the drafts: the verify row parted from the recording.
  EXPECT_NE(oracleStepMismatch(c, 1, 2, 2, {11, 12, 99}), "");
  EXPECT_NE(oracleStepMismatch(c, 4, 5, 5, {14, 15, 16, 17, 1, 2}).find("ends before position 10"), std::string::npos);
}

TEST(ModelBenchSpecRows, ARecordingInTheVerifiersRegimeIsExactForEveryA) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4};
  const int steps = 9;
  const int64_t need = oracleContinuationLength(steps, kB);
  const std::vector<int32_t> c = record(prompt, 5, need, /*flipAt=*/-1);
  ASSERT_GE(int64_t(c.size()), need);
  for (int a = 0; a <= kB; ++a) {
    const SpecRow r = runOracle(prompt, c, a, steps, -1);
    EXPECT_TRUE(r.error.empty()) << "a=" << a << ": " << r.error;
    EXPECT_EQ(r.mismatchedSteps, 0) << a;
    EXPECT_EQ(r.meanAccepted, double(a));
    EXPECT_EQ(r.minAccepted, a);
    EXPECT_EQ(r.maxAccepted, a);
  }
}

TEST(ModelBenchSpecRows, AContinuationFromAnotherRegimeFailsLoudly) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4};
  const int steps = 9;
  // The continuation's regime decides the near-tie after 20 tokens of history the other way.
  const std::vector<int32_t> c = record(prompt, 5, oracleContinuationLength(steps, kB), /*flipAt=*/20);
  const SpecRow r = runOracle(prompt, c, kB, steps, /*flipAt=*/-1);
  EXPECT_GT(r.mismatchedSteps, 0);
  EXPECT_LT(r.meanAccepted, double(kB));
  // History length 20 = prompt 4 + the first token + 15: the third step (index 2) covers positions 17 .. 22.
  EXPECT_NE(r.error.find("oracle a=5:"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("first: stream 0, step 2: accepted 3 of the forced 5"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("does not measure acceptance length 5"), std::string::npos) << r.error;
}

TEST(ModelBenchSpecRows, TallyErrsOnlyForOracleRows) {
  AcceptTally model;
  for (int a : {0, 0, 1, 0}) model.add(a);
  SpecRow m;
  m.kind = "model";
  model.finish(m);
  EXPECT_TRUE(m.error.empty());
  EXPECT_DOUBLE_EQ(m.meanAccepted, 0.25);
  EXPECT_EQ(m.minAccepted, 0);
  EXPECT_EQ(m.maxAccepted, 1);
  // An oracle whose mean is right but whose steps are not (2 and 4 for a forced 3) is still wrong.
  AcceptTally spread;
  spread.add(2);
  spread.add(4);
  SpecRow o;
  o.kind = "oracle";
  o.forced = 3;
  spread.finish(o);
  EXPECT_DOUBLE_EQ(o.meanAccepted, 3.0);
  EXPECT_NE(o.error.find("timed steps accepted 2..4"), std::string::npos) << o.error;
  // An earlier error (a failed call) is kept, not replaced.
  SpecRow failed;
  failed.kind = "oracle";
  failed.forced = 1;
  failed.error = "out of memory";
  spread.finish(failed);
  EXPECT_EQ(failed.error, "out of memory");
}

TEST(ModelBenchSpecRows, JsonAndTableCarryForcedAndMeasured) {
  SpecRow plain{.streams = 4, .kind = "plain", .steps = 16, .stepMs = 20.0, .tokPerS = 200.0};
  SpecRow oracle{.streams = 4, .kind = "oracle", .forced = 3, .steps = 16, .stepMs = 30.0, .meanAccepted = 3,
                 .minAccepted = 3, .maxAccepted = 3, .tokPerS = 400.0};
  SpecRow bad = oracle;
  bad.forced = 5;
  bad.meanAccepted = 4.5;
  bad.minAccepted = 2;
  bad.mismatchedSteps = 3;
  bad.error = "oracle a=5: \"left\" the recording";
  const std::string j = specRowsJson({plain, oracle, bad});
  auto has = [&](const std::string& what) { return j.find(what) != std::string::npos; };
  EXPECT_TRUE(has(R"({"streams": 4, "kind": "plain", "forced_accepted": null, "steps": 16, "step_ms": 20,)")) << j;
  EXPECT_TRUE(has(R"({"streams": 4, "kind": "oracle", "forced_accepted": 3, "steps": 16, "step_ms": 30, )"
                  R"("mean_accepted": 3, "min_accepted": 3, "max_accepted": 3, "mismatched_steps": 0, "tok_s": 400, )"
                  R"("error": null})"))
      << j;
  EXPECT_TRUE(has(R"("forced_accepted": 5, "steps": 16, "step_ms": 30, "mean_accepted": 4.5, "min_accepted": 2, )"
                  R"("max_accepted": 3, "mismatched_steps": 3, "tok_s": 400, )"
                  R"("error": "oracle a=5: \"left\" the recording"})"))
      << j;
  EXPECT_EQ(j.front(), '[');
  EXPECT_EQ(j.back(), ']');

  testing::internal::CaptureStdout();
  printSpecRows({plain, oracle, bad}, kB);
  std::fflush(stdout);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("forced"), std::string::npos) << out;
  // The oracle row: 30 ms, forced 3, 3.00 accepted, 3..3, 1.50x a plain step.
  EXPECT_NE(out.find("oracle a=3      30.00       3      3.00      3..3      400.0     1.50x"), std::string::npos)
      << out;
  EXPECT_NE(out.find("oracle a=5 ERROR oracle a=5:"), std::string::npos) << out;
}

}  // namespace
