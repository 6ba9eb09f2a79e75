// The tensor ranks' rendezvous (runtime/model/parallel/TpCollective.h) with a host backend:
// however the rank threads arrive, the backend sees one call per collective with the ranks in
// rank order, and a host sum in that order is bit-exact with ((a0 + a1) + a2) + a3; ranks that
// disagree, fail or never arrive turn every rank's call into an error naming the cause, within
// the timeout (no hang).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "model/parallel/RankPool.h"
#include "model/parallel/TpCollective.h"

namespace deepinfer {
namespace {

// Buffers are host float arrays (their addresses as uint64_t); the sum runs in rank order.
class HostCollective : public TpCollective {
 public:
  HostCollective(int ranks, double timeout) : TpCollective(ranks, timeout) {}
  std::string backend() const override { return "host"; }
  Status finish(const std::vector<void*>&) override { return failure(); }
  std::vector<std::vector<uint64_t>> seenSends;  // per collective, the sends in the order given

 protected:
  Status enqueue(TpOp op, const std::vector<TpCall>& calls, size_t count, DType dtype, int) override {
    if (dtype != DType::F32) return Error{"host collective: F32 only"};
    std::vector<uint64_t> sends;
    for (const TpCall& c : calls) sends.push_back(c.send);
    seenSends.push_back(sends);
    auto at = [](uint64_t a) { return reinterpret_cast<float*>(static_cast<uintptr_t>(a)); };
    if (op == TpOp::AllReduceSum) {
      std::vector<float> acc(at(calls[0].send), at(calls[0].send) + count);
      for (size_t r = 1; r < calls.size(); ++r)
        for (size_t i = 0; i < count; ++i) acc[i] += at(calls[r].send)[i];
      for (const TpCall& c : calls) std::memcpy(at(c.recv), acc.data(), count * 4);
    } else {
      std::vector<float> all;
      for (const TpCall& c : calls) all.insert(all.end(), at(c.send), at(c.send) + count);
      for (const TpCall& c : calls) std::memcpy(at(c.recv), all.data(), all.size() * 4);
    }
    return {};
  }
};

uint64_t addr(const float* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }

TEST(TpCollective, SumsInRankOrderWhateverOrderTheRanksArrive) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 1000;
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<float> big(-1e4f, 1e4f), small(-1e-3f, 1e-3f);
  for (int round = 0; round < 8; ++round) {
    HostCollective c(kRanks, 30);
    // Mixed magnitudes, so that another summation order would round differently somewhere.
    std::vector<std::vector<float>> send(kRanks, std::vector<float>(kCount)), recv(kRanks, std::vector<float>(kCount, -7.f));
    for (int r = 0; r < kRanks; ++r)
      for (float& v : send[size_t(r)]) v = (r % 2 ? small : big)(rng);
    std::vector<int> delayUs(kRanks);
    for (int& d : delayUs) d = int(rng() % 3000);
    std::vector<Status> st(kRanks);
    std::vector<std::thread> th;
    for (int r = 0; r < kRanks; ++r)
      th.emplace_back([&, r] {
        std::this_thread::sleep_for(std::chrono::microseconds(delayUs[size_t(r)]));
        st[size_t(r)] = c.allReduceSum(r, addr(send[size_t(r)].data()), addr(recv[size_t(r)].data()), kCount,
                                       DType::F32, nullptr);
      });
    for (auto& t : th) t.join();
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << st[size_t(r)].error().message;
    ASSERT_EQ(c.seenSends.size(), 1u);
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(c.seenSends[0][size_t(r)], addr(send[size_t(r)].data()));
    for (size_t i = 0; i < kCount; ++i) {
      const float want = ((send[0][i] + send[1][i]) + send[2][i]) + send[3][i];
      for (int r = 0; r < kRanks; ++r)
        ASSERT_EQ(std::memcmp(&recv[size_t(r)][i], &want, 4), 0) << "rank " << r << " element " << i;
    }
    EXPECT_EQ(c.collectives(), 1);
  }
}

TEST(TpCollective, ManyCollectivesInARowAndAllGatherKeepRankOrder) {
  constexpr int kRanks = 3;
  HostCollective c(kRanks, 30);
  std::vector<std::vector<float>> send(kRanks), recv(kRanks, std::vector<float>(kRanks * 2));
  for (int r = 0; r < kRanks; ++r) send[size_t(r)] = {float(r), float(10 + r)};
  std::vector<Status> st(kRanks);
  std::vector<std::thread> th;
  for (int r = 0; r < kRanks; ++r)
    th.emplace_back([&, r] {
      for (int i = 0; i < 50 && st[size_t(r)].ok(); ++i)
        st[size_t(r)] = c.allGather(r, addr(send[size_t(r)].data()), addr(recv[size_t(r)].data()), 2, DType::F32, nullptr);
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(st[size_t(r)].ok()) << st[size_t(r)].error().message;
  EXPECT_EQ(c.collectives(), 50);
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(recv[size_t(r)], (std::vector<float>{0, 10, 1, 11, 2, 12})) << "rank " << r;
}

TEST(TpCollective, RanksThatDisagreeAreAnErrorForEveryRank) {
  HostCollective c(2, 30);
  float a[4] = {}, b[4] = {};
  Status s0, s1;
  std::thread t0([&] { s0 = c.allReduceSum(0, addr(a), addr(a), 4, DType::F32, nullptr); });
  std::thread t1([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s1 = c.allReduceSum(1, addr(b), addr(b), 3, DType::F32, nullptr);
  });
  t0.join();
  t1.join();
  ASSERT_FALSE(s0.ok());
  ASSERT_FALSE(s1.ok());
  EXPECT_NE(s1.error().message.find("tensor ranks disagree"), std::string::npos) << s1.error().message;
  EXPECT_NE(s0.error().message.find("tensor ranks disagree"), std::string::npos) << s0.error().message;
  // The collective stays failed.
  EXPECT_FALSE(c.allReduceSum(0, addr(a), addr(a), 4, DType::F32, nullptr).ok());
}

TEST(TpCollective, AFailedRankWakesTheOthersWithAnErrorNamingIt) {
  HostCollective c(3, 60);
  float a[4] = {};
  std::vector<Status> st(2);
  std::vector<std::thread> th;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r)
    th.emplace_back([&, r] { st[size_t(r)] = c.allReduceSum(r, addr(a), addr(a), 4, DType::F32, nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c.fail(2, "injected error in the attention of layer 3");
  for (auto& t : th) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 10.0);  // woken by the failure, not by the 60 s timeout
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[size_t(r)].ok());
    EXPECT_NE(st[size_t(r)].error().message.find("tensor rank 2 failed: injected error in the attention of layer 3"),
              std::string::npos)
        << st[size_t(r)].error().message;
  }
  EXPECT_EQ(c.collectives(), 0);
}

TEST(TpCollective, AnInjectedFailureStopsItsRankAtThatCollectiveAndWakesTheOthers) {
  // Three ranks on a RankPool (as the forward pass runs them), three collectives each; rank 1
  // fails on arriving at collective 2, after the first two completed for everyone.
  HostCollective c(3, 60);
  c.injectFailure(1, 2, "injected failure of tensor rank 1");
  RankPool pool(3);
  std::vector<int> done(3, 0);
  const auto start = std::chrono::steady_clock::now();
  auto st = pool.run([&](int r) -> Status {
    float a[4] = {1, 2, 3, 4};
    for (int k = 0; k < 3; ++k) {
      // Rank 1 comes late to collective 2: the others are already waiting in it.
      if (r == 1 && k == 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      DI_TRY(c.allReduceSum(r, addr(a), addr(a), 4, DType::F32, nullptr));
      ++done[size_t(r)];
    }
    return {};
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_EQ(c.collectives(), 2);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(done[size_t(r)], 2) << "rank " << r;
    ASSERT_FALSE(st[size_t(r)].ok()) << "rank " << r;
    EXPECT_NE(st[size_t(r)].error().message.find("tensor rank 1 failed: injected failure of tensor rank 1"),
              std::string::npos)
        << st[size_t(r)].error().message;
  }
  // It stays failed, and finish() reports it.
  EXPECT_FALSE(c.finish({}).ok());
}

TEST(TpCollective, ARankThatNeverArrivesIsATimeoutErrorNamingIt) {
  HostCollective c(3, 0.2);
  float a[4] = {};
  std::vector<Status> st(2);
  std::vector<std::thread> th;
  for (int r : {0, 2})
    th.emplace_back([&, r] { st[size_t(r / 2)] = c.allReduceSum(r, addr(a), addr(a), 4, DType::F32, nullptr); });
  for (auto& t : th) t.join();
  for (const Status& s : st) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("tensor rank(s) 1 did not reach collective 0 within 0.2 s"), std::string::npos)
        << s.error().message;
  }
  EXPECT_FALSE(c.finish({}).ok());
}

TEST(TpCollective, BadCallsAreClearErrors) {
  HostCollective c(2, 1);
  float a[4] = {};
  Status st = c.allReduceSum(2, addr(a), addr(a), 4, DType::F32, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("rank 2 outside [0, 2)"), std::string::npos) << st.error().message;
  st = c.allReduceSum(0, addr(a), addr(a), 4, DType::I32, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("only F32 and BF16"), std::string::npos) << st.error().message;
  // One rank of one: the backend runs at once.
  HostCollective one(1, 1);
  float x[2] = {1.5f, -2.f}, y[2] = {};
  ASSERT_TRUE(one.allReduceSum(0, addr(x), addr(y), 2, DType::F32, nullptr).ok());
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -2.f);
}

}  // namespace
}  // namespace deepinfer
