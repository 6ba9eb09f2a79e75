#include "deepinfer/JsonInput.h"

#include <fmt/format.h>

#include <set>
#include <vector>

namespace deepinfer {
namespace {

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A string token starting after its opening quote at `i`; returns the index of the closing quote
// (text.size() when unterminated) and its decoded value, so "\u0061" and "a" are one key.
size_t scanString(llvm::StringRef text, size_t i, std::string* decoded) {
  uint32_t pendingHigh = 0;
  while (i < text.size() && text[i] != '"') {
    char c = text[i];
    if (c != '\\') {
      *decoded += c;
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) return text.size();
    const char e = text[i + 1];
    if (e == 'u' && i + 5 < text.size()) {
      uint32_t cp = 0;
      bool ok = true;
      for (size_t k = 2; k < 6; ++k) {
        const int h = hexValue(text[i + k]);
        ok &= h >= 0;
        cp = cp * 16 + uint32_t(h < 0 ? 0 : h);
      }
      if (!ok) return text.size();  // malformed: the real parser reports it
      if (cp >= 0xD800 && cp < 0xDC00) {
        pendingHigh = cp;
      } else if (cp >= 0xDC00 && cp < 0xE000 && pendingHigh) {
        appendUtf8(*decoded, 0x10000 + ((pendingHigh - 0xD800) << 10) + (cp - 0xDC00));
        pendingHigh = 0;
      } else {
        appendUtf8(*decoded, cp);
      }
      i += 6;
      continue;
    }
    switch (e) {
      case 'b': *decoded += '\b'; break;
      case 'f': *decoded += '\f'; break;
      case 'n': *decoded += '\n'; break;
      case 'r': *decoded += '\r'; break;
      case 't': *decoded += '\t'; break;
      default: *decoded += e; break;  // \" \\ \/ (others are the parser's to reject)
    }
    i += 2;
  }
  return i;
}

// Depth and duplicate keys, without recursion. Malformed text is left to the parser.
Status scanStructure(llvm::StringRef text) {
  struct Frame {
    bool object;
    bool expectKey;
    std::set<std::string> keys;
  };
  std::vector<Frame> stack;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      std::string s;
      const size_t close = scanString(text, i + 1, &s);
      if (close >= text.size()) return {};
      if (!stack.empty() && stack.back().object && stack.back().expectKey) {
        if (!stack.back().keys.insert(s).second)
          return Error{fmt::format("duplicate key \"{}\" at byte {} (an object may hold a name once)",
                                   s.size() > 80 ? s.substr(0, 80) + "..." : s, i)};
        stack.back().expectKey = false;
      }
      i = close;
    } else if (c == '{' || c == '[') {
      if (int(stack.size()) >= kMaxJsonDepth)
        return Error{fmt::format("JSON nested deeper than {} levels at byte {}", kMaxJsonDepth, i)};
      stack.push_back(Frame{c == '{', c == '{', {}});
    } else if (c == '}' || c == ']') {
      if (stack.empty()) return {};
      stack.pop_back();
    } else if (c == ',') {
      if (!stack.empty() && stack.back().object) stack.back().expectKey = true;
    }
  }
  return {};
}

}  // namespace

Result<llvm::json::Value> parseJsonInput(llvm::StringRef text) {
  DI_TRY(scanStructure(text));
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  if (!v) return Error{llvm::toString(v.takeError())};
  return std::move(*v);
}

}  // namespace deepinfer
