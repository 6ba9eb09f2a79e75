#include "SimtEmu.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

namespace di_emu {
namespace {

constexpr size_t kStackBytes = 96 * 1024;
constexpr size_t kCanaryBytes = 256;

struct Copy {
  uint8_t* dst;
  const uint8_t* src;
  int cpBytes, srcBytes;
};

enum class Wait { None, Cta, Warp };

struct Thread {
  ucontext_t ctx{};
  Dim3 tid;
  int linear = 0;
  bool finished = false;
  Wait waiting = Wait::None;
  std::vector<Copy> pending;
  std::deque<std::vector<Copy>> groups;
};

struct Warp {
  int arrived = 0;
  uint32_t slot[32][8] = {};
};

struct Cta {
  Dim3 grid, block, bid;
  std::vector<uint8_t> smem;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  int ctaArrived = 0, finished = 0;
  Thread* cur = nullptr;
  ucontext_t sched{};
  const std::function<void()>* kernel = nullptr;
};

Cta* g = nullptr;  // the running CTA (one at a time, on the calling thread)
std::vector<std::unique_ptr<char[]>> stacks;

Thread& self() { return *g->cur; }
int lane() { return self().linear & 31; }
Warp& warp() { return g->warps[size_t(self().linear >> 5)]; }

void block(Wait w) {
  self().waiting = w;
  swapcontext(&self().ctx, &g->sched);
}

void releaseCtaIfComplete() {
  if (g->ctaArrived == 0 || g->ctaArrived + g->finished < int(g->threads.size())) return;
  for (Thread& t : g->threads)
    if (t.waiting == Wait::Cta) t.waiting = Wait::None;
  g->ctaArrived = 0;
}

// All 32 lanes of the warp arrive before any leaves.
void warpBarrier() {
  Warp& w = warp();
  if (++w.arrived == 32) {
    w.arrived = 0;
    const int base = self().linear & ~31;
    for (int l = 0; l < 32; ++l)
      if (g->threads[size_t(base + l)].waiting == Wait::Warp) g->threads[size_t(base + l)].waiting = Wait::None;
    return;
  }
  block(Wait::Warp);
}

// Each lane deposits `n` words, then reads what it needs; a second barrier keeps the slots
// until every lane has read them.
template <class F>
auto exchange(const uint32_t* in, int n, F&& read) {
  for (int i = 0; i < n; ++i) warp().slot[lane()][i] = in[i];
  warpBarrier();
  auto r = read(warp().slot);
  warpBarrier();
  return r;
}

void entry() {
  (*g->kernel)();
  Thread& t = self();
  t.finished = true;
  ++g->finished;
  releaseCtaIfComplete();
}

float bf16f(uint32_t h) {
  const uint32_t u = (h & 0xFFFFu) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t doubleToBf16(double d) {
  if (std::isnan(d)) return 0x7FC0;
  float f = float(d);
  if (std::isfinite(f) && double(f) != d) {  // round to odd, then to nearest even below
    if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.f);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= 1u;
    std::memcpy(&f, &u, 4);
  }
  return f32_to_bf16(f);
}

}  // namespace

void launch(Dim3 grid, Dim3 block, size_t smemBytes, const std::function<void()>& kernel, uint64_t ctaOrderSeed) {
  const size_t n = size_t(block.x) * block.y * block.z;
  if (n == 0 || n % 32 != 0) throw std::runtime_error("emulator: the CTA size must be a positive multiple of 32");
  while (stacks.size() < n) stacks.emplace_back(new char[kStackBytes]);
  std::vector<Dim3> order;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) order.push_back({bx, by, bz});
  if (ctaOrderSeed != 0) {
    std::mt19937_64 rng(ctaOrderSeed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  for (const Dim3& at : order) {
    const unsigned bx = at.x, by = at.y, bz = at.z;
    Cta cta;
    cta.grid = grid;
    cta.block = block;
    cta.bid = {bx, by, bz};
    cta.smem.assign(smemBytes + kCanaryBytes, 0xA5);  // garbage until written; a canary past the end
    cta.threads.resize(n);
    cta.warps.resize(n / 32);
    cta.kernel = &kernel;
    g = &cta;
    for (size_t i = 0; i < n; ++i) {
      Thread& t = cta.threads[i];
      t.linear = int(i);
      t.tid = {unsigned(i % block.x), unsigned((i / block.x) % block.y), unsigned(i / (size_t(block.x) * block.y))};
      getcontext(&t.ctx);
      t.ctx.uc_stack.ss_sp = stacks[i].get();
      t.ctx.uc_stack.ss_size = kStackBytes;
      t.ctx.uc_link = &cta.sched;
      makecontext(&t.ctx, entry, 0);
    }
    while (cta.finished < int(n)) {
      bool ran = false;
      for (Thread& t : cta.threads) {
        if (t.finished || t.waiting != Wait::None) continue;
        cta.cur = &t;
        swapcontext(&cta.sched, &t.ctx);
        ran = true;
      }
      if (!ran) {
        g = nullptr;
        throw std::runtime_error("emulator: deadlock (threads wait at different barriers) in CTA (" +
                                 std::to_string(bx) + ", " + std::to_string(by) + ", " + std::to_string(bz) + ")");
      }
    }
    g = nullptr;
    for (size_t i = smemBytes; i < smemBytes + kCanaryBytes; ++i)
      if (cta.smem[i] != 0xA5)
        throw std::runtime_error("emulator: a thread wrote past the " + std::to_string(smemBytes) +
                                 " bytes of dynamic shared memory");
  }
}

const Dim3& threadIdx() { return self().tid; }
const Dim3& blockIdx() { return g->bid; }
const Dim3& blockDim() { return g->block; }
const Dim3& gridDim() { return g->grid; }
uint8_t* dynamic_smem() { return g->smem.data(); }

void syncthreads() {
  ++g->ctaArrived;
  if (g->ctaArrived + g->finished == int(g->threads.size())) {
    releaseCtaIfComplete();
    return;
  }
  block(Wait::Cta);
}

void syncwarp() { warpBarrier(); }

uint32_t shfl_up(uint32_t v, int delta) {
  const int l = lane();
  return exchange(&v, 1, [&](const uint32_t (*s)[8]) { return l >= delta ? s[l - delta][0] : v; });
}

uint32_t shfl_xor(uint32_t v, int mask) {
  const int l = lane();
  return exchange(&v, 1, [&](const uint32_t (*s)[8]) { return s[(l ^ mask) & 31][0]; });
}

uint32_t match_any(uint32_t key) {
  return exchange(&key, 1, [&](const uint32_t (*s)[8]) {
    uint32_t m = 0;
    for (int l = 0; l < 32; ++l)
      if (s[l][0] == key) m |= 1u << l;
    return m;
  });
}

uint32_t shfl_idx(uint32_t v, int srcLane) {
  return exchange(&v, 1, [&](const uint32_t (*s)[8]) { return s[srcLane & 31][0]; });
}

uint32_t reduce_add(uint32_t v) {
  return exchange(&v, 1, [&](const uint32_t (*s)[8]) {
    uint32_t sum = 0;
    for (int l = 0; l < 32; ++l) sum += s[l][0];
    return sum;
  });
}

uint32_t ballot(bool pred) {
  const uint32_t v = pred ? 1u : 0u;
  return exchange(&v, 1, [&](const uint32_t (*s)[8]) {
    uint32_t m = 0;
    for (int l = 0; l < 32; ++l) m |= s[l][0] << l;
    return m;
  });
}

void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  const uint32_t in[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
  const int l = lane(), gr = l >> 2, t = l & 3;
  float out[4];
  exchange(in, 6, [&](const uint32_t (*s)[8]) {
    // A[r][k]: lane (r % 8) * 4 + (k % 8) / 2, register (r >= 8) + 2 (k >= 8), half k & 1.
    auto A = [&](int r, int k) {
      const uint32_t w = s[(r % 8) * 4 + (k % 8) / 2][(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)];
      return bf16f((k & 1) ? w >> 16 : w);
    };
    // B[k][n]: lane n * 4 + (k % 8) / 2, register 4 + (k >= 8), half k & 1.
    auto B = [&](int k, int n) {
      const uint32_t w = s[n * 4 + (k % 8) / 2][4 + (k >= 8 ? 1 : 0)];
      return bf16f((k & 1) ? w >> 16 : w);
    };
    for (int i = 0; i < 4; ++i) {
      const int r = gr + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
      float acc = c[i];
      for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
      out[i] = acc;
    }
    return 0;
  });
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}

void ldmatrix(uint32_t* r, int count, const void* rowAddr, bool trans) {
  const uint64_t a = reinterpret_cast<uint64_t>(rowAddr);
  const uint32_t in[2] = {uint32_t(a), uint32_t(a >> 32)};
  const int l = lane();
  uint32_t out[4] = {};
  exchange(in, 2, [&](const uint32_t (*s)[8]) {
    // Row `src` of the exchange. A row inside the dynamic shared memory must lie wholly before its
    // canary; static __shared__ arrays (host statics here) are checked for alignment only. A fiber
    // cannot throw across its context switch, so a bad address ends the test run.
    auto rowOf = [&](int src) {
      const uint64_t row = uint64_t(s[src][0]) | (uint64_t(s[src][1]) << 32);
      const uint64_t base = reinterpret_cast<uint64_t>(g->smem.data()), end = base + g->smem.size();
      const bool dynamic = row >= base && row < end;
      if (row % 16 != 0 || (dynamic && row + 16 > end - kCanaryBytes)) {
        std::fprintf(stderr, "emulator: ldmatrix row address %#llx is not an aligned 16-byte row of shared memory\n",
                     static_cast<unsigned long long>(row));
        std::abort();
      }
      return reinterpret_cast<const uint8_t*>(row);
    };
    for (int i = 0; i < count; ++i) {
      if (!trans) {
        std::memcpy(&out[i], rowOf(i * 8 + l / 4) + 4 * (l % 4), 4);
        continue;
      }
      uint16_t lo, hi;
      std::memcpy(&lo, rowOf(i * 8 + 2 * (l % 4)) + 2 * (l / 4), 2);
      std::memcpy(&hi, rowOf(i * 8 + 2 * (l % 4) + 1) + 2 * (l / 4), 2);
      out[i] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
    return 0;
  });
  for (int i = 0; i < count; ++i) r[i] = out[i];
}

void cp_async(void* dst, const void* src, int cpBytes, int srcBytes) {
  self().pending.push_back({static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), cpBytes, srcBytes});
}

void cp_async_commit() {
  Thread& t = self();
  t.groups.push_back(std::move(t.pending));
  t.pending.clear();
}

void cp_async_wait(int pendingGroups) {
  Thread& t = self();
  while (int(t.groups.size()) > pendingGroups) {
    for (const Copy& c : t.groups.front()) {
      std::memcpy(c.dst, c.src, size_t(c.srcBytes));
      std::memset(c.dst + c.srcBytes, 0, size_t(c.cpBytes - c.srcBytes));
    }
    t.groups.pop_front();
  }
}

uint32_t bf16x2_mul(uint32_t v, uint32_t f) {
  const uint32_t lo = doubleToBf16(double(bf16f(v)) * double(bf16f(f)));
  const uint32_t hi = doubleToBf16(double(bf16f(v >> 16)) * double(bf16f(f >> 16)));
  return lo | (hi << 16);
}

uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

}  // namespace di_emu
