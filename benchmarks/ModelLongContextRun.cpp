#include "ModelLongContextRun.h"

#include <fmt/format.h>

#include "ModelBenchMeasure.h"
#include "ModelRoofline.h"

namespace deepinfer::bench {
namespace {

std::string ctxName(int64_t c) { return c % 1024 == 0 ? fmt::format("{}K", c / 1024) : fmt::format("{}", c); }

int64_t freeBytes(const Device& dev) {
  auto m = dev.memInfo();
  return m.ok() ? int64_t(m->first) : 0;
}

void printDecode(const LongDecode& d) {
  if (d.row.error.empty())
    fmt::print("decode at {}: {:.1f} tok/s ({:.2f} ms per step: {}; its prefill of {} tokens {:.1f} s)\n",
               ctxName(d.context), d.row.tokPerS(), d.row.stepMs(), launchesText(d.row.stepLaunches),
               d.prefillTokens, d.prefillSeconds);
  else
    fmt::print("decode at {}: ERROR {}\n", ctxName(d.context), d.row.error);
  std::fflush(stdout);
}

// A single-stream DecodeRow on `req`, whose prefill left `last` as its final logits row.
void decodeOn(GpuModel& model, int64_t req, const std::vector<float>& last, const ModelBenchOptions& opts,
              const Ceilings& ceil, LongDecode& d) {
  d.row.batched = true;
  d.row.streams = 1;
  d.row.prompt = d.prefillTokens;
  std::vector<int32_t> next{greedy(last.data(), model.config().vocabSize)};
  timeDecode(model, {req}, next, opts, ceil, d.row);
}

}  // namespace

void measureLongContext(GpuModel& model, const Device& dev, const ModelBenchOptions& opts, const Ceilings& ceil,
                        Clock::time_point runStart, std::mt19937_64& rng, LongContextReport& r) {
  const ModelConfig& cfg = model.config();
  const int64_t V = cfg.vocabSize, D = opts.decodeTokens();

  // Decode at the shorter contexts, each on a request of its own.
  for (int64_t c : opts.decodeContexts) {
    LongDecode d;
    d.context = c;
    d.prefillTokens = c - D;
    auto req = model.newRequest();
    if (!req.ok()) {
      d.row.error = req.error().message;
    } else {
      const int compiles = model.jitCompiles();
      const auto t0 = Clock::now();
      auto last = prefillChunks(model, *req, randomIds(rng, d.prefillTokens, V), opts.chunk, nullptr);
      d.prefillSeconds = secondsSince(t0);
      d.jitCompiles = model.jitCompiles() - compiles;
      if (last.ok()) decodeOn(model, *req, *last, opts, ceil, d);
      else d.row.error = last.error().message;
      if (Status s = model.releaseRequest(*req); !s.ok() && d.row.error.empty()) d.row.error = s.error().message;
    }
    printDecode(d);
    r.decode.push_back(std::move(d));
  }

  // The long request, chunk by chunk; a segment closes every opts.segment positions.
  r.promptTokens = r.context - D;
  auto req = model.newRequest();
  if (!req.ok()) {
    r.error = req.error().message;
    return;
  }
  const std::vector<int32_t> ids = randomIds(rng, r.promptTokens, V);
  const double chunkWeights = tokenWeightBytes(cfg, WeightStorage::Checkpoint, cfg.numExpertsPerTok).total();
  double flopsBefore = 0;  // prefillFlops of the positions before the open segment
  LongSegment seg;
  std::vector<float> last;
  int prefillCompiles = 0;
  auto closeSegment = [&] {
    seg.end = r.reached;
    const double flops = prefillFlops(cfg, seg.end).total();
    seg.floorSeconds = rooflineFloorUs(ceil, chunkWeights * seg.chunks, flops - flopsBefore) * 1e-6;
    flopsBefore = flops;
    fmt::print("long prefill {}..{}: {:.1f} s, {:.0f} tok/s, {} JIT compile(s), last chunk {}; {:.0f} s into the run\n",
               ctxName(seg.begin), ctxName(seg.end), seg.seconds, seg.tokPerS(), seg.jitCompiles,
               launchesText(seg.lastChunkLaunches), secondsSince(runStart));
    std::fflush(stdout);
    r.segments.push_back(seg);
    seg = LongSegment{};
    seg.begin = r.reached;
  };
  while (r.reached < r.promptTokens) {
    if (opts.timeBudget > 0 && secondsSince(runStart) > double(opts.timeBudget)) {
      r.stopped = true;
      break;
    }
    const int64_t len = std::min(opts.chunk, r.promptTokens - r.reached);
    const std::vector<int32_t> part(ids.begin() + r.reached, ids.begin() + r.reached + len);
    const int compiles = model.jitCompiles();
    const auto t0 = Clock::now();
    auto logits = model.prefill(*req, part, /*lastOnly=*/true);
    const double seconds = secondsSince(t0);
    if (!logits.ok()) {
      r.error = logits.error().message;
      break;
    }
    r.chunkMs.push_back(seconds * 1e3);
    r.prefillSeconds += seconds;
    seg.seconds += seconds;
    ++seg.chunks;
    seg.jitCompiles += model.jitCompiles() - compiles;
    prefillCompiles += model.jitCompiles() - compiles;
    seg.lastChunkLaunches = model.lastCallLaunches();
    r.reached += len;
    last.assign(logits->ptr<float>(), logits->ptr<float>() + V);  // the decode below starts from the latest
    if (r.reached % opts.segment == 0 || r.reached == r.promptTokens) closeSegment();
  }
  if (seg.chunks > 0) closeSegment();  // the part of a segment before a stop or a failure
  r.freeBytesAfterPrefill = freeBytes(dev);
  if (r.error.empty() && !r.stopped) {
    const auto t1 = Clock::now();
    (void)greedy(last.data(), V);
    r.firstTokenMs = r.prefillSeconds * 1e3 + secondsSince(t1) * 1e3;
  }

  // Decode on it, at the context reached (the full one unless the budget stopped the prefill).
  if (r.error.empty() && r.reached > 0) {
    LongDecode d;
    d.context = r.reached + D;
    d.prefillTokens = r.reached;
    d.prefillSeconds = r.prefillSeconds;
    d.jitCompiles = prefillCompiles;
    decodeOn(model, *req, last, opts, ceil, d);
    printDecode(d);
    r.decode.push_back(std::move(d));
  }
  if (Status s = model.releaseRequest(*req); !s.ok() && r.error.empty()) r.error = s.error().message;
}

}  // namespace deepinfer::bench
