#include "ReportText.h"

#include <cctype>
#include <ctime>
#include <fmt/format.h>

namespace deepinfer::bench {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string utcNow(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, &tm);
  return buf;
}

std::string slug(const std::string& name) {
  std::string s;
  for (unsigned char ch : name) {
    if (std::isalnum(ch)) s += char(std::tolower(ch));
    else if (!s.empty() && s.back() != '-') s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "gpu" : s;
}

std::string js(const std::string& s) {
  std::string o = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (ch < 0x20) o += fmt::format("\\u{:04x}", ch);
        else o += char(ch);
    }
  }
  return o + "\"";
}

}  // namespace deepinfer::bench
