#include "model/gpu/PagePool.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace deepinfer {

PagePool::PagePool(PageId numPages) {
  const PageId n = numPages > 0 ? numPages : 0;
  used_.assign(size_t(n), false);
  free_.resize(size_t(n));
  // Stack with page 0 on top, so a fresh pool hands out 0, 1, 2, ...
  for (PageId i = 0; i < n; ++i) free_[size_t(i)] = n - 1 - i;
}

Result<std::vector<PagePool::PageId>> PagePool::allocate(int64_t n) {
  if (n < 0) return Error{fmt::format("KV pages: cannot allocate {} pages", n)};
  if (n > freeCount())
    return Error{fmt::format("out of KV pages: need {}, {} free of {}", n, freeCount(), totalCount())};
  std::vector<PageId> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const PageId p = free_.back();
    free_.pop_back();
    used_[size_t(p)] = true;
    out[size_t(i)] = p;
  }
  highWater_ = std::max(highWater_, usedCount());
  return out;
}

Status PagePool::release(const std::vector<PageId>& pages) {
  // Validate everything first so that an error leaves the pool untouched; mark as we go to
  // catch an id listed twice, then undo the marks.
  std::vector<PageId> seen;
  seen.reserve(pages.size());
  Status st;
  for (PageId p : pages) {
    if (p < 0 || p >= totalCount()) {
      st = Error{fmt::format("KV page release: page {} is not in this pool of {} pages", p, totalCount())};
      break;
    }
    if (!used_[size_t(p)]) {
      const bool twice = std::find(seen.begin(), seen.end(), p) != seen.end();
      st = Error{twice ? fmt::format("KV page release: page {} is listed twice", p)
                       : fmt::format("KV page release: page {} is not allocated (double free)", p)};
      break;
    }
    used_[size_t(p)] = false;
    seen.push_back(p);
  }
  if (!st.ok()) {
    for (PageId p : seen) used_[size_t(p)] = true;
    return st;
  }
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) free_.push_back(*it);
  return {};
}

Result<DevicePagePool> DevicePagePool::create(int64_t numPages, int64_t pageBytes) {
  if (pageBytes <= 0 || numPages < 0 || numPages > std::numeric_limits<PagePool::PageId>::max())
    return Error{fmt::format("KV page pool: invalid size ({} pages of {} bytes)", numPages, pageBytes)};
  if (numPages > 0 && uint64_t(pageBytes) > std::numeric_limits<uint64_t>::max() / uint64_t(numPages))
    return Error{fmt::format("KV page pool: {} pages of {} bytes overflow", numPages, pageBytes)};
  auto buf = DeviceBuffer::alloc(size_t(numPages) * size_t(pageBytes));
  if (!buf.ok())
    return Error{fmt::format("KV page pool of {} pages x {} bytes: {}", numPages, pageBytes, buf.error().message)};
  DevicePagePool d;
  d.buffer_ = std::move(*buf);
  d.pool_ = PagePool(PagePool::PageId(numPages));
  d.pageBytes_ = pageBytes;
  return d;
}

}  // namespace deepinfer
