// The tensor ranks' persistent threads (RankPool.h).
#include "model/parallel/RankPool.h"

#include <exception>
#include <fmt/format.h>

namespace deepinfer {
namespace {

Status runGuarded(const std::function<Status(int)>& task, int rank) {
  try {
    return task(rank);
  } catch (const std::exception& e) {
    return Error{fmt::format("tensor rank {}: exception: {}", rank, e.what())};
  } catch (...) {
    return Error{fmt::format("tensor rank {}: unknown exception", rank)};
  }
}

}  // namespace

RankPool::RankPool(int ranks) : ranks_(std::max(ranks, 1)), results_(size_t(std::max(ranks, 1))) {
  for (int r = 1; r < ranks_; ++r) workers_.emplace_back([this, r] { worker(r); });
}

RankPool::~RankPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

std::vector<Status> RankPool::run(const std::function<Status(int)>& task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = &task;
    pending_ = ranks_ - 1;
    ++round_;
  }
  wake_.notify_all();
  Status own = runGuarded(task, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
  std::vector<Status> out = std::move(results_);
  results_.assign(size_t(ranks_), Status{});
  out[0] = std::move(own);
  ++calls_;
  return out;
}

void RankPool::worker(int rank) {
  int64_t served = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || round_ != served; });
    if (stop_) return;
    served = round_;
    const std::function<Status(int)>* task = task_;
    lock.unlock();
    Status st = runGuarded(*task, rank);
    lock.lock();
    results_[size_t(rank)] = std::move(st);
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace deepinfer
