// RFC 3339 and duration helpers.
#include "common/time_util.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace gg {
namespace {

std::string FormatImpl(WallTime t, bool micro) {
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(t);
  if (secs > t) secs -= std::chrono::seconds(1);
  std::time_t tt = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  if (micro) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - secs).count();
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(us));
  } else {
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

bool ReadInt(std::string_view s, size_t& pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  pos += n;
  out = v;
  return true;
}

bool Expect(std::string_view s, size_t& pos, char c) {
  if (pos >= s.size() || (s[pos] != c && !(c == 'T' && (s[pos] == 't' || s[pos] == ' '))))
    return false;
  ++pos;
  return true;
}

}  // namespace

std::string FormatRfc3339(WallTime t) { return FormatImpl(t, false); }
std::string FormatRfc3339Micro(WallTime t) { return FormatImpl(t, true); }

StatusOr<WallTime> ParseRfc3339(std::string_view s) {
  size_t pos = 0;
  int y, mo, d, h, mi, sec;
  auto bad = [&] {
    return InvalidArgumentError("invalid RFC 3339 time \"" + std::string(s) + "\"");
  };
  if (!ReadInt(s, pos, 4, y) || !Expect(s, pos, '-') || !ReadInt(s, pos, 2, mo) ||
      !Expect(s, pos, '-') || !ReadInt(s, pos, 2, d) || !Expect(s, pos, 'T') ||
      !ReadInt(s, pos, 2, h) || !Expect(s, pos, ':') || !ReadInt(s, pos, 2, mi) ||
      !Expect(s, pos, ':') || !ReadInt(s, pos, 2, sec))
    return bad();
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return bad();
  // system_clock counts nanoseconds in 64 bits: years outside ~1678..2261 do not fit.
  if (y < 1678 || y > 2261) return bad();
  long long nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      if (digits < 9) {
        nanos = nanos * 10 + (s[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) return bad();
    while (digits++ < 9) nanos *= 10;
  }
  int offset_min = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int sign = s[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!ReadInt(s, pos, 2, oh) || !Expect(s, pos, ':') || !ReadInt(s, pos, 2, om)) return bad();
    offset_min = sign * (oh * 60 + om);
  } else {
    return bad();
  }
  if (pos != s.size()) return bad();
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  std::time_t tt = timegm(&tm);
  WallTime t = std::chrono::system_clock::from_time_t(tt) - std::chrono::minutes(offset_min);
  return t + std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(nanos));
}

StatusOr<Duration> ParseDuration(std::string_view s) {
  auto bad = [&] {
    return InvalidArgumentError("invalid duration \"" + std::string(s) +
                                "\" (want e.g. 30s, 10m, 1h30m)");
  };
  if (s.empty()) return bad();
  if (s == "0") return Duration(0);
  size_t pos = 0;
  long double total_ns = 0;
  while (pos < s.size()) {
    size_t start = pos;
    while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.'))
      ++pos;
    if (start == pos) return bad();
    long double value = 0;
    try {
      value = std::stold(std::string(s.substr(start, pos - start)));
    } catch (...) {
      return bad();
    }
    size_t ustart = pos;
    while (pos < s.size() && std::isalpha(static_cast<unsigned char>(s[pos]))) ++pos;
    std::string_view unit = s.substr(ustart, pos - ustart);
    long double mult;
    if (unit == "ns")
      mult = 1;
    else if (unit == "us" || unit == "µs")
      mult = 1e3;
    else if (unit == "ms")
      mult = 1e6;
    else if (unit == "s")
      mult = 1e9;
    else if (unit == "m")
      mult = 60e9;
    else if (unit == "h")
      mult = 3600e9;
    else
      return bad();
    total_ns += value * mult;
  }
  if (total_ns > 9.2e18L) return bad();
  return Duration(static_cast<long long>(total_ns));
}

std::string FormatDuration(Duration d) {
  using namespace std::chrono;
  if (d.count() == 0) return "0s";
  std::string out;
  if (d < Duration(0)) {
    out = "-";
    d = -d;
  }
  if (d < seconds(1)) {
    if (d % milliseconds(1) == Duration(0)) return out + std::to_string(d / milliseconds(1)) + "ms";
    return out + std::to_string(d.count()) + "ns";
  }
  auto h = duration_cast<hours>(d);
  d -= h;
  auto m = duration_cast<minutes>(d);
  d -= m;
  auto s = duration_cast<seconds>(d);
  d -= s;
  if (h.count()) out += std::to_string(h.count()) + "h";
  if (m.count()) out += std::to_string(m.count()) + "m";
  if (s.count() || d.count()) {
    out += std::to_string(s.count());
    if (d.count()) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), ".%03lld", static_cast<long long>(d / milliseconds(1)));
      out += buf;
    }
    out += "s";
  }
  return out;
}

bool ParseDurationFlag(std::string_view flag, std::string_view text, Duration* out) {
  auto d = ParseDuration(text);
  if (!d.ok() || *d <= Duration::zero()) {
    std::fprintf(stderr, "%.*s: invalid duration \"%.*s\" (want e.g. 10s, 5m)\n",
                 static_cast<int>(flag.size()), flag.data(), static_cast<int>(text.size()),
                 text.data());
    return false;
  }
  *out = *d;
  return true;
}

}  // namespace gg
