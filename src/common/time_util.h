// Time formatting/parsing used on the wire: RFC 3339 (Kubernetes metav1.Time / MicroTime)
// and Go-style durations ("90s", "10m", "1h30m") as used in policies and flags.
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace gg {

// "2026-11-29T22:36:53Z" (seconds precision, metav1.Time).
std::string FormatRfc3339(WallTime t);
// "2026-11-29T22:36:53.123456Z" (metav1.MicroTime).
std::string FormatRfc3339Micro(WallTime t);
// Accepts "Z" or "+hh:mm"/"-hh:mm" offsets and optional fractional seconds.
StatusOr<WallTime> ParseRfc3339(std::string_view s);

// Go time.ParseDuration subset: sequence of <number><unit>, units ns us ms s m h; "0" allowed.
StatusOr<Duration> ParseDuration(std::string_view s);
// Shortest Go-style rendering: "1h30m0s" style is avoided; gives "90m" -> "1h30m", "45s".
std::string FormatDuration(Duration d);

// A positive duration flag of a main() ("5m", "200ms") into `out`; on error prints
// `<flag>: invalid duration "<text>" (want e.g. 10s, 5m)` to stderr and returns false.
bool ParseDurationFlag(std::string_view flag, std::string_view text, Duration* out);

}  // namespace gg
