// `deepinfer-jit run`: generation from a prompt of token ids, greedy or sampled, through the
// Engine API (deepinfer/Engine.h) on its cuda backend (generated kernels) or its cpu backend (the
// C++ reference). Token ids stream to stdout as steps produce them; a final line reports prefill
// tok/s, time to first token and decode tok/s.
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
#include "deepinfer/Engine.h"
#include "deepinfer/InputFiles.h"
#include "model/ModelConfig.h"
#include "model/Safetensors.h"
#include "model/Sampling.h"

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

int fail(const std::string& msg) {
  fmt::print(stderr, "deepinfer-jit run: {}\n", msg);
  return 1;
}

}  // namespace

int verbRun(const std::vector<std::string>& argv) {
  cli::Args args("run", "run --model DIR (--prompt-ids 1,2,3 | --prompt-file FILE) [--backend cuda|cpu] "
                        "[--max-new-tokens N] [--temperature T] [--top-p P] [--seed S] "
                        "[--dump-logits FILE.safetensors] [--speculative | --no-speculative] "
                        "[--pp N [--stage-layers A,B,..] [--gpus G,H,..]] [--tp N]\n\n"
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
                        "the logits at position i of the prompt followed by the generated tokens.\n"
                        "--pp N splits the layers into N pipeline stages (cuda; docs/parallelism.md): each stage "
                        "holds its layers' weights and KV caches on its GPU (--gpus, one ordinal per stage; "
                        "default one GPU per stage when that many are visible, else all on GPU 0 as logical "
                        "devices); the last line then reports each stage's layers, weights and KV capacity. "
                        "--tp N runs N tensor ranks per stage (heads, output groups, shared-expert slices, routed "
                        "experts and vocabulary rows split as shard-plan prints; partial outputs all-reduced over "
                        "NCCL, one process driving every GPU; --gpus then lists pp x tp ordinals, rank r of stage "
                        "s at s * tp + r; ranks sharing one GPU run as logical ranks, a test double). tp > 1 runs "
                        "without speculation; the last line reports each rank's, each GPU's and the total KV "
                        "capacity.");
  args.option("backend", "cuda|cpu", "execution backend (default: cuda when a GPU is present, else cpu)")
      .option("model", "DIR", "model directory (config.json, safetensors, token_map.i32)")
      .option("prompt-ids", "IDS", "comma-separated prompt token ids")
      .option("prompt-file", "FILE", "prompt token ids in a file (separated by commas or whitespace)")
      .option("max-new-tokens", "N", "tokens to generate (default 16)")
      .option("temperature", "T", "0 = greedy (default); > 0 samples")
      .option("top-p", "P", "nucleus sampling mass in (0, 1] (default 1)")
      .option("seed", "S", "sampling seed (default 0)")
      .option("target", "sm_XX", "cuda: run this target's specialization (PTX for sm_80/sm_86)")
      .option("chunk", "N", "prefill chunk size in tokens (default 256)")
      .option("dump-logits", "FILE", "write every position's logits to a safetensors file")
      .option("threads", "N", "cpu: threads (default: all hardware threads)")
      .option("pp", "N", "cuda: pipeline stages over layer ranges (default 1)")
      .option("stage-layers", "A,B,..", "layers per pipeline stage (default: as even as possible)")
      .option("gpus", "G,H,..", "device ordinal of every pipeline stage")
      .option("tp", "N", "tensor-parallel ranks per stage (only 1 is built)")
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
  auto maxNew = cli::parseInteger("max-new-tokens", args.get("max-new-tokens", "16"), 0);
  if (!maxNew.ok()) return args.usageError(maxNew.error().message);
  const auto threads = cli::threadCount(args, "threads", 0, 0);
  if (!threads) return 2;
  auto chunk = cli::parseInteger("chunk", args.get("chunk", "256"), 1);
  if (!chunk.ok()) return args.usageError(chunk.error().message);
  auto temperature = parseReal("temperature", args.get("temperature", "0"));
  if (!temperature.ok()) return args.usageError(temperature.error().message);
  auto topP = parseReal("top-p", args.get("top-p", "1"));
  if (!topP.ok()) return args.usageError(topP.error().message);
  auto seed = cli::parseInteger("seed", args.get("seed", "0"), 0);
  if (!seed.ok()) return args.usageError(seed.error().message);
  auto pp = cli::parseInteger("pp", args.get("pp", "1"), 1, 1024);
  if (!pp.ok()) return args.usageError(pp.error().message);
  auto tp = cli::parseInteger("tp", args.get("tp", "1"), 1, 1024);
  if (!tp.ok()) return args.usageError(tp.error().message);
  std::vector<int> stageLayers, gpus;
  if (args.has("stage-layers")) {
    auto l = cli::parseIntegerList("stage-layers", args.get("stage-layers"), 1, INT32_MAX);
    if (!l.ok()) return args.usageError(l.error().message);
    stageLayers.assign(l->begin(), l->end());
  }
  if (args.has("gpus")) {
    auto g = cli::parseIntegerList("gpus", args.get("gpus"), 0, INT32_MAX);
    if (!g.ok()) return args.usageError(g.error().message);
    gpus.assign(g->begin(), g->end());
  }
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
  if (!stageLayers.empty()) {
    int64_t sum = 0;
    for (int n : stageLayers) sum += n;
    if (int64_t(stageLayers.size()) == *pp && sum != cfg->numHiddenLayers)
      return args.usageError(fmt::format("--stage-layers: the stages' layers add up to {}, the model has {} layers",
                                         sum, cfg->numHiddenLayers));
  }
  if (*pp > cfg->numHiddenLayers)
    return args.usageError(fmt::format("--pp {}: more stages than the model's {} layers", *pp, cfg->numHiddenLayers));
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
  {
    EngineOptions check;
    check.backend = backendName;
    check.pp = int(*pp);
    check.tp = int(*tp);
    check.stageLayers = stageLayers;
    check.gpus = gpus;
    if (Status st = checkParallelOptions(check); !st.ok()) return args.usageError(st.error().message);
  }
  if (backendName == "cuda" && !dev) return fail(fmt::format("--backend cuda needs a GPU: {}", noGpu));
  if (backendName == "cpu" && args.has("target")) return args.usageError("--target applies to the cuda backend only");
  if (args.has("speculative") && args.has("no-speculative"))
    return args.usageError("give at most one of --speculative and --no-speculative");

  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const auto t0 = Clock::now();
  EngineOptions eo;
  eo.backend = backendName;
  eo.threads = int(*threads);
  eo.target = args.get("target");
  eo.maxChunkTokens = *chunk;
  eo.maxRequests = 1;
  eo.speculative = !args.has("no-speculative");
  eo.pp = int(*pp);
  eo.tp = int(*tp);
  eo.stageLayers = stageLayers;
  eo.gpus = gpus;
  // The engine opens its own handle to the GPU; `dev` is held until then so the driver's primary
  // context stays retained and is not torn down and created a second time.
  auto engine = Engine::create(eo);
  dev.reset();
  if (!engine.ok()) return fail(engine.error().message);
  Engine& e = **engine;
  if (Status st = e.loadModel(args.get("model")); !st.ok())
    return fail(fmt::format("cannot load model '{}': {}", args.get("model"), st.error().message));
  if (args.has("speculative") && !e.speculative() && *pp > 1)
    return fail("--speculative: DSpark speculation across pipeline stages is not built yet; use --pp 1");
  if (args.has("speculative") && !e.speculative())
    return fail(fmt::format("--speculative: the model in '{}' has no DSpark draft (num_nextn_predict_layers {}, "
                            "dspark_block_size {}, and its mtp.* tensors)",
                            args.get("model"), cfg->numNextnPredictLayers, cfg->dsparkBlockSize));
  RequestParams rp;
  rp.prompt = *ids;
  rp.maxNewTokens = *maxNew;
  rp.temperature = sampling.temperature;
  rp.topP = sampling.topP;
  rp.seed = sampling.seed;
  rp.keepAllLogits = !dumpPath.empty();
  auto request = e.addRequest(rp);
  if (!request.ok()) return fail(request.error().message);
  const auto t1 = Clock::now();

  // Steps until the request finished; tokens stream as steps produce them. The first token
  // comes with the step that ends the prompt.
  Clock::time_point firstToken = t1;
  int64_t generated = 0;
  while (!e.finished(*request)) {
    auto events = e.step();
    if (!events.ok()) return fail(events.error().message);
    for (const StepEvent& ev : *events) {
      if (ev.tokens.empty()) continue;
      if (generated == 0) firstToken = Clock::now();
      for (int32_t t : ev.tokens) fmt::print("{}\n", t);
      generated += int64_t(ev.tokens.size());
    }
    std::fflush(stdout);
  }
  const auto t3 = Clock::now();
  const int64_t n = int64_t(ids->size()), decoded = std::max<int64_t>(0, generated - 1);

  if (!dumpPath.empty()) {
    auto all = e.allLogits(*request);
    if (!all.ok()) return fail(all.error().message);
    const int64_t V = e.vocabSize(), rows = int64_t(all->size()) / V;
    HostTensor t(DType::F32, {rows, V});
    std::memcpy(t.bytes.data(), all->data(), all->size() * sizeof(float));
    TensorMap out;
    out.emplace("logits", std::move(t));
    Status st = writeSafetensors(dumpPath, out);
    if (!st.ok()) return fail(fmt::format("cannot write '{}': {}", dumpPath, st.error().message));
  }
  const double prefillS = seconds(t1, firstToken), decodeS = seconds(firstToken, t3);
  std::string spec;
  if (e.speculative()) {
    const SpeculationStats ss = e.speculationStats();
    const double steps = double(ss.steps);
    spec = fmt::format("; speculative (block {}): {} steps, {:.2f} drafts accepted per step of {:.2f} verified, {:.2f} "
                       "tokens per step",
                       cfg->dsparkBlockSize, ss.steps, ss.steps ? double(ss.accepted) / steps : 0.0,
                       ss.steps ? double(ss.drafted) / steps : 0.0,
                       ss.steps ? double(ss.accepted + ss.steps) / steps : 0.0);
  }
  fmt::print("# {} prompt tokens: prefill {:.1f} tok/s, time to first token {:.1f} ms; {} decode {}: {:.1f} tok/s "
             "({}){}\n",
             n, prefillS > 0 ? double(n) / prefillS : 0.0, prefillS * 1e3, decoded, e.speculative() ? "tokens" : "steps",
             decodeS > 0 && decoded > 0 ? double(decoded) / decodeS : 0.0, e.describe(), spec);
  if (args.has("timing")) fmt::print(stderr, "load {:.2f} s\n", seconds(t0, t1));
  return 0;
}
