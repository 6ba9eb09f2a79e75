// indexer_logits reference (docs/ops.md §7): hand-worked scores through the block table and
// token_to_req, -inf at and past visible[t], and input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "RefTestUtil.h"

namespace deepinfer::testing {
namespace {

constexpr int64_t kBs = 2, kPageBytes = kBs * 132;

// Sets key (page, offset): e4m3 codes of dims 0 and 1 (other dims stay code 0) and its scale.
void setKey(HostTensor& cache, int64_t page, int64_t off, uint8_t c0, uint8_t c1, float scale) {
  uint8_t* p = cache.ptr<uint8_t>() + page * kPageBytes;
  p[off * 128] = c0;
  p[off * 128 + 1] = c1;
  std::memcpy(p + kBs * 128 + off * 4, &scale, 4);
}

TEST(IndexerLogitsRef, HandWorkedScores) {
  HostTensor cache(DType::U8, {2, kPageBytes});
  setKey(cache, 1, 0, 0x38, 0x40, 0.5f);   // request 0 position 0: k = (1, 2), scale 0.5
  setKey(cache, 1, 1, 0xB8, 0x38, 2.f);    // position 1: (-1, 1), scale 2
  setKey(cache, 0, 0, 0x48, 0xC0, 0.25f);  // position 2 (and request 1's position 0): (4, -2)
  setKey(cache, 0, 1, 0x7E, 0x7E, 1.f);    // position 3: never visible
  // Heads: q0 = (1, 1), q1 = (0.5, -1); weights (2, -0.5).
  std::vector<float> q(3 * 2 * 128, 0.f);
  for (int t = 0; t < 3; ++t) {
    q[t * 256 + 0] = 1.f, q[t * 256 + 1] = 1.f;
    q[t * 256 + 128] = 0.5f, q[t * 256 + 129] = -1.f;
  }
  TensorMap m;
  m["q"] = bf16Of({3, 2, 128}, q);
  m["weights"] = f32Of({3, 2}, {2.f, -0.5f, 2.f, -0.5f, 2.f, -0.5f});
  m["k_cache"] = std::move(cache);
  m["block_table"] = i32Tensor({2, 2}, {1, 0, /**/ 0, -1});
  m["token_to_req"] = i32Tensor({3}, {0, 1, 1});
  m["visible"] = i32Tensor({3}, {3, 1, 0});
  OpAttrs a;
  a.setInt("block_size", kBs);
  ASSERT_EQ(runError("indexer_logits", a, m), "");

  // position 0: 2*relu(3) - 0.5*relu(-1.5) = 6, times 0.5 -> 3
  // position 1: 2*relu(0) - 0.5*relu(-1.5) = 0
  // position 2: 2*relu(2) - 0.5*relu(4) = 2, times 0.25 -> 0.5
  const float ninf = -INFINITY;
  const std::vector<float> want = {3.f,  0.f,  0.5f,      ninf, /**/ 0.5f, ninf,
                                   ninf, ninf, /**/ ninf, ninf, ninf,      ninf};
  ASSERT_EQ(m["scores"].shape, (std::vector<int64_t>{3, 4}));  // Nmax = max_pages * block_size
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(m["scores"].ptr<float>()[i], want[i]) << "score " << i;
}

TEST(IndexerLogitsRef, Errors) {
  Rng rng(9);
  auto base = [&] {
    TensorMap m;
    m["q"] = bf16Normal(rng, {2, 4, 128});
    m["weights"] = f32Normal(rng, {2, 4});
    m["k_cache"] = indexerKeyCache(rng, 3, kBs);
    m["block_table"] = i32Tensor({1, 3}, {2, 0, -1});
    m["token_to_req"] = i32Tensor({2}, {0, 0});
    m["visible"] = i32Tensor({2}, {4, 1});
    return m;
  };
  OpAttrs a;
  a.setInt("block_size", kBs);
  TensorMap m = base();
  EXPECT_EQ(runError("indexer_logits", a, m), "");
  m = base();
  m["visible"] = i32Tensor({2}, {5, 1});
  EXPECT_EQ(runError("indexer_logits", a, m),
            "indexer_logits: block_table[0, 2] = -1 is not a page of 'k_cache' (P = 3); token 0 reads it");
  m = base();
  m["visible"] = i32Tensor({2}, {7, 1});
  EXPECT_EQ(runError("indexer_logits", a, m),
            "indexer_logits: visible[0] = 7 is outside [0, Nmax = max_pages*block_size = 6]");
  m = base();
  m["token_to_req"] = i32Tensor({2}, {0, 1});
  EXPECT_EQ(runError("indexer_logits", a, m),
            "indexer_logits: token_to_req[1] = 1 is not a row of 'block_table' (R = 1)");
  m = base();
  m["weights"] = f32Normal(rng, {2, 3});
  EXPECT_EQ(runError("indexer_logits", a, m),
            "indexer_logits: tensor 'weights' has shape [2, 3], expected [T=2, Hi=4]");
  m = base();
  m["k_cache"] = indexerKeyCache(rng, 3, 4);
  EXPECT_EQ(
      runError("indexer_logits", a, m),
      "indexer_logits: tensor 'k_cache' has shape [3, 528], expected [P, block_size*132 (block_size=2)=264]");
}

}  // namespace
}  // namespace deepinfer::testing
