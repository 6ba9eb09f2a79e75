// combine_topk_swa reference (docs/ops.md §4): a hand-worked batch with query_start_loc[0] != 0,
// the three-region structure of every row of the generated cases, and input errors.
#include <gtest/gtest.h>

#include "RefTestUtil.h"

namespace deepinfer::testing {
namespace {

OpAttrs attrs(int64_t window, int64_t ratio, int64_t K, int64_t M, int64_t N) {
  OpAttrs a;
  a.setInt("window", window);
  a.setInt("ratio", ratio);
  a.setInt("topk", K);
  a.setInt("M", M);
  a.setInt("N", N);
  return a;
}

TEST(CombineTopkSwaRef, HandWorkedRows) {
  // window 3, ratio 2, K 2 -> W = 128; N 4, M 10. Request 0: seq 3, tokens at positions 1, 2,
  // gathered from position 0. Request 1: seq 6, one token at position 5, gathered from 2.
  TensorMap m;
  m["topk_indices"] = i32Tensor({3, 2}, {3, 1, /**/ 4, 0, /**/ -1, 2});
  m["query_start_loc"] = i32Tensor({3}, {5, 7, 8});
  m["seq_lens"] = i32Tensor({2}, {3, 6});
  m["gather_lens"] = i32Tensor({2}, {3, 4});
  ASSERT_EQ(runError("combine_topk_swa", attrs(3, 2, 2, 10, 4), m), "");
  const std::vector<std::vector<int32_t>> want = {
      {3, 4, 5},             // pos 1: topk_len 1 (3 valid); window [0, 1] -> rows 4 + 0..1
      {-1, 4, 5, 6},         // pos 2: topk_len 1, 4 >= N is invalid; window [0, 2]
      {-1, 12, 15, 16, 17},  // pos 5: topk_len 2 (-1 stays -1, 2 + M); window [3, 5] -> 10+4+(3-2)
  };
  ASSERT_EQ(m["rows"].shape, (std::vector<int64_t>{3, 128}));
  for (int64_t t = 0; t < 3; ++t) {
    EXPECT_EQ(m["lens"].ptr<int32_t>()[t], int32_t(want[size_t(t)].size())) << "token " << t;
    for (int64_t k = 0; k < 128; ++k) {
      const int32_t expect = k < int64_t(want[size_t(t)].size()) ? want[size_t(t)][size_t(k)] : -1;
      EXPECT_EQ(m["rows"].ptr<int32_t>()[t * 128 + k], expect) << "token " << t << " entry " << k;
    }
  }
}

TEST(CombineTopkSwaRef, RowWidthRoundsUpTo128) {
  for (auto [K, window, W] :
       {std::tuple<int64_t, int64_t, int64_t>{512, 128, 640}, {7, 3, 128}, {128, 1, 256}}) {
    TensorMap m;
    m["topk_indices"] = i32Tensor({1, K}, std::vector<int32_t>(size_t(K), 0));
    m["query_start_loc"] = i32Tensor({2}, {0, 1});
    m["seq_lens"] = i32Tensor({1}, {1});
    m["gather_lens"] = i32Tensor({1}, {1});
    ASSERT_EQ(runError("combine_topk_swa", attrs(window, 0, K, 2, 0), m), "");
    EXPECT_EQ(m["rows"].shape, (std::vector<int64_t>{1, W}));
    EXPECT_EQ(m["rows"].ptr<int32_t>()[0], 0);  // ratio 0: no top-k entries, the window row M*0 + N + 0
    EXPECT_EQ(m["lens"].ptr<int32_t>()[0], 1);
  }
}

TEST(CombineTopkSwaRef, GeneratedRowsHaveThreeDisjointRegions) {
  for (OpCase& c : casesFor("combine_topk_swa", 21, false)) {
    TensorMap m = c.inputs;
    ASSERT_EQ(runError(c.op, c.attrs, m), "") << c.name;
    const int64_t M = c.attrs.getInt("M", 0), N = c.attrs.getInt("N", 0), K = c.attrs.getInt("topk", 0);
    const int64_t window = c.attrs.getInt("window", 0), ratio = c.attrs.getInt("ratio", 0);
    const HostTensor& rows = m["rows"];
    const int64_t W = rows.dim(1);
    const int32_t* q = c.inputs["query_start_loc"].ptr<int32_t>();
    const int32_t* seq = c.inputs["seq_lens"].ptr<int32_t>();
    const int64_t R = c.inputs["seq_lens"].dim(0);
    for (int64_t b = 0; b < R; ++b) {
      for (int64_t t = q[b] - q[0]; t < q[b + 1] - q[0]; ++t) {
        const int64_t pos = seq[b] - (q[b + 1] - q[b]) + (t - (q[b] - q[0]));
        const int64_t topkLen = ratio ? std::min((pos + 1) / ratio, K) : 0;
        const int64_t swaLen = std::min(pos + 1, window);
        const int32_t* row = rows.ptr<int32_t>() + t * W;
        ASSERT_EQ(m["lens"].ptr<int32_t>()[t], topkLen + swaLen) << c.name << " token " << t;
        for (int64_t k = 0; k < topkLen; ++k) {
          const int32_t v = row[k], src = c.inputs["topk_indices"].ptr<int32_t>()[t * K + k];
          ASSERT_EQ(v, (src < 0 || src >= N) ? -1 : int32_t(src + M * b))
              << c.name << " token " << t << " entry " << k;
        }
        for (int64_t k = topkLen; k < topkLen + swaLen; ++k) {
          ASSERT_GE(row[k], M * b + N) << c.name;
          ASSERT_LT(row[k], M * (b + 1)) << c.name;
          if (k > topkLen) {
            ASSERT_EQ(row[k], row[k - 1] + 1) << c.name;
          }
        }
        for (int64_t k = topkLen + swaLen; k < W; ++k) ASSERT_EQ(row[k], -1) << c.name << " tail " << k;
      }
    }
  }
}

TEST(CombineTopkSwaRef, Errors) {
  auto base = [] {
    TensorMap m;
    m["topk_indices"] = i32Tensor({2, 2}, {0, 1, 2, 3});
    m["query_start_loc"] = i32Tensor({2}, {4, 6});
    m["seq_lens"] = i32Tensor({1}, {10});
    m["gather_lens"] = i32Tensor({1}, {4});
    return m;
  };
  const OpAttrs a = attrs(3, 2, 2, 16, 8);
  TensorMap m = base();
  EXPECT_EQ(runError("combine_topk_swa", a, m), "");
  m = base();
  m["query_start_loc"] = i32Tensor({2}, {4, 7});
  EXPECT_EQ(
      runError("combine_topk_swa", a, m),
      "combine_topk_swa: query_start_loc[1] - query_start_loc[0] = 7 - 4 but 'topk_indices' has T = 2 rows");
  m = base();
  m["gather_lens"] = i32Tensor({1}, {3});
  EXPECT_EQ(runError("combine_topk_swa", a, m),
            "combine_topk_swa: gather_lens[0] = 3 starts the gathered window at position 7, but request 0's "
            "first query token needs positions from 6");
  m = base();
  EXPECT_EQ(runError("combine_topk_swa", attrs(3, 2, 3, 16, 8), m),
            "combine_topk_swa: tensor 'topk_indices' has shape [2, 2], expected [T, topk=3]");
  m = base();
  EXPECT_EQ(runError("combine_topk_swa", attrs(3, 2, 2, 11, 8), m),
            "combine_topk_swa: N + gather_lens[0] = 8 + 4 exceeds M = 11");
  m = base();
  OpAttrs noWindow;
  noWindow.setInt("ratio", 2);
  noWindow.setInt("topk", 2);
  noWindow.setInt("M", 16);
  noWindow.setInt("N", 8);
  EXPECT_EQ(runError("combine_topk_swa", noWindow, m),
            "combine_topk_swa: missing required attribute 'window'");
}

}  // namespace
}  // namespace deepinfer::testing
