// Table-driven protobuf decoding of Kubernetes objects (see protobuf.h).
#include "sim/protobuf.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "common/time_util.h"

#ifndef GG_SIM_DATA_DIR
#define GG_SIM_DATA_DIR "src/sim/data"
#endif

namespace gg::sim {

using nlohmann::json;

namespace {

constexpr std::string_view kMagic("k8s\0", 4);
constexpr std::string_view kMeta = "k8s.io.apimachinery.pkg.apis.meta.v1.";

struct Field {
  std::string name, type;
  bool repeated = false;
  bool omit_zero = false;
};
using Message = std::map<int, Field>;

// The generated table, loaded once.
const std::map<std::string, Message, std::less<>>* Table(Status* err) {
  static std::once_flag once;
  static std::map<std::string, Message, std::less<>> table;
  static Status status;
  std::call_once(once, [] {
    std::string path = std::string(GG_SIM_DATA_DIR) + "/protobuf/messages.json";
    std::ifstream in(path);
    if (!in) {
      status = NotFoundError("protobuf message table not found: " + path);
      return;
    }
    json j = json::parse(in, nullptr, false);
    if (!j.is_object()) {
      status = InternalError("protobuf message table is not JSON: " + path);
      return;
    }
    for (const auto& [name, m] : j.items()) {
      Message msg;
      for (const auto& [num, f] : m["fields"].items())
        msg[std::stoi(num)] = Field{f[0].get<std::string>(), f[1].get<std::string>(),
                                    f[2].get<std::string>() == "rep", f[3].get<bool>()};
      table.emplace(name, std::move(msg));
    }
  });
  if (!status.ok()) {
    *err = status;
    return nullptr;
  }
  return &table;
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool done() const { return s_.empty(); }
  std::optional<std::uint64_t> Varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64 && !s_.empty(); shift += 7) {
      auto c = static_cast<unsigned char>(s_.front());
      s_.remove_prefix(1);
      v |= static_cast<std::uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
    return std::nullopt;
  }
  std::optional<std::string_view> Bytes(std::size_t n) {
    if (n > s_.size()) return std::nullopt;
    auto out = s_.substr(0, n);
    s_.remove_prefix(n);
    return out;
  }

 private:
  std::string_view s_;
};

Status Malformed(std::string_view message, std::string_view why) {
  return InvalidArgumentError("malformed protobuf " + std::string(message) + ": " +
                              std::string(why));
}

// A raw field value: varint, fixed 32/64 bits, or length-delimited bytes.
struct Raw {
  int wire = 0;
  std::uint64_t num = 0;
  std::string_view bytes;
};

StatusOr<json> DecodeValue(const Raw& raw, const std::string& type, std::string_view msg_name);

// Standard base64 with padding: how Go's encoding/json writes []byte.
std::string StdBase64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                 (static_cast<unsigned char>(in[i + 1]) << 8) |
                 static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// The length-delimited field `num` of a message (the last one wins, as in protobuf).
std::optional<std::string_view> BytesField(std::string_view msg, int num) {
  Reader r(msg);
  std::optional<std::string_view> out;
  while (!r.done()) {
    auto key = r.Varint();
    if (!key) return std::nullopt;
    int wire = static_cast<int>(*key & 7);
    if (wire == 0) {
      if (!r.Varint()) return std::nullopt;
    } else if (wire == 2) {
      auto n = r.Varint();
      auto b = n ? r.Bytes(static_cast<std::size_t>(*n)) : std::nullopt;
      if (!b) return std::nullopt;
      if (static_cast<int>(*key >> 3) == num) out = *b;
    } else if (wire == 1 || wire == 5) {
      if (!r.Bytes(wire == 1 ? 8 : 4)) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return out ? out : std::string_view();
}

StatusOr<json> DecodeScalar(const Raw& raw, const std::string& type, std::string_view msg) {
  if (type == "string") {
    if (raw.wire != 2)
      return Malformed(msg, "string field with wire type " + std::to_string(raw.wire));
    return json(std::string(raw.bytes));
  }
  if (type == "bytes") {
    if (raw.wire != 2)
      return Malformed(msg, "bytes field with wire type " + std::to_string(raw.wire));
    return json(StdBase64(raw.bytes));
  }
  if (type == "bool") return json(raw.num != 0);
  if (type == "int32") return json(static_cast<std::int32_t>(static_cast<std::uint32_t>(raw.num)));
  if (type == "int64") return json(static_cast<std::int64_t>(raw.num));
  if (type == "uint32" || type == "uint64" || type == "fixed32" || type == "fixed64")
    return json(raw.num);
  if (type == "sint32" || type == "sint64")
    return json(static_cast<std::int64_t>((raw.num >> 1) ^ (~(raw.num & 1) + 1)));
  if (type == "double") {
    double d;
    std::memcpy(&d, &raw.num, sizeof d);
    return json(d);
  }
  if (type == "float") {
    auto bits = static_cast<std::uint32_t>(raw.num);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return json(static_cast<double>(f));
  }
  return Malformed(msg, "unsupported scalar type " + type);
}

bool IsScalar(const std::string& t) {
  return t.find('.') == std::string::npos && t.rfind("map<", 0) != 0;
}

bool IsZero(const json& v) {
  return (v.is_string() && v.get_ref<const std::string&>().empty()) || (v.is_number() && v == 0) ||
         (v.is_boolean() && !v.get<bool>());
}

// The well-known wrapper types of apimachinery, which JSON writes as plain values.
std::optional<StatusOr<json>> DecodeSpecial(std::string_view bytes, std::string_view type) {
  auto fields = [&](std::string_view m) -> StatusOr<json> {
    return DecodeProtobufMessage(bytes, m);
  };
  if (type == std::string(kMeta) + "Time" || type == std::string(kMeta) + "MicroTime") {
    auto j = fields(type);
    if (!j.ok()) return j.status();
    std::int64_t secs = j->value("seconds", std::int64_t{0});
    std::int64_t nanos = j->value("nanos", std::int64_t{0});
    if (secs == 0 && nanos == 0) return json(nullptr);  // the zero time is `null` in JSON
    WallTime t{std::chrono::duration_cast<WallTime::duration>(std::chrono::seconds(secs) +
                                                              std::chrono::nanoseconds(nanos))};
    return json(type.ends_with("MicroTime") ? FormatRfc3339Micro(t) : FormatRfc3339(t));
  }
  if (type == std::string(kMeta) + "Duration") {
    auto j = fields(type);
    if (!j.ok()) return j.status();
    return json(FormatDuration(std::chrono::duration_cast<Duration>(
        std::chrono::nanoseconds(j->value("duration", std::int64_t{0})))));
  }
  if (type == "k8s.io.apimachinery.pkg.util.intstr.IntOrString") {
    auto j = fields(type);
    if (!j.ok()) return j.status();
    if (j->value("type", 0) == 1) return json(j->value("strVal", ""));
    return json(j->value("intVal", 0));
  }
  if (type == "k8s.io.apimachinery.pkg.api.resource.Quantity") {
    auto j = fields(type);
    if (!j.ok()) return j.status();
    return json(j->value("string", ""));
  }
  if (type == std::string(kMeta) + "FieldsV1" ||
      type == "k8s.io.apimachinery.pkg.runtime.RawExtension") {
    auto raw = BytesField(bytes, 1);
    if (!raw) return Malformed(type, "truncated");
    if (raw->empty()) return json(nullptr);
    json v = json::parse(*raw, nullptr, false);
    if (v.is_discarded()) return Malformed(type, "embedded JSON does not parse");
    return v;
  }
  return std::nullopt;
}

StatusOr<json> DecodeValue(const Raw& raw, const std::string& type, std::string_view msg) {
  if (IsScalar(type)) return DecodeScalar(raw, type, msg);
  if (raw.wire != 2)
    return Malformed(msg, "message field of type " + type + " is not length-delimited");
  if (auto sp = DecodeSpecial(raw.bytes, type)) return std::move(*sp);
  return DecodeProtobufMessage(raw.bytes, type);
}

}  // namespace

bool HasProtobufMagic(std::string_view body) { return body.substr(0, 4) == kMagic; }

namespace {

// One field's key and value: its number, and its wire type with the varint, fixed or
// length-delimited value.
Status ReadField(Reader& r, std::string_view message, int* num, Raw* raw) {
  auto key = r.Varint();
  if (!key) return Malformed(message, "truncated field key");
  *num = static_cast<int>(*key >> 3);
  raw->wire = static_cast<int>(*key & 7);
  switch (raw->wire) {
    case 0: {
      auto v = r.Varint();
      if (!v) return Malformed(message, "truncated varint");
      raw->num = *v;
      return OkStatus();
    }
    case 1: {
      auto b = r.Bytes(8);
      if (!b) return Malformed(message, "truncated fixed64");
      std::memcpy(&raw->num, b->data(), 8);
      return OkStatus();
    }
    case 5: {
      auto b = r.Bytes(4);
      if (!b) return Malformed(message, "truncated fixed32");
      std::uint32_t v;
      std::memcpy(&v, b->data(), 4);
      raw->num = v;
      return OkStatus();
    }
    case 2: {
      auto n = r.Varint();
      if (!n) return Malformed(message, "truncated length");
      auto b = r.Bytes(static_cast<std::size_t>(*n));
      if (!b) return Malformed(message, "length beyond the end of the body");
      raw->bytes = *b;
      return OkStatus();
    }
    default:
      return Malformed(message, "unsupported wire type " + std::to_string(raw->wire));
  }
}

// map<K,V>: a repeated entry message {1: key, 2: value}, one key of the JSON object.
Status DecodeMapEntry(const Raw& raw, const Field& f, std::string_view message, json& out) {
  auto comma = f.type.find(',');
  std::string ktype = f.type.substr(4, comma - 4);
  std::string vtype = f.type.substr(comma + 1, f.type.size() - comma - 2);
  if (raw.wire != 2) return Malformed(message, f.name + ": map entry is not length-delimited");
  Reader er(raw.bytes);
  json k = "", v = IsScalar(vtype) ? json("") : json::object();
  if (vtype == "bytes") v = "";
  while (!er.done()) {
    auto ek = er.Varint();
    if (!ek) return Malformed(message, f.name + ": truncated map entry");
    Raw ev;
    ev.wire = static_cast<int>(*ek & 7);
    if (ev.wire == 0) {
      auto x = er.Varint();
      if (!x) return Malformed(message, f.name + ": truncated map entry");
      ev.num = *x;
    } else if (ev.wire == 2) {
      auto n = er.Varint();
      auto b = n ? er.Bytes(static_cast<std::size_t>(*n)) : std::nullopt;
      if (!b) return Malformed(message, f.name + ": truncated map entry");
      ev.bytes = *b;
    } else {
      return Malformed(message, f.name + ": unsupported map entry wire type");
    }
    int en = static_cast<int>(*ek >> 3);
    auto dv = DecodeValue(ev, en == 1 ? ktype : vtype, message);
    if (!dv.ok()) return dv.status();
    (en == 1 ? k : v) = std::move(*dv);
  }
  if (!out.contains(f.name)) out[f.name] = json::object();
  out[f.name][k.is_string() ? k.get<std::string>() : k.dump()] = std::move(v);
  return OkStatus();
}

// One occurrence of a repeated field: an element, or packed scalars.
Status DecodeRepeated(const Raw& raw, const Field& f, std::string_view message, json& out) {
  if (!out.contains(f.name)) out[f.name] = json::array();
  if (raw.wire != 2 || !IsScalar(f.type) || f.type == "string" || f.type == "bytes") {
    auto dv = DecodeValue(raw, f.type, message);
    if (!dv.ok()) return dv.status();
    out[f.name].push_back(std::move(*dv));
    return OkStatus();
  }
  Reader pr(raw.bytes);
  while (!pr.done()) {
    Raw e;
    auto x = pr.Varint();
    if (!x) return Malformed(message, f.name + ": truncated packed value");
    e.num = *x;
    auto dv = DecodeScalar(e, f.type, message);
    if (!dv.ok()) return dv.status();
    out[f.name].push_back(std::move(*dv));
  }
  return OkStatus();
}

}  // namespace

StatusOr<json> DecodeProtobufMessage(std::string_view bytes, std::string_view message) {
  Status err;
  const auto* table = Table(&err);
  if (!table) return err;
  auto it = table->find(message);
  if (it == table->end())
    return UnimplementedError("no protobuf description of " + std::string(message));
  const Message& m = it->second;
  json out = json::object();
  Reader r(bytes);
  while (!r.done()) {
    int num = 0;
    Raw raw;
    GG_RETURN_IF_ERROR(ReadField(r, message, &num, &raw));
    auto fit = m.find(num);
    if (fit == m.end())
      return InvalidArgumentError("unknown field number " + std::to_string(num) + " in " +
                                  std::string(message));
    const Field& f = fit->second;
    if (f.type.rfind("map<", 0) == 0) {
      GG_RETURN_IF_ERROR(DecodeMapEntry(raw, f, message, out));
      continue;
    }
    if (f.repeated) {
      GG_RETURN_IF_ERROR(DecodeRepeated(raw, f, message, out));
      continue;
    }
    auto dv = DecodeValue(raw, f.type, message);
    if (!dv.ok()) return dv.status();
    if (f.omit_zero && IsScalar(f.type) && IsZero(*dv)) continue;
    out[f.name] = std::move(*dv);
  }
  return out;
}

std::string ProtobufMessageFor(std::string_view api_version, std::string_view kind) {
  std::string group, version(api_version);
  if (auto slash = api_version.find('/'); slash != std::string_view::npos) {
    group = api_version.substr(0, slash);
    version = api_version.substr(slash + 1);
  }
  std::string name;
  if (kind == "DeleteOptions" || kind == "Status") {
    name = std::string(kMeta) + std::string(kind);
  } else {
    std::string pkg = group.empty() ? "core" : group.substr(0, group.find('.'));
    name = "k8s.io.api." + pkg + "." + version + "." + std::string(kind);
  }
  Status err;
  const auto* table = Table(&err);
  if (!table || !table->count(name)) return "";
  return name;
}

StatusOr<json> DecodeK8sProtobuf(std::string_view body) {
  if (!HasProtobufMagic(body))
    return InvalidArgumentError("protobuf body without the \"k8s\\x00\" prefix");
  auto unknown = DecodeProtobufMessage(body.substr(4), "k8s.io.apimachinery.pkg.runtime.Unknown");
  if (!unknown.ok()) return unknown.status();
  std::string api_version, kind;
  if (unknown->contains("typeMeta")) {
    api_version = (*unknown)["typeMeta"].value("apiVersion", "");
    kind = (*unknown)["typeMeta"].value("kind", "");
  }
  std::string enc = unknown->value("contentEncoding", "");
  if (!enc.empty()) return InvalidArgumentError("unsupported protobuf content encoding " + enc);
  std::string msg = ProtobufMessageFor(api_version, kind);
  if (msg.empty())
    return UnimplementedError("no protobuf description of " + kind + " in " + api_version);
  auto raw = BytesField(body.substr(4), 2);
  if (!raw) return InvalidArgumentError("malformed protobuf envelope");
  auto obj = DecodeProtobufMessage(*raw, msg);
  if (!obj.ok()) return obj.status();
  json out = {{"apiVersion", api_version}, {"kind", kind}};
  for (auto& [k, v] : obj->items()) out[k] = std::move(v);
  return out;
}

void ProtobufWriter::RawVarint(std::uint64_t v) {
  while (v >= 0x80) {
    out_ += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out_ += static_cast<char>(v);
}

void ProtobufWriter::Varint(int field, std::uint64_t v) {
  RawVarint(static_cast<std::uint64_t>(field) << 3);
  RawVarint(v);
}

void ProtobufWriter::Double(int field, double v) {
  RawVarint((static_cast<std::uint64_t>(field) << 3) | 1);
  std::uint64_t bits;
  std::memcpy(&bits, &v, 8);
  for (int i = 0; i < 8; ++i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
}

void ProtobufWriter::Bytes(int field, std::string_view v) {
  RawVarint((static_cast<std::uint64_t>(field) << 3) | 2);
  RawVarint(v.size());
  out_.append(v);
}

StatusOr<std::vector<ProtobufField>> ReadProtobufFields(std::string_view message) {
  std::vector<ProtobufField> out;
  Reader r(message);
  while (!r.done()) {
    ProtobufField f;
    Raw raw;
    Status s = ReadField(r, "message", &f.number, &raw);
    if (!s.ok()) return s;
    f.wire = raw.wire;
    f.num = raw.num;
    f.bytes = raw.bytes;
    out.push_back(f);
  }
  return out;
}

}  // namespace gg::sim
