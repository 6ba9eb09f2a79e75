#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/CpuForward.h"
#include "model/Sampling.h"

using namespace deepinfer;

namespace {

std::vector<float> randomLogits(int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> l(static_cast<size_t>(V));
  for (float& x : l) x = d(rng);
  return l;
}

}  // namespace

TEST(Sampling, GreedyIsArgmax) {
  const SamplingOptions greedy{};  // temperature 0
  ASSERT_TRUE(validateSampling(greedy).ok());
  for (uint32_t s = 1; s <= 20; ++s) {
    const auto l = randomLogits(1000 + s, s);
    EXPECT_EQ(sampleToken(l.data(), int64_t(l.size()), greedy, s), argmaxToken(l.data(), int64_t(l.size())));
  }
  // Ties go to the lower index.
  const std::vector<float> tie = {1.f, 5.f, 2.f, 5.f, 5.f};
  EXPECT_EQ(sampleToken(tie.data(), 5, greedy, 0), 1);
}

TEST(Sampling, TinyTopPIsArgmax) {
  SamplingOptions o;
  o.temperature = 0.8;
  o.topP = 1e-9;
  o.seed = 1234;
  ASSERT_TRUE(validateSampling(o).ok());
  for (uint32_t s = 1; s <= 20; ++s) {
    const auto l = randomLogits(500, 100 + s);
    for (uint64_t step = 0; step < 10; ++step)
      EXPECT_EQ(sampleToken(l.data(), 500, o, step), argmaxToken(l.data(), 500));
  }
  // Tied maxima: the nucleus of one token is the lower index.
  const std::vector<float> tie = {0.f, 3.f, 3.f, 1.f};
  for (uint64_t step = 0; step < 50; ++step) EXPECT_EQ(sampleToken(tie.data(), 4, o, step), 1);
}

TEST(Sampling, SameSeedAndStepSameToken) {
  SamplingOptions o;
  o.temperature = 1.0;
  o.topP = 0.95;
  o.seed = 42;
  const auto l = randomLogits(4096, 7);
  int differentSteps = 0;
  for (uint64_t step = 0; step < 200; ++step) {
    const int32_t a = sampleToken(l.data(), 4096, o, step);
    const int32_t b = sampleToken(l.data(), 4096, o, step);
    EXPECT_EQ(a, b) << "step " << step;
    EXPECT_GE(a, 0);
    EXPECT_LT(a, 4096);
    differentSteps += a != sampleToken(l.data(), 4096, o, step + 1000);
  }
  EXPECT_GT(differentSteps, 0) << "the step must change the draw";
  EXPECT_EQ(samplingUniform(42, 9), samplingUniform(42, 9));
  EXPECT_NE(samplingUniform(42, 9), samplingUniform(43, 9));
}

TEST(Sampling, UniformIsInUnitInterval) {
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = samplingUniform(7, uint64_t(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
}

// Chi-square test of the draw frequencies against the softmax on 4 tokens, with and without a
// top-p cut; bounds are the 0.001 critical values (16.27 for 3 degrees of freedom, 10.83 for 1).
TEST(Sampling, FollowsTheDistribution) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  auto chiSquare = [&](const SamplingOptions& o, const std::vector<double>& want, int n) {
    std::vector<int> count(4, 0);
    for (int step = 0; step < n; ++step) ++count[size_t(sampleToken(logits.data(), 4, o, uint64_t(step)))];
    double chi = 0;
    for (size_t i = 0; i < 4; ++i) {
      if (want[i] == 0) {
        EXPECT_EQ(count[i], 0) << "token " << i << " is outside the nucleus";
        continue;
      }
      const double e = want[i] * n;
      chi += (count[i] - e) * (count[i] - e) / e;
    }
    return chi;
  };
  SamplingOptions o;
  o.temperature = 1.0;
  o.seed = 2026;
  const int n = 40000;
  EXPECT_LT(chiSquare(o, {0.1, 0.2, 0.3, 0.4}, n), 16.27);
  // top-p 0.6: sorted {0.4, 0.3, ...}, 0.4 < 0.6 <= 0.7, so the nucleus is tokens 3 and 2.
  o.topP = 0.6;
  EXPECT_LT(chiSquare(o, {0, 0, 0.3 / 0.7, 0.4 / 0.7}, n), 10.83);
  // Temperature 2 flattens: p ~ sqrt(p0).
  o.topP = 1.0;
  o.temperature = 2.0;
  const double z = std::sqrt(0.1) + std::sqrt(0.2) + std::sqrt(0.3) + std::sqrt(0.4);
  EXPECT_LT(chiSquare(o, {std::sqrt(0.1) / z, std::sqrt(0.2) / z, std::sqrt(0.3) / z, std::sqrt(0.4) / z}, n), 16.27);
}

TEST(Sampling, BadOptionsAreErrors) {
  SamplingOptions o;
  o.temperature = -0.5;
  auto s = validateSampling(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("temperature"), std::string::npos) << s.error().message;
  o.temperature = NAN;
  EXPECT_FALSE(validateSampling(o).ok());
  o.temperature = 1.0;
  for (double p : {0.0, -0.1, 1.5, double(NAN)}) {
    o.topP = p;
    auto t = validateSampling(o);
    ASSERT_FALSE(t.ok()) << "top-p " << p;
    EXPECT_NE(t.error().message.find("top-p"), std::string::npos) << t.error().message;
  }
  o.topP = 1.0;
  EXPECT_TRUE(validateSampling(o).ok());
}
