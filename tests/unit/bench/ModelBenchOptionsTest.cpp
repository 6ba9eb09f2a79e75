// deepinfer-model-bench's command line (benchmarks/ModelBenchOptions.h): the synthetic full-depth
// model speculates unless told not to (it builds the DSpark draft), --no-speculative turns the
// speculative rows (and the synthetic draft) off for either source, and bad combinations are
// refused with the flag named.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ModelBenchOptions.h"

using namespace deepinfer;
using namespace deepinfer::bench;

namespace {

Result<ModelBenchOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "deepinfer-model-bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parseModelBenchOptions(int(argv.size()), argv.data());
}

TEST(ModelBenchOptions, SyntheticSpeculatesUnlessTurnedOff) {
  auto synth = parse({"--synthetic", "flash", "--experts", "128"});
  ASSERT_TRUE(synth.ok()) << synth.error().message;
  EXPECT_EQ(synth->synthetic, "flash");
  EXPECT_EQ(synth->experts, 128);
  EXPECT_TRUE(synth->speculative);
  auto off = parse({"--synthetic", "flash", "--no-speculative"});
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_FALSE(off->speculative);
  auto model = parse({"--model", "/tmp/m"});
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_TRUE(model->speculative);
  auto proxy = parse({"--synthetic", "proxy", "--long-context", "1048576"});
  ASSERT_TRUE(proxy.ok()) << proxy.error().message;
  EXPECT_EQ(proxy->synthetic, "proxy");
  auto proxyExperts = parse({"--synthetic", "proxy", "--experts", "64"});
  ASSERT_FALSE(proxyExperts.ok());
  EXPECT_NE(proxyExperts.error().message.find("--experts applies to --synthetic flash only"), std::string::npos);
  auto modelOff = parse({"--no-speculative", "--model", "/tmp/m"});
  ASSERT_TRUE(modelOff.ok());
  EXPECT_FALSE(modelOff->speculative);
}

TEST(ModelBenchOptions, SizesForTheSpeculativeRows) {
  auto o = parse({"--synthetic", "flash", "--contexts", "2048", "--streams", "1,4,12", "--decode-steps", "16",
                  "--repeats", "2", "--prompt", "256"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->contexts, std::vector<int64_t>{2048});
  EXPECT_EQ(o->streams, (std::vector<int>{1, 4, 12}));
  EXPECT_EQ(o->decodeSteps, 16);
  EXPECT_EQ(o->repeats, 2);
  EXPECT_EQ(o->promptTokens, 256);
  // --quick fills in only what was not given.
  auto q = parse({"--synthetic", "flash", "--quick", "--streams", "12"});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->streams, std::vector<int>{12});
  EXPECT_EQ(q->decodeSteps, 8);
  EXPECT_EQ(q->repeats, 1);
  EXPECT_TRUE(q->speculative);
}

TEST(ModelBenchOptions, RefusesBadCombinations) {
  auto both = parse({"--synthetic", "flash", "--model", "/tmp/m"});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().message.find("either --model DIR or --synthetic flash"), std::string::npos);
  auto expertsAlone = parse({"--model", "/tmp/m", "--experts", "64"});
  ASSERT_FALSE(expertsAlone.ok());
  EXPECT_NE(expertsAlone.error().message.find("--experts applies to --synthetic flash only"), std::string::npos);
  auto zeroSteps = parse({"--synthetic", "flash", "--decode-steps", "0"});
  ASSERT_FALSE(zeroSteps.ok());
  EXPECT_NE(zeroSteps.error().message.find("--decode-steps expects an integer >= 1, got '0'"), std::string::npos)
      << zeroSteps.error().message;
  auto noValue = parse({"--synthetic", "flash", "--streams"});
  ASSERT_FALSE(noValue.ok());
  EXPECT_NE(noValue.error().message.find("--streams needs a value"), std::string::npos);
}

TEST(ModelBenchOptions, UsageDescribesTheDraftAndTheOracle) {
  const std::string u = modelBenchUsage();
  EXPECT_NE(u.find("with the DSpark draft (mtp.0-2, 128 experts each, 7.9 GB) unless --no-speculative"),
            std::string::npos);
  EXPECT_NE(u.find("recorded at the verify steps' own batch shape"), std::string::npos);
  EXPECT_NE(u.find("--synthetic: build no draft"), std::string::npos);
}

}  // namespace

TEST(ModelBenchOptions, TensorRanks) {
  auto dflt = parse({"--synthetic", "proxy"});
  ASSERT_TRUE(dflt.ok()) << dflt.error().message;
  EXPECT_EQ(dflt->tp, 1);
  auto two = parse({"--synthetic", "proxy", "--tp", "2"});
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_EQ(two->tp, 2);
  auto four = parse({"--model", "/tmp/m", "--tp", "4", "--quick"});
  ASSERT_TRUE(four.ok()) << four.error().message;
  EXPECT_EQ(four->tp, 4);
  auto zero = parse({"--synthetic", "proxy", "--tp", "0"});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("--tp expects an integer >= 1, got '0'"), std::string::npos)
      << zero.error().message;
  auto word = parse({"--synthetic", "proxy", "--tp", "two"});
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.error().message.find("--tp"), std::string::npos) << word.error().message;
  auto none = parse({"--synthetic", "proxy", "--tp"});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("--tp needs a value"), std::string::npos) << none.error().message;
  EXPECT_NE(modelBenchUsage().find("--tp N"), std::string::npos);
}

TEST(ModelBenchOptions, PdlSwitch) {
  auto on = parse({"--synthetic", "proxy", "--pdl", "on"});
  ASSERT_TRUE(on.ok()) << on.error().message;
  EXPECT_TRUE(on->pdl);
  auto off = parse({"--synthetic", "proxy", "--pdl", "off"});
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_FALSE(off->pdl);
  auto dflt = parse({"--synthetic", "proxy"});
  ASSERT_TRUE(dflt.ok());
  EXPECT_EQ(dflt->pdl, programmaticLaunchDefault());  // DEEPINFER_PDL, else on
  auto bad = parse({"--synthetic", "proxy", "--pdl", "maybe"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--pdl 'maybe'"), std::string::npos) << bad.error().message;
}
