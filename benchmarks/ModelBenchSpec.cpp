#include "ModelBenchSpec.h"

#include <fmt/format.h>

#include <algorithm>

#include "ModelBenchMeasure.h"
#include "ReportText.h"
#include "model/Sampling.h"

namespace deepinfer::bench {
namespace {

// Speculative requests that are released on every path out of a measurement.
struct Requests {
  explicit Requests(GpuModel& m) : model(m) {}
  ~Requests() {
    for (int64_t r : ids) (void)model.releaseRequest(r);
  }
  Requests(const Requests&) = delete;
  Requests& operator=(const Requests&) = delete;
  GpuModel& model;
  std::vector<int64_t> ids;
};

// Fresh speculative requests prefilled with `prompts`, chunk by chunk and one request after
// another: the recording and every measurement make the same calls, so the prompts' caches hold
// the same bits each time. `first`: the greedy pick of each prompt's last row.
Status openStreams(GpuModel& model, const std::vector<std::vector<int32_t>>& prompts, int64_t chunk, Requests& reqs,
                   std::vector<int32_t>* first) {
  const int64_t V = model.config().vocabSize;
  for (const auto& p : prompts) {
    auto r = model.newSpeculativeRequest();
    if (!r.ok()) return r.error();
    reqs.ids.push_back(*r);
    for (size_t at = 0; at < p.size(); at += size_t(chunk)) {
      std::vector<int32_t> part(p.begin() + int64_t(at), p.begin() + int64_t(std::min(p.size(), at + size_t(chunk))));
      auto l = model.prefill(*r, part, /*lastOnly=*/true);
      if (!l.ok()) return l.error();
      if (first && at + part.size() == p.size()) first->push_back(sampleToken(l->ptr<float>(), V, SamplingOptions{}, 0));
    }
  }
  return {};
}

// S streams: their prompts and the target's greedy continuation as the timed oracle steps
// compute it (see the header).
struct OracleStreams {
  std::vector<std::vector<int32_t>> prompts, continuation;
};

// Greedy speculative steps with the draft model's drafts (every stream verifies B of them) until
// every stream has `need` tokens; each step emits the drafts the target agrees with and its own
// next token, all of them the target's greedy choices at this batch shape.
Result<OracleStreams> recordOracle(GpuModel& model, int S, int64_t need, const ModelBenchOptions& opts,
                                   std::mt19937_64& rng, SpecRow& row) {
  const int64_t V = model.config().vocabSize;
  OracleStreams st;
  std::uniform_int_distribution<int32_t> d(0, int32_t(V - 1));
  for (int s = 0; s < S; ++s) {
    std::vector<int32_t> p(size_t(opts.promptTokens));
    for (auto& t : p) t = d(rng);
    st.prompts.push_back(std::move(p));
  }
  Requests reqs(model);
  std::vector<int32_t> first;
  DI_TRY(openStreams(model, st.prompts, opts.chunk, reqs, &first));
  for (int32_t t : first) st.continuation.push_back({t});
  AcceptTally tally;
  const auto t0 = Clock::now();
  auto shortest = [&] {
    size_t n = st.continuation[0].size();
    for (const auto& c : st.continuation) n = std::min(n, c.size());
    return int64_t(n);
  };
  while (shortest() < need) {
    std::vector<GpuSpecStep> steps;
    for (int s = 0; s < S; ++s) {
      GpuSpecStep g;
      g.request = reqs.ids[size_t(s)];
      g.next = st.continuation[size_t(s)].back();
      steps.push_back(std::move(g));
    }
    auto out = model.speculativeStep(steps);
    if (!out.ok()) return out.error();
    for (int s = 0; s < S; ++s) {
      const GpuSpecOutcome& o = (*out)[size_t(s)];
      auto& c = st.continuation[size_t(s)];
      c.insert(c.end(), o.emitted.begin(), o.emitted.end());
      tally.add(o.accepted);
    }
    ++row.steps;
  }
  row.stepMs = row.steps > 0 ? secondsSince(t0) * 1e3 / row.steps : 0;
  tally.finish(row);
  if (row.stepMs > 0) row.tokPerS = double(S) * (row.meanAccepted + 1) / (row.stepMs * 1e-3);
  return st;
}

// One timed measurement: fresh speculative requests per repetition, one untimed step (graph
// capture), then `decodeSteps` timed steps of `kind`. Oracle steps are checked against the
// recording (the untimed one too).
SpecRow measure(GpuModel& model, const OracleStreams& st, int S, const std::string& kind, int forced,
                const ModelBenchOptions& opts) {
  const int64_t V = model.config().vocabSize;
  const int B = model.draftBlockSize();
  SpecRow row;
  row.streams = S;
  row.kind = kind;
  row.forced = forced;
  row.steps = opts.decodeSteps;
  std::vector<double> times;
  AcceptTally tally;
  for (int rep = 0; rep < opts.repeats && row.error.empty(); ++rep) {
    Requests reqs(model);
    if (Status s = openStreams(model, st.prompts, opts.chunk, reqs, nullptr); !s.ok()) {
      row.error = s.error().message;
      break;
    }
    std::vector<int32_t> anchor(static_cast<size_t>(S));
    std::vector<int64_t> emitted(size_t(S), 1);  // tokens of the continuation emitted so far
    for (int s = 0; s < S; ++s) anchor[size_t(s)] = st.continuation[size_t(s)][0];
    auto step = [&](int index, bool timed) -> Status {
      if (kind == "draft") {
        std::vector<std::pair<int64_t, int32_t>> a;
        for (int s = 0; s < S; ++s) a.push_back({reqs.ids[size_t(s)], anchor[size_t(s)]});
        auto d = model.draft(a, /*wantZ=*/false);
        return d.ok() ? Status{} : Status{d.error()};
      }
      std::vector<GpuSpecStep> steps;
      for (int s = 0; s < S; ++s) {
        GpuSpecStep g;
        g.request = reqs.ids[size_t(s)];
        g.next = anchor[size_t(s)];
        if (kind == "plain") g.maxDrafts = 0;
        if (kind == "oracle") {
          g.draftOverride = oracleDrafts(st.continuation[size_t(s)], emitted[size_t(s)], forced, B, V);
          if (g.draftOverride.empty())
            return Error{fmt::format("stream {}: the recorded continuation ({} tokens) is too short for step {}", s,
                                     st.continuation[size_t(s)].size(), index)};
        }
        steps.push_back(std::move(g));
      }
      auto out = model.speculativeStep(steps);
      if (!out.ok()) return out.error();
      for (int s = 0; s < S; ++s) {
        const GpuSpecOutcome& o = (*out)[size_t(s)];
        if (kind == "oracle") {
          const std::string miss =
              oracleStepMismatch(st.continuation[size_t(s)], emitted[size_t(s)], forced, o.accepted, o.emitted);
          if (!miss.empty()) tally.mismatch(s, index, miss);
        }
        anchor[size_t(s)] = o.emitted.back();
        emitted[size_t(s)] += int64_t(o.emitted.size());
        if (timed) tally.add(o.accepted);
      }
      return {};
    };
    if (Status s = step(0, false); !s.ok()) {
      row.error = s.error().message;
      break;
    }
    const auto t0 = Clock::now();
    for (int i = 1; i <= opts.decodeSteps && row.error.empty(); ++i)
      if (Status s = step(i, true); !s.ok()) row.error = s.error().message;
    if (!row.error.empty()) break;
    times.push_back(secondsSince(t0) / double(opts.decodeSteps));
  }
  row.stepMs = medianOf(times) * 1e3;
  tally.finish(row);
  if (row.stepMs > 0 && kind != "draft") row.tokPerS = double(S) * (row.meanAccepted + 1) / (row.stepMs * 1e-3);
  return row;
}

void printProgress(const SpecRow& r, int B) {
  const std::string what = r.kind == "oracle" ? fmt::format("oracle, {} of {} right", r.forced, B) : r.kind;
  if (r.error.empty())
    fmt::print("speculative {} stream(s), {}: {:.2f} ms per step, {:.2f} accepted ({}..{}), {:.1f} tok/s\n", r.streams,
               what, r.stepMs, r.meanAccepted, r.minAccepted, r.maxAccepted, r.tokPerS);
  else
    fmt::print("speculative {} stream(s), {}: ERROR {}\n", r.streams, what, r.error);
  std::fflush(stdout);
}

}  // namespace

std::vector<SpecRow> measureSpeculative(GpuModel& model, const ModelBenchOptions& opts, std::mt19937_64& rng) {
  std::vector<SpecRow> rows;
  const int B = model.draftBlockSize();
  // The untimed step and the timed ones, all drafts right at most.
  const int64_t need = oracleContinuationLength(opts.decodeSteps + 1, B);
  for (int S : opts.streams) {
    SpecRow rec;
    rec.streams = S;
    rec.kind = "record";
    auto st = recordOracle(model, S, need, opts, rng, rec);
    if (!st.ok()) rec.error = st.error().message;
    printProgress(rec, B);
    if (!st.ok()) {
      rows.push_back(rec);
      continue;
    }
    const size_t first = rows.size();
    rows.push_back(measure(model, *st, S, "plain", -1, opts));
    rows.push_back(measure(model, *st, S, "draft", -1, opts));
    for (int a = 0; a <= B; ++a) rows.push_back(measure(model, *st, S, "oracle", a, opts));
    rows.push_back(measure(model, *st, S, "model", -1, opts));
    rows.push_back(rec);
    // An oracle step's tok/s includes the draft pass it would need (measured alone above).
    const double draftMs = rows[first + 1].stepMs;
    for (size_t i = first; i < rows.size(); ++i) {
      SpecRow& r = rows[i];
      if (r.kind == "oracle" && r.stepMs > 0)
        r.tokPerS = double(S) * (r.meanAccepted + 1) / ((r.stepMs + draftMs) * 1e-3);
      if (r.kind != "record") printProgress(r, B);
    }
  }
  return rows;
}

}  // namespace deepinfer::bench
