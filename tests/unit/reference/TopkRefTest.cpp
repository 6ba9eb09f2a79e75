// topk reference (docs/ops.md §7, §11): hand-worked selections with ties (lower index first),
// -inf, signed zeros and short rows, the selection property on every generated case, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "RefTestUtil.h"

namespace deepinfer::testing {
namespace {

std::vector<int32_t> topkOf(const std::vector<float>& row, int32_t len, int64_t k) {
  TensorMap m;
  m["scores"] = f32Of({1, int64_t(row.size())}, row);
  m["lens"] = i32Tensor({1}, {len});
  OpAttrs a;
  a.setInt("k", k);
  const std::string err = runError("topk", a, m);
  EXPECT_EQ(err, "");
  if (!err.empty()) return {};
  const int32_t* p = m["indices"].ptr<int32_t>();
  return std::vector<int32_t>(p, p + k);
}

using V = std::vector<int32_t>;

TEST(TopkRef, HandWorkedSelections) {
  const float ninf = -INFINITY;
  const std::vector<float> row = {1, 5, 3, 5, ninf, 2, 5};
  EXPECT_EQ(topkOf(row, 7, 3), (V{1, 3, 6}));     // three 5s
  EXPECT_EQ(topkOf(row, 7, 4), (V{1, 2, 3, 6}));  // then the 3
  EXPECT_EQ(topkOf(row, 5, 3), (V{1, 2, 3}));     // only the first 5 scores count
  EXPECT_EQ(topkOf(row, 2, 3), (V{0, 1, -1}));    // lens <= k: 0..lens-1, then -1
  EXPECT_EQ(topkOf(row, 3, 3), (V{0, 1, 2}));
  EXPECT_EQ(topkOf(row, 0, 3), (V{-1, -1, -1}));
  EXPECT_EQ(topkOf({5, 4, 5, 5, 5}, 5, 2), (V{0, 2}));          // ties: lower index first
  EXPECT_EQ(topkOf({ninf, ninf, ninf, 1}, 4, 2), (V{0, 3}));    // -inf still counts, ties by index
  EXPECT_EQ(topkOf({-0.f, 0.f, -0.f, -1.f}, 4, 2), (V{0, 1}));  // -0 == +0
  EXPECT_EQ(topkOf({1, 2, NAN, INFINITY}, 2, 1), (V{1}));       // past lens is never read
}

TEST(TopkRef, GeneratedCasesSelectTheLargestWithLowerIndexTies) {
  for (OpCase& c : casesFor("topk", 5, false)) {
    TensorMap m = c.inputs;
    ASSERT_EQ(runError(c.op, c.attrs, m), "") << c.name;
    const int64_t T = m["scores"].dim(0), N = m["scores"].dim(1), k = c.attrs.getInt("k", 0);
    for (int64_t t = 0; t < T; ++t) {
      const float* s = m["scores"].ptr<float>() + t * N;
      const int32_t* o = m["indices"].ptr<int32_t>() + t * k;
      const int64_t len = m["lens"].ptr<int32_t>()[t], n = std::min(len, k);
      std::vector<bool> chosen(size_t(len), false);
      for (int64_t i = 0; i < k; ++i) {
        if (i >= n) {
          ASSERT_EQ(o[i], -1) << c.name << " row " << t;
          continue;
        }
        ASSERT_GE(o[i], 0) << c.name;
        ASSERT_LT(o[i], len) << c.name;
        if (i) {
          ASSERT_LT(o[i - 1], o[i]) << c.name << ": not ascending";
        }
        chosen[size_t(o[i])] = true;
      }
      // Every chosen entry beats every other: larger, or equal with a lower index.
      float minChosen = INFINITY;
      int32_t lastAtMin = -1;
      for (int64_t i = 0; i < n; ++i) {
        if (s[o[i]] <= minChosen) lastAtMin = o[i];  // indices ascend: the last at the minimum
        minChosen = std::min(minChosen, s[o[i]]);
      }
      for (int64_t j = 0; j < len; ++j) {
        if (chosen[size_t(j)]) continue;
        ASSERT_TRUE(s[j] < minChosen || (s[j] == minChosen && j > lastAtMin))
            << c.name << " row " << t << ": index " << j << " (" << s[j] << ") should have been chosen";
      }
    }
  }
}

TEST(TopkRef, Errors) {
  TensorMap m;
  m["scores"] = f32Of({2, 3}, {1, 2, 3, 4, NAN, 6});
  m["lens"] = i32Tensor({2}, {3, 2});
  OpAttrs a;
  a.setInt("k", 2);
  EXPECT_EQ(runError("topk", a, m), "topk: scores[1, 1] is NaN (within lens[1] = 2)");
  m["lens"] = i32Tensor({2}, {3, 4});
  EXPECT_EQ(runError("topk", a, m), "topk: lens[1] = 4 is outside [0, N = 3]");
  m["lens"] = i32Tensor({3}, {3, 1, 1});
  EXPECT_EQ(runError("topk", a, m), "topk: tensor 'lens' has shape [3], expected [T=2]");
  a.setInt("k", 0);
  EXPECT_EQ(runError("topk", a, m), "topk: attribute 'k' = 0 must lie in [1, 16777216]");
}

}  // namespace
}  // namespace deepinfer::testing
