// The rendezvous of the tensor ranks' collectives (TpCollective.h): a round collects one call per
// rank; the last one in checks that they agree and enqueues the collective for all of them.
#include "model/parallel/TpCollective.h"

#include <fmt/format.h>

#include <chrono>

namespace deepinfer {

const char* tpOpName(TpOp op) { return op == TpOp::AllReduceSum ? "all-reduce" : "all-gather"; }

TpCollective::TpCollective(int ranks, double timeoutSeconds)
    : ranks_(ranks), timeout_(timeoutSeconds), calls_(size_t(std::max(ranks, 0))), arrived_(size_t(std::max(ranks, 0)), 0) {}

Status TpCollective::allReduceSum(int rank, uint64_t send, uint64_t recv, size_t count, DType dtype, void* stream) {
  return arrive(rank, TpOp::AllReduceSum, TpCall{send, recv, stream}, count, dtype);
}

Status TpCollective::allGather(int rank, uint64_t send, uint64_t recv, size_t count, DType dtype, void* stream) {
  return arrive(rank, TpOp::AllGather, TpCall{send, recv, stream}, count, dtype);
}

void TpCollective::fail(int rank, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.empty()) failed_ = fmt::format("tensor rank {} failed: {}", rank, why);
  cv_.notify_all();
}

void TpCollective::injectFailure(int rank, int64_t afterCollectives, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  injectRank_ = rank;
  injectAfter_ = afterCollectives;
  injectWhy_ = why;
}

Status TpCollective::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.empty()) return {};
  return Error{failed_};
}

int64_t TpCollective::collectives() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

Status TpCollective::arrive(int rank, TpOp op, const TpCall& call, size_t count, DType dtype) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::string what = fmt::format("{} of {} {} elements", tpOpName(op), count, dtypeName(dtype));
  if (rank < 0 || rank >= ranks_) return Error{fmt::format("{}: rank {} outside [0, {})", what, rank, ranks_)};
  if (dtype != DType::F32 && dtype != DType::BF16)
    return Error{fmt::format("{} (rank {}): only F32 and BF16 are summed or gathered", what, rank)};
  if (!failed_.empty()) return Error{fmt::format("{} (rank {}): {}", what, rank, failed_)};
  if (rank == injectRank_ && generation_ == injectAfter_) {
    failed_ = fmt::format("tensor rank {} failed: {}", rank, injectWhy_);
    cv_.notify_all();
    return Error{fmt::format("{} (rank {}): {}", what, rank, failed_)};
  }
  if (arrived_[size_t(rank)]) {
    failed_ = fmt::format("{}: rank {} called twice in one collective", what, rank);
    cv_.notify_all();
    return Error{failed_};
  }
  if (arrivedCount_ == 0) {
    op_ = op;
    count_ = count;
    dtype_ = dtype;
  } else if (op != op_ || count != count_ || dtype != dtype_) {
    failed_ = fmt::format("tensor ranks disagree: rank {} calls {}, an earlier rank {} of {} {} elements", rank, what,
                          tpOpName(op_), count_, dtypeName(dtype_));
    cv_.notify_all();
    return Error{failed_};
  }
  calls_[size_t(rank)] = call;
  arrived_[size_t(rank)] = 1;
  const int64_t gen = generation_;
  if (++arrivedCount_ == ranks_) {
    // The last rank in: the collective of every rank, in rank order, from this one thread.
    result_ = enqueue(op_, calls_, count_, dtype_, rank);
    if (!result_.ok() && failed_.empty()) failed_ = fmt::format("{}: {}", what, result_.error().message);
    std::fill(arrived_.begin(), arrived_.end(), 0);
    arrivedCount_ = 0;
    ++generation_;
    cv_.notify_all();
    return result_;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
  while (generation_ == gen && failed_.empty())
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && generation_ == gen && failed_.empty()) {
      std::string missing;
      for (int r = 0; r < ranks_; ++r)
        if (!arrived_[size_t(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      failed_ = fmt::format("{}: tensor rank(s) {} did not reach collective {} within {} s", what, missing, gen,
                            timeout_);
      cv_.notify_all();
    }
  if (generation_ != gen) return result_;
  return Error{fmt::format("{} (rank {}): {}", what, rank, failed_)};
}

}  // namespace deepinfer
