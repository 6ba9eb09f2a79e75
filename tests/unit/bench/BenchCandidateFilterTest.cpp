// deepinfer-bench's --case and --knob (benchmarks/BenchOptions.h): the lead times chosen
// candidates (e.g. weight_gemm's stream = 2 rounds) at chosen decode shapes without the whole
// candidate sweep. Needs no GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "BenchOptions.h"
#include "BenchSpecs.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

Result<BenchOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "deepinfer-bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parseBenchOptions(int(argv.size()), argv.data());
}

TEST(BenchCandidateFilter, KnobsAndCasesParse) {
  auto o = parse({"--op", "weight_gemm", "--case", "wq_b M=1", "--case", "wkv M=4", "--knob", "stream=2",
                  "--knob", "warps_k=-1"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->cases, (std::vector<std::string>{"wq_b M=1", "wkv M=4"}));
  ASSERT_EQ(o->knobs.size(), 2u);
  EXPECT_EQ(o->knobs[0].first, "stream");
  EXPECT_EQ(o->knobs[0].second, 2);
  EXPECT_EQ(o->knobs[1].second, -1);
}

TEST(BenchCandidateFilter, MisuseIsNamed) {
  auto noValue = parse({"--knob", "stream"});
  ASSERT_FALSE(noValue.ok());
  EXPECT_NE(noValue.error().message.find("KEY=VALUE"), std::string::npos);
  auto notInt = parse({"--knob", "stream=two"});
  ASSERT_FALSE(notInt.ok());
  EXPECT_NE(notInt.error().message.find("--knob stream"), std::string::npos);
  auto quick = parse({"--knob", "stream=2", "--quick"});
  ASSERT_FALSE(quick.ok());
  EXPECT_NE(quick.error().message.find("--quick"), std::string::npos);
}

TEST(BenchCandidateFilter, CasesSelectExactShapes) {
  auto ops = selectSpecs(benchSpecs(), {"weight_gemm", "moe_experts"});
  ASSERT_TRUE(ops.ok());
  auto picked = selectCases(*ops, {"wq_b M=1", "E=128 T=1"});
  ASSERT_TRUE(picked.ok()) << picked.error().message;
  ASSERT_EQ(picked->size(), 2u);  // "wq_b M=1" is not "wq_b M=12"
  EXPECT_EQ((*picked)[0].op, "weight_gemm");
  EXPECT_EQ((*picked)[0].shape, "wq_b M=1");
  EXPECT_EQ((*picked)[1].op, "moe_experts");
  auto all = selectCases(*ops, {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), ops->size());
  auto unknown = selectCases(*ops, {"wq_b M=3"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("wq_b M=3"), std::string::npos);
}

}  // namespace
