// Hand-written scanner for NVIDIA kernel-log lines (no regex: the kmsg flood target is 100k
// lines/s). Every index is bounds-checked; any input is safe.
#include "gpu/kmsg_parser.h"

#include <charconv>
#include <cstdio>

#include "common/strings.h"

namespace gg::gpu {
namespace {

constexpr size_t kMaxMessage = 1024;

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

template <typename T>
bool ParseUint(std::string_view s, T* out, int base = 10) {
  if (s.empty()) return false;
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  *out = v;
  return true;
}

// Reads a run of decimal digits at `s` (advancing it); false when none / overflow.
template <typename T>
bool TakeDecimal(std::string_view& s, T* out) {
  size_t n = 0;
  while (n < s.size() && IsDigit(s[n])) ++n;
  if (n == 0 || !ParseUint(s.substr(0, n), out)) return false;
  s.remove_prefix(n);
  return true;
}

bool Consume(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

std::string ClipMessage(std::string_view s) {
  s = TrimSpace(s);
  if (s.size() > kMaxMessage) s = s.substr(0, kMaxMessage);
  return std::string(s);
}

// "<pri>,<seq>,<ts>,<flags>[,...];" header of a /dev/kmsg record.
bool ParseKmsgHeader(std::string_view& line, KmsgXid* out) {
  std::string_view s = line;
  unsigned pri = 0;
  uint64_t seq = 0, ts = 0;
  if (!TakeDecimal(s, &pri) || !Consume(s, ",")) return false;
  if (!TakeDecimal(s, &seq) || !Consume(s, ",")) return false;
  if (!TakeDecimal(s, &ts) || !Consume(s, ",")) return false;
  size_t semi = s.find(';');
  if (semi == std::string_view::npos || s.substr(0, semi).find('\n') != std::string_view::npos)
    return false;
  out->kmsg_seq = seq;
  out->ts_usec = ts;
  line = s.substr(semi + 1);
  return true;
}

// "[ 1234.567890] " dmesg prefix -> µs.
void ParseDmesgTimestamp(std::string_view line, KmsgXid* out) {
  size_t open = line.find('[');
  if (open == std::string_view::npos || open > 64) return;
  std::string_view s = line.substr(open + 1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  uint64_t sec = 0, usec = 0;
  if (!TakeDecimal(s, &sec) || !Consume(s, ".")) return;
  size_t n = 0;
  while (n < s.size() && IsDigit(s[n])) ++n;
  if (n == 0 || n > 9 || n >= s.size() || s[n] != ']') return;
  if (!ParseUint(s.substr(0, n), &usec)) return;
  for (size_t i = n; i < 6; ++i) usec *= 10;
  for (size_t i = 6; i < n; ++i) usec /= 10;
  if (sec > 1'000'000'000'000ULL) return;
  out->ts_usec = sec * 1'000'000 + usec;
}

// Takes a PCI token ([0-9a-fA-F:.]+) from the front of s.
std::string_view TakePciToken(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && (IsHex(s[n]) || s[n] == ':' || s[n] == '.')) ++n;
  std::string_view tok = s.substr(0, n);
  s.remove_prefix(n);
  while (!tok.empty() && (tok.back() == ':' || tok.back() == '.')) tok.remove_suffix(1);
  return tok;
}

bool SetPci(std::string_view tok, KmsgXid* out) {
  uint32_t d = 0, b = 0, dev = 0, f = 0;
  if (!ParsePciBusId(tok, &d, &b, &dev, &f)) return false;
  out->pci_domain = d;
  out->pci_bus = b;
  out->pci_device = dev;
  out->pci_function = f;
  out->pci_bus_id = FormatPciBusId(d, b, dev, f);
  return true;
}

// Optional " Link NN" and "Fatal"/"Nonfatal"/"Non-fatal" details in a message.
void ParseLinkAndSeverity(std::string_view msg, KmsgXid* out) {
  size_t link = msg.find("Link ");
  if (link != std::string_view::npos) {
    std::string_view s = msg.substr(link + 5);
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    int v = 0;
    if (TakeDecimal(s, &v)) out->link = v;
  }
  if (msg.find("Non-fatal") != std::string_view::npos ||
      msg.find("Nonfatal") != std::string_view::npos ||
      msg.find("Non-Fatal") != std::string_view::npos) {
    out->fatal = false;
  } else if (msg.find("Fatal") != std::string_view::npos) {
    out->fatal = true;
  }
}

// After "NVRM: Xid (".
bool ParseXidBody(std::string_view s, KmsgXid* out) {
  Consume(s, "PCI:");
  std::string_view pci = TakePciToken(s);
  if (!SetPci(pci, out)) return false;
  // MIG attribution: " GPU-I:NN" [" GPU-CI:NN"].
  while (!s.empty() && s.front() == ' ') {
    s.remove_prefix(1);
    uint32_t v = 0;
    if (Consume(s, "GPU-I:")) {
      if (!TakeDecimal(s, &v)) return false;
      out->gpu_instance = v;
    } else if (Consume(s, "GPU-CI:")) {
      if (!TakeDecimal(s, &v)) return false;
      out->compute_instance = v;
    } else {
      // Unknown attribution token: skip to ')' rather than reject the Xid.
      size_t close = s.find(')');
      if (close == std::string_view::npos) return false;
      s.remove_prefix(close);
    }
  }
  if (!Consume(s, "):")) return false;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  int xid = 0;
  if (!TakeDecimal(s, &xid)) return false;
  out->xid = xid;
  // Minimal lines end right after the number.
  if (!Consume(s, ",")) {
    if (!TrimSpace(s).empty()) return false;  // "79abc": not an Xid line
    return true;
  }
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  if (Consume(s, "pid=")) {
    size_t comma = s.find(',');
    std::string_view pid = TrimSpace(s.substr(0, comma));
    int64_t v = 0;
    if (ParseUint(pid, &v)) out->pid = v;  // "'<unknown>'" stays absent
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    if (Consume(s, "name=")) {
      size_t c2 = s.find(',');
      std::string_view name = TrimSpace(s.substr(0, c2));
      if (name != "<unknown>" && name != "'<unknown>'") out->process_name = std::string(name);
      s = c2 == std::string_view::npos ? std::string_view() : s.substr(c2 + 1);
    }
  }
  out->message = ClipMessage(s);
  if (out->xid >= 144 && out->xid <= 150) ParseLinkAndSeverity(out->message, out);
  return true;
}

// "nvidia-nvswitchN: SXid (PCI:...): NNNNN, Fatal|Non-fatal, Link NN ..." starting at the
// "nvidia-nvswitch" text.
bool ParseSxid(std::string_view s, KmsgXid* out) {
  if (!Consume(s, "nvidia-nvswitch")) return false;
  int sw = 0;
  if (!TakeDecimal(s, &sw)) return false;
  out->nvswitch = sw;
  if (!Consume(s, ": SXid (")) return false;
  Consume(s, "PCI:");
  std::string_view pci = TakePciToken(s);
  if (!SetPci(pci, out)) return false;
  if (!Consume(s, "):")) return false;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  int sxid = 0;
  if (!TakeDecimal(s, &sxid)) return false;
  out->xid = sxid;
  out->sxid = true;
  if (Consume(s, ",")) {
    std::string_view rest = TrimSpace(s);
    if (Consume(rest, "Fatal")) {
      out->fatal = true;
    } else if (Consume(rest, "Non-fatal")) {
      out->fatal = false;
    }
    out->message = ClipMessage(s);
    size_t link = out->message.find("Link ");
    if (link != std::string::npos) {
      std::string_view l = std::string_view(out->message).substr(link + 5);
      int v = 0;
      if (TakeDecimal(l, &v)) out->link = v;
    }
  }
  return true;
}

// "NVRM: GPU 0000:18:00.0: GPU has fallen off the bus." or the multi-line
// "NVRM: The NVIDIA GPU 0000:b3:00.0\x0aNVRM: (PCI ID: ...) ...fallen off the bus ...".
bool ParseFallenOff(std::string_view msg, KmsgXid* out) {
  if (msg.find("fallen off the bus") == std::string_view::npos) return false;
  size_t at = msg.find("NVRM: The NVIDIA GPU ");
  std::string_view s;
  if (at != std::string_view::npos) {
    s = msg.substr(at + 21);
  } else if ((at = msg.find("NVRM: GPU ")) != std::string_view::npos) {
    s = msg.substr(at + 10);
    Consume(s, "at ");
    Consume(s, "PCI:");
  } else {
    return false;
  }
  std::string_view pci = TakePciToken(s);
  out->xid = 79;
  out->fallen_off_bus = true;
  if (!SetPci(pci, out)) {
    // Keep the signal even when the address is unreadable; it will not map to a GPU.
    out->pci_bus_id.clear();
  }
  out->message = "GPU has fallen off the bus";
  return true;
}

}  // namespace

std::string FormatPciBusId(uint32_t domain, uint32_t bus, uint32_t device, uint32_t function) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus & 0xff, device & 0xff,
                function & 0xf);
  return buf;
}

bool ParsePciBusId(std::string_view text, uint32_t* domain, uint32_t* bus, uint32_t* device,
                   uint32_t* function) {
  // Split on ':' into 2 or 3 parts; the last part may carry ".function".
  std::string_view parts[3];
  int n = 0;
  size_t start = 0;
  while (true) {
    size_t colon = text.find(':', start);
    if (n >= 3) return false;
    if (colon == std::string_view::npos) {
      parts[n++] = text.substr(start);
      break;
    }
    parts[n++] = text.substr(start, colon - start);
    start = colon + 1;
  }
  if (n < 2) return false;
  std::string_view dom = n == 3 ? parts[0] : std::string_view("0");
  std::string_view b = parts[n - 2];
  std::string_view last = parts[n - 1];
  std::string_view fn = "0";
  size_t dot = last.find('.');
  if (dot != std::string_view::npos) {
    fn = last.substr(dot + 1);
    last = last.substr(0, dot);
  }
  if (dom.empty() || dom.size() > 8 || b.empty() || b.size() > 2 || last.empty() ||
      last.size() > 2 || fn.empty() || fn.size() > 1)
    return false;
  for (std::string_view p : {dom, b, last, fn})
    for (char c : p)
      if (!IsHex(c)) return false;
  uint32_t d = 0, bb = 0, dv = 0, f = 0;
  if (!ParseUint(dom, &d, 16) || !ParseUint(b, &bb, 16) || !ParseUint(last, &dv, 16) ||
      !ParseUint(fn, &f, 16) || f > 7)
    return false;
  *domain = d;
  *bus = bb;
  *device = dv;
  if (function) *function = f;
  return true;
}

std::optional<KmsgXid> ParseKmsgLine(std::string_view line) {
  // Cheap rejection first: nearly every line of a flood is not ours.
  const size_t nvrm = line.find("NVRM");
  const size_t sx = nvrm == std::string_view::npos ? line.find("SXid") : std::string_view::npos;
  if (nvrm == std::string_view::npos && sx == std::string_view::npos) return std::nullopt;

  KmsgXid out;
  std::string_view msg = line;
  if (!msg.empty() && IsDigit(msg.front())) {
    if (!ParseKmsgHeader(msg, &out)) msg = line;
  } else {
    ParseDmesgTimestamp(line, &out);
  }
  // A kmsg record's dictionary lines (" SUBSYSTEM=pci") follow a real newline.
  if (size_t nl = msg.find('\n'); nl != std::string_view::npos) msg = msg.substr(0, nl);

  if (size_t at = msg.find("NVRM: Xid ("); at != std::string_view::npos) {
    if (ParseXidBody(msg.substr(at + 11), &out)) return out;
    return std::nullopt;
  }
  if (size_t at = msg.find("nvidia-nvswitch");
      at != std::string_view::npos && msg.find("SXid (") != std::string_view::npos) {
    if (ParseSxid(msg.substr(at), &out)) return out;
    return std::nullopt;
  }
  if (ParseFallenOff(msg, &out)) return out;
  return std::nullopt;
}

}  // namespace gg::gpu
