// Small text helpers the benchmark programs share for their reports: wall-clock seconds, UTC
// timestamps, file-name slugs and JSON string literals.
#pragma once
#include <chrono>
#include <string>

namespace deepinfer::bench {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t);
// The current UTC time through strftime (e.g. "%Y-%m-%dT%H:%M:%SZ").
std::string utcNow(const char* format);
// "NVIDIA H200" -> "nvidia-h200" (for result file names).
std::string slug(const std::string& name);
// A JSON string literal with the escapes RFC 8259 requires.
std::string js(const std::string& s);

}  // namespace deepinfer::bench
