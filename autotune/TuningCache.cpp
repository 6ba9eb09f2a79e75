#include "deepinfer/TuningCache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "AtomicPublish.h"
#include "PrivateDir.h"
#include "deepinfer/BinaryCache.h"
#include "deepinfer/InputFiles.h"
#include "deepinfer/JsonInput.h"
#include "deepinfer/Nvrtc.h"
#include "deepinfer/Specialize.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace deepinfer {
namespace json = llvm::json;
namespace {

constexpr char kFormatPrefix[] = "deepinfer-jit-tuning-";
// 2: entries carry "dims" (TuningDims.h). Files of another format are a definite mismatch.
constexpr int kFormatVersion = 2;

std::string printJson(const json::Value& v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << v;  // objects print with sorted keys: the canonical form the hash covers
  os.flush();
  return s;
}

json::Value metadataJson(const TuningMetadata& m) {
  return json::Object{{"gpu", m.gpuName},           {"compute_capability", m.computeCapability},
                      {"sm_count", m.smCount},      {"driver", m.driverVersion},
                      {"nvrtc", m.nvrtcVersion},    {"generator", m.generatorVersion}};
}

std::optional<TuningMetadata> metadataFrom(const json::Object* o) {
  if (!o) return std::nullopt;
  auto gpu = o->getString("gpu"), drv = o->getString("driver"), nv = o->getString("nvrtc");
  auto cc = o->getInteger("compute_capability"), sms = o->getInteger("sm_count"), gen = o->getInteger("generator");
  if (!gpu || !drv || !nv || !cc || !sms || !gen) return std::nullopt;
  TuningMetadata m;
  m.gpuName = gpu->str();
  m.driverVersion = drv->str();
  m.nvrtcVersion = nv->str();
  m.computeCapability = int(*cc);
  m.smCount = int(*sms);
  m.generatorVersion = int(*gen);
  return m;
}

json::Value timingJson(const CandidateTiming& t) {
  json::Object o{{"median_us", t.medianUs}, {"min_us", t.minUs},   {"p90_us", t.p90Us},
                 {"samples", t.samples},    {"checked", t.checked}, {"check_ok", t.checkOk}};
  if (!t.error.empty()) o["error"] = t.error;
  if (!t.measuredAt.empty()) o["measured_at"] = t.measuredAt;
  return o;
}

std::optional<CandidateTiming> timingFrom(const json::Object* o) {
  if (!o) return std::nullopt;
  CandidateTiming t;
  auto med = o->getNumber("median_us"), mn = o->getNumber("min_us"), p90 = o->getNumber("p90_us");
  auto n = o->getInteger("samples");
  auto checked = o->getBoolean("checked"), ok = o->getBoolean("check_ok");
  if (!med || !mn || !p90 || !n || !checked || !ok) return std::nullopt;
  t.medianUs = *med;
  t.minUs = *mn;
  t.p90Us = *p90;
  t.samples = int(*n);
  t.checked = *checked;
  t.checkOk = *ok;
  if (auto e = o->getString("error")) t.error = e->str();
  if (auto m = o->getString("measured_at")) t.measuredAt = m->str();
  return t;
}


// A tuning file's envelope: format tag, content hash, metadata.
struct FileCheck {
  enum Kind { Ok, Corrupt, OtherFormat } kind = Corrupt;
  std::string why;
  json::Value value = nullptr;  // the parsed file (content under "content")
  TuningMetadata md;
};

FileCheck checkFile(const std::string& text) {
  FileCheck fc;
  auto parsed = parseJsonInput(text);
  if (!parsed.ok()) {
    fc.why = fmt::format("is not valid JSON ({})", parsed.error().message);
    return fc;
  }
  fc.value = std::move(*parsed);
  const json::Object* top = fc.value.getAsObject();
  if (!top) return fc.why = "is not a JSON object", fc;
  auto format = top->getString("format");
  if (!format || !format->starts_with(kFormatPrefix)) return fc.why = "has no deepinfer-jit tuning format tag", fc;
  const std::string fv = format->drop_front(sizeof(kFormatPrefix) - 1).str();
  char* end = nullptr;
  const long version = std::strtol(fv.c_str(), &end, 10);
  if (fv.empty() || *end != '\0' || version < 1) return fc.why = fmt::format("has an unknown format '{}'", format->str()), fc;
  if (version != kFormatVersion) {
    fc.kind = FileCheck::OtherFormat;
    fc.why = fmt::format("was written in {} format ({}; this build reads {}{})",
                         version > kFormatVersion ? "a newer" : "an older", format->str(), kFormatPrefix,
                         kFormatVersion);
    return fc;
  }
  const json::Value* content = top->get("content");
  auto hash = top->getString("content_sha256");
  if (!content || !content->getAsObject() || !hash) return fc.why = "lacks its content or content hash", fc;
  if (sha256Hex(printJson(*content)) != hash->str()) return fc.why = "fails its content hash (corrupt or edited)", fc;
  auto md = metadataFrom(content->getAsObject()->getObject("metadata"));
  if (!md) return fc.why = "has incomplete metadata", fc;
  fc.md = *md;
  fc.kind = FileCheck::Ok;
  return fc;
}

}  // namespace

// ---- metadata and keys ---------------------------------------------------------------------

TuningMetadata TuningMetadata::forLocalGpu(const TargetProfile& local) {
  TuningMetadata m;
  m.gpuName = local.gpuName;
  m.computeCapability = local.arch();
  m.smCount = local.smCount;
  m.driverVersion = local.driverVersion;
  m.nvrtcVersion = nvrtcVersionString();
  return m;
}

std::vector<std::string> TuningMetadata::differences(const TuningMetadata& o) const {
  std::vector<std::string> d;
  if (gpuName != o.gpuName) d.push_back("gpu");
  if (computeCapability != o.computeCapability) d.push_back("compute capability");
  if (smCount != o.smCount) d.push_back("SM count");
  if (driverVersion != o.driverVersion) d.push_back("driver");
  if (nvrtcVersion != o.nvrtcVersion) d.push_back("NVRTC");
  if (generatorVersion != o.generatorVersion) d.push_back("generator version");
  return d;
}

std::string TuningMetadata::hash() const { return sha256Hex(printJson(metadataJson(*this))).substr(0, 16); }

std::string TuningMetadata::describe() const {
  return fmt::format("{} (cc {}, {} SMs), driver {}, NVRTC {}, generator {}", gpuName, computeCapability, smCount,
                     driverVersion, nvrtcVersion, generatorVersion);
}

std::string TuningKey::str() const { return fmt::format("{}|{}|{}|{}|{}", target, op, dtypes, bucket, dims); }

std::optional<std::map<std::string, int64_t>> parseConfigString(const std::string& s) {
  std::map<std::string, int64_t> c;
  std::istringstream in(s);
  for (std::string kv; std::getline(in, kv, ',');) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) return std::nullopt;
    const std::string v = kv.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (errno != 0 || end != v.c_str() + v.size()) return std::nullopt;
    c[kv.substr(0, eq)] = n;
  }
  return c;
}

// ---- the cache -----------------------------------------------------------------------------

std::string TuningCache::defaultDir() { return BinaryCache::defaultDir() + "/tuning"; }

Result<TuningCache> TuningCache::open(const TuningMetadata& md, const std::string& dir,
                                      std::vector<std::string>* warnings) {
  if (dir.empty()) return Error{"the tuning directory is empty"};
  auto resolved = openPrivateDir(dir, /*create=*/true);
  if (!resolved.ok()) return resolved.error();
  TuningCache c;
  c.md_ = md;
  c.dir_ = *resolved;
  c.path_ = fmt::format("{}/{}.json", c.dir_, md.hash());
  auto warn = [&](const std::string& w) {
    if (warnings) warnings->push_back(fmt::format("tuning file {}: {}", c.path_, w));
  };
  struct stat st;
  if (::stat(c.path_.c_str(), &st) != 0 && errno == ENOENT) return c;  // no file yet
  auto read = readFileBounded(c.path_, kMaxTuningFileBytes, "tuning file");
  FileCheck fc;
  if (read.ok()) fc = checkFile(*read);
  else fc.why = read.error().message;
  auto corrupt = [&](const std::string& why) {
    warn(fmt::format("{}; treated as corrupt, starting empty (it is replaced on the next save)", why));
    c.entries_.clear();
    c.roofline_ = {};
    return c;
  };
  if (fc.kind == FileCheck::Corrupt) return corrupt(fc.why);
  if (fc.kind == FileCheck::OtherFormat) {
    c.foreign_ = true;
    warn(fmt::format("{}; ignored and left as it is", fc.why));
    return c;
  }
  const json::Object& body = *fc.value.getAsObject()->getObject("content");
  if (auto diff = md.differences(fc.md); !diff.empty()) {
    c.foreign_ = true;
    std::string what;
    for (const auto& d : diff) what += (what.empty() ? "" : ", ") + d;
    warn(fmt::format("was written for {} (differs in {}); ignored and never overwritten", fc.md.describe(), what));
    return c;
  }
  if (const json::Object* r = body.getObject("roofline")) {
    c.roofline_.copyGBs = r->getNumber("copy_gbs").value_or(0);
    c.roofline_.mmaTflops = r->getNumber("mma_tflops").value_or(0);
    if (auto m = r->getString("measured_at")) c.roofline_.measuredAt = m->str();
  }
  const json::Array* entries = body.getArray("entries");
  if (!entries) return corrupt("has no entries list");
  for (const json::Value& ev : *entries) {
    const json::Object* e = ev.getAsObject();
    if (!e) return corrupt("has an entry that is not an object");
    auto target = e->getString("target"), op = e->getString("op"), dt = e->getString("dtypes"),
         bucket = e->getString("bucket"), dims = e->getString("dims");
    const json::Object* timings = e->getObject("timings");
    if (!target || !op || !dt || !bucket || !dims || !timings)
      return corrupt("has an entry without its key or timings");
    TuningKey k{target->str(), op->str(), dt->str(), bucket->str(), dims->str()};
    TuningEntry te;
    if (auto d = e->getString("default")) te.defaultConfig = d->str();
    if (auto w = e->getString("winner")) te.winner = w->str();
    if (auto sh = e->getString("shape")) te.shape = sh->str();
    te.bytes = e->getNumber("bytes").value_or(0);
    te.flops = e->getNumber("flops").value_or(0);
    for (const auto& [cfg, tv] : *timings) {
      auto t = timingFrom(tv.getAsObject());
      if (!t) return corrupt(fmt::format("has a malformed timing for {} config '{}'", k.str(), cfg.str()));
      te.timings[cfg.str()] = *t;
    }
    c.entries_[k] = std::move(te);
  }
  return c;
}

const TuningEntry* TuningCache::find(const TuningKey& k) const {
  auto it = entries_.find(k);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> TuningCache::untimed(const TuningKey& k, const std::vector<std::string>& candidates) const {
  const TuningEntry* e = find(k);
  std::vector<std::string> out;
  for (const auto& c : candidates)
    if (!e || !e->timings.count(c)) out.push_back(c);
  return out;
}

void TuningCache::setDefault(const TuningKey& k, const std::string& config) { entries_[k].defaultConfig = config; }

void TuningCache::chooseWinner(TuningEntry& e) const {
  const CandidateTiming* best = nullptr;
  std::string bestCfg;
  for (const auto& [cfg, t] : e.timings)
    if (t.eligible() && (!best || t.medianUs < best->medianUs)) {
      best = &t;
      bestCfg = cfg;
    }
  auto cur = e.timings.find(e.winner);
  if (e.winner.empty() || cur == e.timings.end() || !cur->second.eligible()) {
    e.winner = best ? bestCfg : "";
    return;
  }
  // Hysteresis: the incumbent stays unless beaten by more than the margin.
  if (best && bestCfg != e.winner && best->medianUs < cur->second.medianUs * (1.0 - margin_)) e.winner = bestCfg;
}

bool TuningCache::record(const TuningKey& k, const std::string& config, const CandidateTiming& t) {
  TuningEntry& e = entries_[k];
  const std::string before = e.winner;
  e.timings[config] = t;
  chooseWinner(e);
  return e.winner != before;
}

std::optional<std::string> TuningCache::winner(const TuningKey& k) const {
  const TuningEntry* e = find(k);
  if (!e || e->winner.empty()) return std::nullopt;
  return e->winner;
}

std::string TuningCache::serialize() const {
  json::Array entries;
  for (const auto& [k, e] : entries_) {
    json::Object timings;
    for (const auto& [cfg, t] : e.timings) timings[cfg] = timingJson(t);
    entries.push_back(json::Object{{"target", k.target},
                                   {"op", k.op},
                                   {"dtypes", k.dtypes},
                                   {"bucket", k.bucket},
                                   {"dims", k.dims},
                                   {"default", e.defaultConfig},
                                   {"winner", e.winner},
                                   {"shape", e.shape},
                                   {"bytes", e.bytes},
                                   {"flops", e.flops},
                                   {"timings", std::move(timings)}});
  }
  json::Object content{{"metadata", metadataJson(md_)}, {"entries", std::move(entries)}};
  if (roofline_.copyGBs > 0 || roofline_.mmaTflops > 0)
    content["roofline"] = json::Object{{"copy_gbs", roofline_.copyGBs},
                                       {"mma_tflops", roofline_.mmaTflops},
                                       {"measured_at", roofline_.measuredAt}};
  json::Value cv(std::move(content));
  const std::string hash = sha256Hex(printJson(cv));
  json::Value top(json::Object{{"format", fmt::format("{}{}", kFormatPrefix, kFormatVersion)},
                               {"content_sha256", hash},
                               {"content", std::move(cv)}});
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", top);
  os.flush();
  return s + "\n";
}

Result<std::string> TuningCache::contentHash(const std::string& contentJson) {
  auto v = parseJsonInput(contentJson);
  if (!v.ok()) return Error{fmt::format("not JSON: {}", v.error().message)};
  return sha256Hex(printJson(*v));
}

Result<TuningMetadata> TuningCache::inspect(const std::string& text) {
  FileCheck fc = checkFile(text);
  if (fc.kind != FileCheck::Ok) return Error{fc.why};
  return fc.md;
}

static Status writeAtomically(const std::string& dir, const std::string& path, const std::string& body) {
  std::random_device rd;
  const std::string tmp = fmt::format("{}/.staged.{}.{:x}.tmp", dir, ::getpid(), rd());
  return publishAtomically(tmp, path, body);
}

Result<bool> TuningCache::importFile(const std::string& dir, const std::string& name, const std::string& text,
                                     bool replace) {
  auto md = inspect(text);
  if (!md.ok()) return Error{fmt::format("tuning file {} {}", name, md.error().message)};
  if (name != md->hash() + ".json")
    return Error{fmt::format("tuning file {} is named for another key (its metadata, {}, gives {}.json)", name,
                             md->describe(), md->hash())};
  auto resolved = openPrivateDir(dir, /*create=*/true);
  if (!resolved.ok()) return resolved.error();
  const std::string path = fmt::format("{}/{}", *resolved, name);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    auto existing = readFileBounded(path, kMaxTuningFileBytes, "tuning file");
    if (existing.ok() && *existing == text) return false;
    if (!replace) return Error{fmt::format("{} exists with other contents; kept (--replace replaces it)", path)};
  }
  DI_TRY(writeAtomically(*resolved, path, text));
  return true;
}

std::vector<std::string> TuningCache::listFiles(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() == 21 && n.substr(16) == ".json" && n[0] != '.') out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status TuningCache::save() const {
  if (foreign_)
    return Error{fmt::format("{} belongs to another GPU, driver, NVRTC or generator version; not overwriting it",
                             path_)};
  return writeAtomically(dir_, path_, serialize());
}

}  // namespace deepinfer
