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
#include "model/Safetensors.h"

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

// Reads token ids from a file: decimal ids separated by commas and/or whitespace.
Result<std::vector<int32_t>> readTokenFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Error{fmt::format("--prompt-file: cannot open '{}': {}", path, std::strerror(errno))};
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  std::fclose(f);
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

// The two backends behind one interface: prefill returns every position's logits, decode one row.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Result<HostTensor> prefill(const std::vector<int32_t>& ids) = 0;
  virtual Result<std::vector<float>> decode(int32_t token) = 0;
  virtual int64_t vocab() const = 0;
  virtual std::string describe() const = 0;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(std::unique_ptr<CpuModel> m) : m_(std::move(m)), req_(m_->newRequest()) {}
  Result<HostTensor> prefill(const std::vector<int32_t>& ids) override { return m_->prefill(req_, ids); }
  Result<std::vector<float>> decode(int32_t t) override { return m_->decode(req_, t); }
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
  int64_t vocab() const override { return m_->config().vocabSize; }
  std::string describe() const override {
    return fmt::format("cuda, {} ({} kernels), KV capacity {} tokens", gpu_, m_->targetName(), m_->capacity().tokens);
  }

 private:
  std::unique_ptr<GpuModel> m_;
  int64_t req_;
  std::string gpu_;
};

int fail(const std::string& msg) {
  fmt::print(stderr, "deepinfer-jit run: {}\n", msg);
  return 1;
}

}  // namespace

int verbRun(const std::vector<std::string>& argv) {
  cli::Args args("run", "run --model DIR (--prompt-ids 1,2,3 | --prompt-file FILE) [--backend cuda|cpu] "
                        "[--max-new-tokens N] [--temperature T] [--top-p P] [--seed S] "
                        "[--dump-logits FILE.safetensors]\n\n"
                        "Generates from a prompt of token ids. Generated ids are printed to stdout, one per "
                        "line, as they are produced; the last line (starting with '#') reports prefill tok/s, "
                        "time to first token and decode tok/s.\n"
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
  auto threads = parseCount("threads", args.get("threads", "0"));
  if (!threads.ok()) return args.usageError(threads.error().message);
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

  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const auto t0 = Clock::now();
  std::unique_ptr<Backend> be;
  if (backendName == "cpu") {
    CpuModelOptions opts;
    opts.threads = int(*threads);
    auto model = CpuModel::load(args.get("model"), opts);
    if (!model.ok()) return fail(fmt::format("cannot load model '{}': {}", args.get("model"), model.error().message));
    be = std::make_unique<CpuBackend>(std::move(*model));
  } else {
    GpuModelOptions opts;
    opts.target = args.get("target");
    opts.maxChunkTokens = *chunk;
    opts.maxRequests = 1;
    auto model = GpuModel::load(args.get("model"), dev, opts);
    if (!model.ok()) return fail(fmt::format("cannot load model '{}': {}", args.get("model"), model.error().message));
    auto req = (*model)->newRequest();
    if (!req.ok()) return fail(req.error().message);
    be = std::make_unique<CudaBackend>(std::move(*model), *req, dev->info().profile.gpuName);
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
  int64_t decoded = 0;
  for (int64_t step = 0; step < *maxNew; ++step) {
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
  fmt::print("# {} prompt tokens: prefill {:.1f} tok/s, time to first token {:.1f} ms; {} decode steps: {:.1f} tok/s ({})\n",
             n, prefillS > 0 ? double(n) / prefillS : 0.0, prefillS * 1e3, decoded,
             decodeS > 0 && decoded > 0 ? double(decoded) / decodeS : 0.0, be->describe());
  if (args.has("timing")) fmt::print(stderr, "load {:.2f} s\n", seconds(t0, t1));
  return 0;
}
