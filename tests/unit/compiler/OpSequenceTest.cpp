// fuseOpSequence (deepinfer/OpSequence.h): a sequence of ops over shared buffers goes through the
// fusion passes as IR, and what comes back is what the runtime runs. The prefill prologue of
// attendPrefill (the compressed gather, the window gather, the index rows) becomes the compressed
// gather and one gather_kcache_combine, on the same buffers; any other arrangement is left as is.
#include <gtest/gtest.h>

#include "deepinfer/OpSequence.h"

namespace deepinfer {
namespace {

// Buffers of a small prefill: R = 2 requests, T = 4 tokens, K = 8, window 4, N = 32, M = 40.
enum Buf { kCompCache, kWinCache, kCompLens, kCompTable, kWinTable, kWs, kQsl, kEnds, kGathered, kTopk, kRows,
           kLens, kOtherEnds, kCount };

OpSequence buffers() {
  OpSequence s;
  s.buffers.resize(kCount);
  s.buffers[kCompCache] = {8, 1728};
  s.buffers[kWinCache] = {8, 1728};
  s.buffers[kCompLens] = {2};
  s.buffers[kCompTable] = {2, 4};
  s.buffers[kWinTable] = {2, 4};
  s.buffers[kWs] = {2, 40, 512};
  s.buffers[kQsl] = {3};
  s.buffers[kEnds] = {2};
  s.buffers[kGathered] = {2};
  s.buffers[kTopk] = {4, 8};
  s.buffers[kRows] = {4, 128};
  s.buffers[kLens] = {4};
  s.buffers[kOtherEnds] = {2};
  return s;
}

SequenceOp gather(int cache, int seq, int gl, int table, int64_t offset) {
  SequenceOp g{"gather_kcache", {}, {}};
  g.attrs.setInt("block_size", 2);
  g.attrs.setInt("offset", offset);
  g.tensors = {{"k_cache", cache}, {"seq_lens", seq}, {"gather_lens", gl}, {"block_table", table}, {"out", kWs}};
  return g;
}

SequenceOp combine(int seq = kEnds) {
  SequenceOp c{"combine_topk_swa", {}, {}};
  for (auto [n, v] : {std::pair{"window", 4}, {"ratio", 2}, {"topk", 8}, {"M", 40}, {"N", 32}}) c.attrs.setInt(n, v);
  c.tensors = {{"topk_indices", kTopk}, {"query_start_loc", kQsl}, {"seq_lens", seq}, {"gather_lens", kGathered},
               {"rows", kRows}, {"lens", kLens}};
  return c;
}

std::vector<std::string> names(const OpSequence& s) {
  std::vector<std::string> n;
  for (const auto& op : s.ops) n.push_back(op.op);
  return n;
}

TEST(OpSequence, PrefillPrologueFusesTheWindowGatherAndTheRows) {
  OpSequence s = buffers();
  s.ops = {gather(kCompCache, kCompLens, kCompLens, kCompTable, 0), gather(kWinCache, kEnds, kGathered, kWinTable, 32),
           combine()};
  auto f = fuseOpSequence(s);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(names(*f), (std::vector<std::string>{"gather_kcache", "gather_kcache_combine"}));
  EXPECT_EQ(f->ops[0].tensors, s.ops[0].tensors);
  EXPECT_EQ(f->ops[0].attrs.getInt("offset", -1), 0);
  const SequenceOp& fused = f->ops[1];
  const std::map<std::string, int> want = {{"k_cache", kWinCache}, {"seq_lens", kEnds},  {"gather_lens", kGathered},
                                           {"block_table", kWinTable}, {"out", kWs},     {"topk_indices", kTopk},
                                           {"query_start_loc", kQsl},  {"rows", kRows}, {"lens", kLens}};
  EXPECT_EQ(fused.tensors, want);
  for (auto [n, v] : {std::pair{"block_size", 2}, {"window", 4}, {"ratio", 2}, {"topk", 8}, {"N", 32}})
    EXPECT_EQ(fused.attrs.getInt(n, -1), v) << n;
}

TEST(OpSequence, RowsBeforeTheGatherFuseToo) {
  OpSequence s = buffers();
  s.ops = {combine(), gather(kWinCache, kEnds, kGathered, kWinTable, 32)};
  auto f = fuseOpSequence(s);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(names(*f), (std::vector<std::string>{"gather_kcache_combine"}));
}

TEST(OpSequence, WithoutRowsOrOnOtherLengthsNothingFuses) {
  OpSequence s = buffers();
  s.ops = {gather(kCompCache, kCompLens, kCompLens, kCompTable, 0), gather(kWinCache, kEnds, kGathered, kWinTable, 32)};
  auto f = fuseOpSequence(s);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(names(*f), (std::vector<std::string>{"gather_kcache", "gather_kcache"}));
  EXPECT_EQ(f->ops[1].tensors, s.ops[1].tensors);

  // The same values in another buffer are not the same lengths to the IR.
  s.ops = {gather(kWinCache, kEnds, kGathered, kWinTable, 32), combine(kOtherEnds)};
  f = fuseOpSequence(s);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(names(*f), (std::vector<std::string>{"gather_kcache", "combine_topk_swa"}));
  EXPECT_EQ(f->ops[1].tensors, s.ops[1].tensors);
}

TEST(OpSequence, BadSequencesAreNamed) {
  OpSequence s = buffers();
  SequenceOp c = combine();
  c.tensors.erase("query_start_loc");
  s.ops = {c};
  auto f = fuseOpSequence(s);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("combine_topk_swa needs tensor 'query_start_loc'"), std::string::npos)
      << f.error().message;

  c = combine();
  c.tensors["rows"] = 99;
  s.ops = {c};
  f = fuseOpSequence(s);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("combine_topk_swa tensor 'rows' names buffer 99 of 13"), std::string::npos)
      << f.error().message;

  c = combine();
  c.tensors["rows"] = kLens;  // [4] for a [4, 128] output
  s.ops = {c};
  f = fuseOpSequence(s);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("output 'rows' has shape [4, 128]; its buffer is [4]"), std::string::npos)
      << f.error().message;

  s.ops = {SequenceOp{"not_an_op", {}, {}}};
  f = fuseOpSequence(s);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("no kernel family for op 'not_an_op'"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
