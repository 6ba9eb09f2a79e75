// `deepinfer-jit run`: greedy generation from a prompt of token ids. The CPU reference backend
// (runtime/model/CpuForward.h) runs the whole model; the CUDA backend is a later issue.
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "Args.h"
#include "Verbs.h"
#include "model/CpuForward.h"
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

int fail(const std::string& msg) {
  fmt::print(stderr, "deepinfer-jit run: {}\n", msg);
  return 1;
}

}  // namespace

int verbRun(const std::vector<std::string>& argv) {
  cli::Args args("run", "run --backend cpu --model DIR --prompt-ids 1,2,3 [--max-new-tokens N] "
                        "[--dump-logits FILE.safetensors] [--threads N]\n\n"
                        "Greedy generation. Generated token ids are printed to stdout, one per line, "
                        "as they are produced.\n"
                        "--dump-logits writes one F32 tensor `logits` [prompt + generated, vocab]: "
                        "row i holds the logits at position i of the prompt followed by the "
                        "generated tokens.");
  args.option("backend", "cpu|cuda", "execution backend (cuda is not built yet)")
      .option("model", "DIR", "model directory (config.json, safetensors, token_map.i32)")
      .option("prompt-ids", "IDS", "comma-separated prompt token ids")
      .option("max-new-tokens", "N", "tokens to generate greedily (default 16)")
      .option("dump-logits", "FILE", "write every position's logits to a safetensors file")
      .option("threads", "N", "CPU threads (default: all hardware threads)")
      .flag("timing", "print prefill and decode timings to stderr");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (!args.positional().empty())
    return args.usageError(fmt::format("unexpected argument '{}'", args.positional().front()));
  if (!args.has("backend")) return args.usageError("--backend is required (cpu)");
  const std::string backend = args.get("backend");
  if (backend == "cuda")
    return fail("the cuda backend is not built yet (a later issue); use --backend cpu");
  if (backend != "cpu")
    return args.usageError(fmt::format("unknown backend '{}' (cpu, cuda)", backend));
  if (!args.has("model")) return args.usageError("--model DIR is required");
  if (!args.has("prompt-ids")) return args.usageError("--prompt-ids is required");

  auto ids = parseTokenIds(args.get("prompt-ids"));
  if (!ids.ok()) return args.usageError(ids.error().message);
  auto maxNew = parseCount("max-new-tokens", args.get("max-new-tokens", "16"));
  if (!maxNew.ok()) return args.usageError(maxNew.error().message);
  auto threads = parseCount("threads", args.get("threads", "0"));
  if (!threads.ok()) return args.usageError(threads.error().message);
  const bool timing = args.has("timing");
  const std::string dumpPath = args.get("dump-logits");

  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  const auto t0 = Clock::now();
  CpuModelOptions opts;
  opts.threads = int(*threads);
  auto model = CpuModel::load(args.get("model"), opts);
  if (!model.ok()) return fail(fmt::format("cannot load model '{}': {}", args.get("model"),
                                           model.error().message));
  CpuModel& m = **model;
  const int64_t V = m.config().vocabSize;
  const auto t1 = Clock::now();

  CpuRequestState req = m.newRequest();
  auto prompt = m.prefill(req, *ids);
  if (!prompt.ok()) return fail(prompt.error().message);
  const auto t2 = Clock::now();

  const int64_t n = int64_t(ids->size());
  std::vector<float> all;  // every position's logits when dumping
  if (!dumpPath.empty()) all.assign(prompt->ptr<float>(), prompt->ptr<float>() + n * V);
  std::vector<float> last(prompt->ptr<float>() + (n - 1) * V, prompt->ptr<float>() + n * V);
  for (int64_t step = 0; step < *maxNew; ++step) {
    const int32_t next = argmaxToken(last.data(), V);
    fmt::print("{}\n", next);
    std::fflush(stdout);
    // The last token is fed back only when its logits are wanted in the dump.
    if (step + 1 == *maxNew && dumpPath.empty()) break;
    auto logits = m.decode(req, next);
    if (!logits.ok()) return fail(logits.error().message);
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
  if (timing)
    fmt::print(stderr, "load {:.2f} s, prefill {} tokens {:.3f} s, {} decode steps {:.3f} s ({} threads)\n",
               seconds(t0, t1), n, seconds(t1, t2), req.position() - n, seconds(t2, t3), m.threads());
  return 0;
}
