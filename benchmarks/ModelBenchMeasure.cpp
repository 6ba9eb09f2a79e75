#include "ModelBenchMeasure.h"

#include <algorithm>

#include "ModelRoofline.h"
#include "ReportText.h"
#include "model/Sampling.h"

namespace deepinfer::bench {
namespace {

// The decode floor at S streams from the model's bytes per step (ModelRoofline.h).
void decodeFloor(const ModelConfig& cfg, const Ceilings& ceil, DecodeRow& d) {
  const int64_t mid = (d.firstPosition + d.lastPosition) / 2;
  d.kvPerToken = decodeKvBytes(cfg, mid);
  d.distinctExperts = expectedDistinctExperts(cfg.nRoutedExperts, cfg.numExpertsPerTok, d.streams);
  d.weightBytesBatched = tokenWeightBytes(cfg, WeightStorage::Checkpoint, d.distinctExperts).total();
  d.weightBytesPerToken = tokenWeightBytes(cfg, WeightStorage::Checkpoint, cfg.numExpertsPerTok).total();
  const double kv = d.streams * d.kvPerToken.total();
  d.floorSecondsBatched = rooflineFloorUs(ceil, d.weightBytesBatched + kv, 0) * 1e-6;
  d.floorSecondsSerial = rooflineFloorUs(ceil, d.streams * d.weightBytesPerToken + kv, 0) * 1e-6;
}

}  // namespace

double medianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int32_t> randomIds(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> d(0, int32_t(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = d(rng);
  return ids;
}

int32_t greedy(const float* logits, int64_t V) { return sampleToken(logits, V, SamplingOptions{}, 0); }

Result<std::vector<float>> prefillChunks(GpuModel& model, int64_t req, const std::vector<int32_t>& ids, int64_t chunk,
                                         std::vector<double>* chunkMs) {
  std::vector<float> last;
  for (size_t at = 0; at < ids.size(); at += size_t(chunk)) {
    const size_t len = std::min(size_t(chunk), ids.size() - at);
    std::vector<int32_t> part(ids.begin() + int64_t(at), ids.begin() + int64_t(at + len));
    const auto t0 = Clock::now();
    auto logits = model.prefill(req, part, /*lastOnly=*/true);
    if (!logits.ok()) return logits.error();
    if (chunkMs) chunkMs->push_back(secondsSince(t0) * 1e3);
    if (at + len == ids.size()) last.assign(logits->ptr<float>(), logits->ptr<float>() + model.config().vocabSize);
  }
  return last;
}

void timeDecode(GpuModel& model, const std::vector<int64_t>& reqs, std::vector<int32_t>& next,
                const ModelBenchOptions& opts, const Ceilings& ceil, DecodeRow& row) {
  const int64_t V = model.config().vocabSize;
  const size_t streams = reqs.size();
  row.steps = opts.decodeSteps;
  auto step = [&]() -> Status {
    if (row.batched) {
      std::vector<std::pair<int64_t, std::vector<int32_t>>> work;
      for (size_t s = 0; s < streams; ++s) work.push_back({reqs[s], {next[s]}});
      auto logits = model.forward(work, /*lastOnly=*/true);
      if (!logits.ok()) return logits.error();
      for (size_t s = 0; s < streams; ++s) next[s] = greedy((*logits)[s].ptr<float>(), V);
      return {};
    }
    for (size_t s = 0; s < streams; ++s) {
      auto logits = model.decode(reqs[s], next[s]);
      if (!logits.ok()) return logits.error();
      next[s] = greedy(logits->data(), V);
    }
    return {};
  };
  for (int w = 0; w < 2; ++w)
    if (Status s = step(); !s.ok()) {
      row.error = s.error().message;
      return;
    }
  auto pos = model.position(reqs[0]);
  row.firstPosition = pos.ok() ? *pos : 0;
  for (int r = 0; r < opts.repeats; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < opts.decodeSteps; ++i)
      if (Status s = step(); !s.ok()) {
        row.error = s.error().message;
        return;
      }
    row.repeatSeconds.push_back(secondsSince(t0));
  }
  row.stepLaunches = model.lastCallLaunches();
  row.lastPosition = row.firstPosition + int64_t(opts.repeats) * opts.decodeSteps - 1;
  row.seconds = medianOf(row.repeatSeconds);
  decodeFloor(model.config(), ceil, row);
}

}  // namespace deepinfer::bench
