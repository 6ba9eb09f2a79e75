#include "CpuForwardThreads.h"

#include <algorithm>

namespace deepinfer {
namespace {
thread_local bool tInsideJob = false;
}

CpuThreadPool::CpuThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

CpuThreadPool::~CpuThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

// Hands out chunks until the job is exhausted. Called with mu_ unlocked.
void CpuThreadPool::runChunks() {
  for (;;) {
    int64_t b, e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (nextBegin_ >= jobSize_) return;
      b = nextBegin_;
      e = std::min(jobSize_, b + chunk_);
      nextBegin_ = e;
    }
    tInsideJob = true;
    (*job_)(b, e);
    tInsideJob = false;
  }
}

void CpuThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++busy_;
    }
    runChunks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
    done_.notify_all();
  }
}

void CpuThreadPool::parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || tInsideJob) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    jobSize_ = n;
    // A few chunks per thread balance uneven work without much locking.
    chunk_ = std::max<int64_t>(1, n / (int64_t(threads()) * 4));
    nextBegin_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  runChunks();
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return busy_ == 0 && nextBegin_ >= jobSize_; });
  job_ = nullptr;
}

}  // namespace deepinfer
