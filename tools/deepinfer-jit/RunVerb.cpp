// `deepinfer-jit run`: generation from a prompt of token ids, greedy or sampled, on the CUDA
// backend (runtime/model/gpu/GpuModel.h: generated kernels) or the CPU reference backend
// (runtime/model/CpuForward.h). Token ids stream to stdout as they are produced; a final line
// reports prefill tok/s, time to first token and decode tok/s.
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "Args.h"
#include "Verbs.h"
#include "deepinfer/Device.h"
#include "model/gpu/GpuModel.h"
#include "model/CpuForward.h"
#include "model/Sampling.h"
#include "model/ModelConfig.h"
#include "model/Safetensors.h"
#include "deepinfer/InputFiles.h"

using namespace deepinfer;

namespace {

// "1,2,3" -> {1, 2, 3}; an empty item or a non-number is an error naming its position.
Result<std::vector<int32_t>> parseTokenIds(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  for (int item = 0;; ++item) {
    const size_t comma = text.find(',', start);
    const std::string tok = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    errno = 0;
    const long long v = tok.empty() ? 0 : std::strtoll(tok.c_str(), &end, 10);
    if (tok.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
      return Error{fmt::format("--prompt-ids: item {} ('{}') is not a non-negative token id", item, tok)};
    ids.push_back(int32_t(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

Result<int64_t> parseCount(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0)
    return Error{fmt::format("--{}: '{}' is not a non-negative integer", flag, text)};
  return int64_t(v);
}

// Reads token ids from a file: decimal ids separated by commas and/or whitespace. The read is
// bounded (a prompt longer than any context is not read to its end).
Result<std::vector<int32_t>> readTokenFile(const std::string& path) {
  auto read = readFileBounded(path, kMaxPromptFileBytes, "--prompt-file");
  if (!read.ok()) return read.error();
  const std::string& text = *read;
  std::string joined;
  for (char c : text) joined += (c == ' ' || c == '\n' || c == '\t' || c == '\r') ? ',' : c;
  std::string squeezed;
  for (char c : joined)
    if (!(c == ',' && (squeezed.empty() || squeezed.back() == ','))) squeezed += c;
  while (!squeezed.empty() && squeezed.back() == ',') squeezed.pop_back();
  if (squeezed.empty()) return Error{fmt::format("--prompt-file: '{}' holds no token ids", path)};
  auto ids = parseTokenIds(squeezed);
  if (!ids.ok()) return Error{fmt::format("--prompt-file '{}': {}", path, ids.error().message)};
  return ids;
}

Result<double> parseReal(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0)
    return Error{fmt::format("--{}: '{}' is not a number", flag, text)};
  return v;
}

// One speculative step's result (docs/dspark.md §5): the emitted tokens d_1..d_a, b and the
// target's logits at the positions it committed ([a + 1, V]).
struct SpecStepResult {
  std::vector<int32_t> emitted;
  int accepted = 0;
  int drafts = 0;  // verified
  std::vector<float> logits;
};

// The two backends behind one interface: prefill returns every position's logits, decode one
// row, a speculative step 1 .. B+1 tokens (backends whose request was made speculative).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Result<HostTensor> prefill(const std::vector<int32_t>& ids) = 0;
  virtual Result<std::vector<float>> decode(int32_t token) = 0;
  virtual Result<SpecStepResult> speculativeStep(int32_t next, int64_t maxDrafts, const SamplingOptions& s) = 0;
  virtual int64_t vocab() const = 0;
  virtual std::string describe() const = 0;
};

// A one-request speculative step's outcome (CpuSpecOutcome or GpuSpecOutcome) as `run` reports it.
template <class Outcome>
SpecStepResult stepResultOf(Outcome& o) {
  SpecStepResult r;
  r.emitted = std::move(o.emitted);
  r.accepted = o.accepted;
  r.drafts = int(o.drafts.size());
  r.logits.assign(o.logits.template ptr<float>(), o.logits.template ptr<float>() + o.logits.numel());
  return r;
}

class CpuBackend : public Backend {
 public:
  CpuBackend(std::unique_ptr<CpuModel> m, CpuRequestState req) : m_(std::move(m)), req_(std::move(req)) {}
  Result<HostTensor> prefill(const std::vector<int32_t>& ids) override { return m_->prefill(req_, ids); }
  Result<std::vector<float>> decode(int32_t t) override { return m_->decode(req_, t); }
  Result<SpecStepResult> speculativeStep(int32_t next, int64_t maxDrafts, const SamplingOptions& s) override {
    std::vector<CpuSpecStep> steps(1);
    steps[0].state = &req_;
    steps[0].next = next;
    steps[0].sampling = s;
    steps[0].maxDrafts = maxDrafts;
    auto out = m_->speculativeStep(steps);
    if (!out.ok()) return out.error();
    return stepResultOf((*out)[0]);
  }
  int64_t vocab() const override { return m_->config().vocabSize; }
  std::string describe() const override { return fmt::format("cpu, {} threads", m_->threads()); }

 private:
  std::unique_ptr<CpuModel> m_;
  CpuRequestState req_;
};

class CudaBackend : public Backend {
 public:
  CudaBackend(std::unique_ptr<GpuModel> m, int64_t req, std::string gpu) : m_(std::move(m)), req_(req), gpu_(std::move(gpu)) {}
  Result<HostTensor> prefill(const std::vector<int32_t>& ids) override { return m_->prefill(req_, ids); }
  Result<std::vector<float>> decode(int32_t t) override { return m_->decode(req_, t); }
  Result<SpecStepResult> speculativeStep(int32_t next, int64_t maxDrafts, const SamplingOptions& s) override {
    std::vector<GpuSpecStep> steps(1);
    steps[0].request = req_;
    steps[0].next = next;
    steps[0].sampling = s;
    steps[0].maxDrafts = maxDrafts;
    steps[0].keepLogits = keepLogits_;
    auto out = m_->speculativeStep(steps);
    if (!out.ok()) return out.error();
    return stepResultOf((*out)[0]);
  }
  void keepLogits(bool on) { keepLogits_ = on; }
  int64_t vocab() const override { return m_->config().vocabSize; }
  std::string describe() const override {
    return fmt::format("cuda, {} ({} kernels), KV capacity {} tokens", gpu_, m_->targetName(), m_->capacity().tokens);
  }

 private:
  std::unique_ptr<GpuModel> m_;
  int64_t req_;
  std::string gpu_;
  bool keepLogits_ = false;
};

int fail(const std::string& msg) {
  fmt::print(stderr, "deepinfer-jit run: {}\n", msg);
  return 1;
}

}  // namespace

int verbRun(const std::vector<std::string>& argv) {
  cli::Args args("run", "run --model DIR (--prompt-ids 1,2,3 | --prompt-file FILE) [--backend cuda|cpu] "
                        "[--max-new-tokens N] [--temperature T] [--top-p P] [--seed S] "
                        "[--dump-logits FILE.safetensors] [--speculative | --no-speculative]\n\n"
                        "Generates from a prompt of token ids. Generated ids are printed to stdout, one per "
                        "line, as they are produced; the last line (starting with '#') reports prefill tok/s, "
                        "time to first token and decode tok/s, and with speculative decoding the mean number "
                        "of drafts accepted per step.\n"
                        "Speculative decoding (DSpark, on by default when the model has draft layers): each "
                        "step drafts dspark_block_size tokens with the draft heads and verifies them in one "
                        "target forward, emitting 1 .. block + 1 tokens. Greedy output equals "
                        "non-speculative decoding (exactly on the CPU; on the GPU up to near-ties between "
                        "top logits, as batched rows round differently); sampled output has the same distribution (its random "
                        "draws are keyed by position, so the tokens differ from --no-speculative's).\n"
                        "--dump-logits writes one F32 tensor `logits` [prompt + generated, vocab]: row i holds "
                        "the logits at position i of the prompt followed by the generated tokens.");
  args.option("backend", "cuda|cpu", "execution backend (default: cuda when a GPU is present, else cpu)")
      .option("model", "DIR", "model directory (config.json, safetensors, token_map.i32)")
      .option("prompt-ids", "IDS", "comma-separated prompt token ids")
      .option("prompt-file", "FILE", "prompt token ids in a file (separated by commas or whitespace)")
      .option("max-new-tokens", "N", "tokens to generate (default 16)")
      .option("temperature", "T", "0 = greedy (default); > 0 samples")
      .option("top-p", "P", "nucleus sampling mass in (0, 1] (default 1)")
      .option("seed", "S", "sampling seed (default 0)")
      .option("target", "sm_XX", "cuda: run this target's specialization (PTX for sm_80/sm_86)")
      .option("chunk", "N", "cuda: prefill chunk size in tokens (default 256)")
      .option("dump-logits", "FILE", "write every position's logits to a safetensors file")
      .option("threads", "N", "cpu: threads (default: all hardware threads)")
      .flag("speculative", "require speculative decoding (an error if the model has no DSpark draft)")
      .flag("no-speculative", "decode one token per step even when the model has draft layers")
      .flag("timing", "also print load time to stderr");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (!args.positional().empty())
    return args.usageError(fmt::format("unexpected argument '{}'", args.positional().front()));
  if (!args.has("model")) return args.usageError("--model DIR is required");
  if (args.has("prompt-ids") == args.has("prompt-file"))
    return args.usageError("give the prompt with exactly one of --prompt-ids or --prompt-file");

  auto ids = args.has("prompt-ids") ? parseTokenIds(args.get("prompt-ids")) : readTokenFile(args.get("prompt-file"));
  if (!ids.ok()) return args.usageError(ids.error().message);
  auto maxNew = parseCount("max-new-tokens", args.get("max-new-tokens", "16"));
  if (!maxNew.ok()) return args.usageError(maxNew.error().message);
  const auto threads = cli::threadCount(args, "threads", 0, 0);
  if (!threads) return 2;
  auto chunk = parseCount("chunk", args.get("chunk", "256"));
  if (!chunk.ok() || *chunk < 1) return args.usageError("--chunk: must be a positive integer");
  auto temperature = parseReal("temperature", args.get("temperature", "0"));
  if (!temperature.ok()) return args.usageError(temperature.error().message);
  auto topP = parseReal("top-p", args.get("top-p", "1"));
  if (!topP.ok()) return args.usageError(topP.error().message);
  auto seed = parseCount("seed", args.get("seed", "0"));
  if (!seed.ok()) return args.usageError(seed.error().message);
  SamplingOptions sampling;
  sampling.temperature = *temperature;
  sampling.topP = *topP;
  sampling.seed = uint64_t(*seed);
  if (auto st = validateSampling(sampling); !st.ok()) return args.usageError(st.error().message);
  const std::string dumpPath = args.get("dump-logits");
  if (!dumpPath.empty())
    if (Status s = cli::checkOutputPath("--dump-logits", dumpPath); !s.ok()) return args.usageError(s.error().message);

  // The request against the model's limits before anything is loaded or generated: positions
  // the generation feeds (the last token is fed back only when its logits are dumped) and the
  // size of the dump.
  auto cfg = loadModelConfig(args.get("model"));
  if (!cfg.ok()) return fail(fmt::format("cannot load model '{}': {}", args.get("model"), cfg.error().message));
  const int64_t promptLen = int64_t(ids->size());
  const int64_t fed = promptLen + std::max<int64_t>(0, *maxNew - 1) + (!dumpPath.empty() && *maxNew > 0 ? 1 : 0);
  const int64_t maxPositions = cfg->maxPositionEmbeddings > 0 ? cfg->maxPositionEmbeddings : int64_t(INT32_MAX);
  if (*maxNew > maxPositions || fed > maxPositions)
    return args.usageError(fmt::format("--max-new-tokens {}: the prompt's {} tokens and {} new tokens need {} positions, "
                                       "more than the model's {} ({}/config.json max_position_embeddings)",
                                       *maxNew, promptLen, *maxNew, promptLen + *maxNew, maxPositions,
                                       args.get("model")));
  constexpr double kMaxDumpBytes = double(uint64_t(16) << 30);
  const double dumpBytes = double(promptLen + *maxNew) * double(cfg->vocabSize) * 4;
  if (!dumpPath.empty() && dumpBytes > kMaxDumpBytes)
    return args.usageError(fmt::format("--dump-logits: {} rows of {} logits are {:.1f} GB, more than the {:.0f} GB a dump "
                                       "may hold; ask for fewer tokens",
                                       promptLen + *maxNew, cfg->vocabSize, dumpBytes / 1e9, kMaxDumpBytes / 1e9));

  std::string backendName = args.get("backend");
  std::shared_ptr<Device> dev;
  std::string noGpu;
  if (backendName.empty() || backendName == "cuda") {
    auto d = Device::open(0);
    if (d.ok()) dev = *d;
    else noGpu = d.error().message;
    if (backendName.empty()) backendName = dev ? "cuda" : "cpu";
  }
  if (backendName != "cpu" && backendName != "cuda")
    return args.usageError(fmt::format("unknown backend '{}' (cuda, cpu)", backendName));
  if (backendName == "cuda" && !dev) return fail(fmt::format("--backend cuda needs a GPU: {}", noGpu));
  if (backendName == "cpu" && (args.has("target") || args.has("chunk")))
    return args.usageError("--target and --chunk apply to the cuda backend only");
  if (args.has("speculative") && args.has("no-speculative"))
    return args.usageError("give at most one of --speculative and --no-speculative");

  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const auto t0 = Clock::now();
  std::unique_ptr<Backend> be;
  bool speculative = false;
  int64_t blockSize = 0;
  if (backendName == "cpu") {
    CpuModelOptions opts;
    opts.threads = int(*threads);
    auto model = CpuModel::load(args.get("model"), opts);
    if (!model.ok()) return fail(fmt::format("cannot load model '{}': {}", args.get("model"), model.error().message));
    speculative = !args.has("no-speculative") && ((*model)->hasDraft() || args.has("speculative"));
    blockSize = (*model)->draftBlockSize();
    auto req = speculative ? (*model)->newSpeculativeRequest() : Result<CpuRequestState>((*model)->newRequest());
    if (!req.ok()) return fail(fmt::format("--speculative: {}", req.error().message));
    be = std::make_unique<CpuBackend>(std::move(*model), std::move(*req));
  } else {
    GpuModelOptions opts;
    opts.target = args.get("target");
    opts.maxChunkTokens = *chunk;
    opts.maxRequests = 1;
    opts.speculative = !args.has("no-speculative");
    auto model = GpuModel::load(args.get("model"), dev, opts);
    if (!model.ok()) return fail(fmt::format("cannot load model '{}': {}", args.get("model"), model.error().message));
    if (fed > (*model)->capacity().tokens)
      return fail(fmt::format("the prompt's {} tokens and {} new tokens need {} positions of KV cache; this GPU holds {} "
                              "(--max-new-tokens)",
                              promptLen, *maxNew, fed, (*model)->capacity().tokens));
    speculative = (*model)->speculation() || args.has("speculative");
    blockSize = (*model)->draftBlockSize();
    auto req = speculative ? (*model)->newSpeculativeRequest() : (*model)->newRequest();
    if (!req.ok()) return fail(speculative ? fmt::format("--speculative: {}", req.error().message) : req.error().message);
    auto cuda = std::make_unique<CudaBackend>(std::move(*model), *req, dev->info().profile.gpuName);
    cuda->keepLogits(!dumpPath.empty());
    be = std::move(cuda);
  }
  const int64_t V = be->vocab();
  const auto t1 = Clock::now();

  auto prompt = be->prefill(*ids);
  if (!prompt.ok()) return fail(prompt.error().message);
  const int64_t n = int64_t(ids->size());
  std::vector<float> all;  // every position's logits when dumping
  if (!dumpPath.empty()) all.assign(prompt->ptr<float>(), prompt->ptr<float>() + n * V);
  std::vector<float> last(prompt->ptr<float>() + (n - 1) * V, prompt->ptr<float>() + n * V);
  Clock::time_point firstToken = t1;
  int64_t decoded = 0, specSteps = 0, specAccepted = 0, specDrafts = 0;
  if (!speculative) {
    for (int64_t step = 0; step < *maxNew; ++step) {
      if (Status st = checkFiniteLogits(last.data(), V, fmt::format("logits at position {}", n - 1 + step)); !st.ok())
        return fail(st.error().message);
      const int32_t next = sampleToken(last.data(), V, sampling, uint64_t(step));
      fmt::print("{}\n", next);
      std::fflush(stdout);
      if (step == 0) firstToken = Clock::now();
      // The last token is fed back only when its logits are wanted in the dump.
      if (step + 1 == *maxNew && dumpPath.empty()) break;
      auto logits = be->decode(next);
      if (!logits.ok()) return fail(logits.error().message);
      ++decoded;
      last = std::move(*logits);
      if (!dumpPath.empty()) all.insert(all.end(), last.begin(), last.end());
    }
  } else if (*maxNew > 0) {
    // The first token comes from the prompt's logits; every step then verifies up to B drafts
    // after the newest token, never more than the budget can emit.
    if (Status st = checkFiniteLogits(last.data(), V, fmt::format("logits at position {}", n - 1)); !st.ok())
      return fail(st.error().message);
    int32_t next = sampleToken(last.data(), V, sampling, 0);
    fmt::print("{}\n", next);
    std::fflush(stdout);
    firstToken = Clock::now();
    int64_t emitted = 1;
    while (emitted < *maxNew || !dumpPath.empty()) {
      const bool tail = emitted >= *maxNew;  // only the last token's logits are still wanted
      auto r = be->speculativeStep(next, tail ? 0 : std::min<int64_t>(blockSize, *maxNew - emitted - 1), sampling);
      if (!r.ok()) return fail(r.error().message);
      if (!dumpPath.empty()) all.insert(all.end(), r->logits.begin(), r->logits.end());
      if (tail) break;
      for (int32_t t : r->emitted) fmt::print("{}\n", t);
      std::fflush(stdout);
      emitted += int64_t(r->emitted.size());
      decoded += int64_t(r->emitted.size());
      ++specSteps;
      specAccepted += r->accepted;
      specDrafts += r->drafts;
      next = r->emitted.back();
    }
  }
  const auto t3 = Clock::now();

  if (!dumpPath.empty()) {
    const int64_t rows = int64_t(all.size()) / V;
    HostTensor t(DType::F32, {rows, V});
    std::memcpy(t.bytes.data(), all.data(), all.size() * sizeof(float));
    TensorMap out;
    out.emplace("logits", std::move(t));
    Status st = writeSafetensors(dumpPath, out);
    if (!st.ok()) return fail(fmt::format("cannot write '{}': {}", dumpPath, st.error().message));
  }
  const double prefillS = seconds(t1, firstToken), decodeS = seconds(firstToken, t3);
  std::string spec;
  if (speculative)
    spec = fmt::format("; speculative (block {}): {} steps, {:.2f} drafts accepted per step of {:.2f} verified, {:.2f} "
                       "tokens per step",
                       blockSize, specSteps, specSteps ? double(specAccepted) / double(specSteps) : 0.0,
                       specSteps ? double(specDrafts) / double(specSteps) : 0.0,
                       specSteps ? double(decoded) / double(specSteps) : 0.0);
  fmt::print("# {} prompt tokens: prefill {:.1f} tok/s, time to first token {:.1f} ms; {} decode {}: {:.1f} tok/s "
             "({}){}\n",
             n, prefillS > 0 ? double(n) / prefillS : 0.0, prefillS * 1e3, decoded, speculative ? "tokens" : "steps",
             decodeS > 0 && decoded > 0 ? double(decoded) / decodeS : 0.0, be->describe(), spec);
  if (args.has("timing")) fmt::print(stderr, "load {:.2f} s\n", seconds(t0, t1));
  return 0;
}
