// Projection helpers: LabelMap storage, ownership, label selector matching.
#include "k8s/objects.h"

#include <algorithm>

namespace gg::k8s {

namespace {
// Walks the packed buffer; fn(key, value, entry_begin, entry_end) returns true to stop.
template <typename Fn>
void Walk(const std::string& buf, Fn&& fn) {
  std::size_t pos = 0;
  while (pos < buf.size()) {
    std::size_t k_end = buf.find('\0', pos);
    if (k_end == std::string::npos) return;
    std::size_t v_end = buf.find('\0', k_end + 1);
    if (v_end == std::string::npos) return;
    std::string_view key(buf.data() + pos, k_end - pos);
    std::string_view value(buf.data() + k_end + 1, v_end - k_end - 1);
    if (fn(key, value, pos, v_end + 1)) return;
    pos = v_end + 1;
  }
}
}  // namespace

LabelMap::LabelMap(std::initializer_list<std::pair<std::string_view, std::string_view>> init) {
  for (const auto& [k, v] : init) Set(k, v);
}

std::optional<std::string_view> LabelMap::Get(std::string_view key) const {
  std::optional<std::string_view> out;
  Walk(buf_, [&](std::string_view k, std::string_view v, std::size_t, std::size_t) {
    if (k == key) {
      out = v;
      return true;
    }
    return false;
  });
  return out;
}

bool LabelMap::Set(std::string_view key, std::string_view value) {
  if (key.find('\0') != std::string_view::npos || value.find('\0') != std::string_view::npos) {
    return false;
  }
  Erase(key);
  buf_.append(key);
  buf_.push_back('\0');
  buf_.append(value);
  buf_.push_back('\0');
  ++count_;
  return true;
}

bool LabelMap::Erase(std::string_view key) {
  std::size_t begin = 0, end = 0;
  bool found = false;
  Walk(buf_, [&](std::string_view k, std::string_view, std::size_t b, std::size_t e) {
    if (k == key) {
      begin = b;
      end = e;
      found = true;
      return true;
    }
    return false;
  });
  if (!found) return false;
  buf_.erase(begin, end - begin);
  --count_;
  return true;
}

void LabelMap::ForEach(const std::function<void(std::string_view, std::string_view)>& fn) const {
  Walk(buf_, [&](std::string_view k, std::string_view v, std::size_t, std::size_t) {
    fn(k, v);
    return false;
  });
}

std::map<std::string, std::string> LabelMap::ToMap() const {
  std::map<std::string, std::string> out;
  ForEach([&](std::string_view k, std::string_view v) { out.emplace(k, v); });
  return out;
}

bool operator==(const LabelMap& a, const LabelMap& b) {
  return a.count_ == b.count_ && a.ToMap() == b.ToMap();
}

const OwnerReference* ObjectMeta::Controller() const {
  for (const auto& r : owner_references) {
    if (r.controller) return &r;
  }
  return nullptr;
}

std::string ObjectMeta::Key() const {
  if (namespace_.empty()) return name;
  std::string k;
  k.reserve(namespace_.size() + 1 + name.size());
  k += namespace_;
  k += '/';
  k += name;
  return k;
}

const NodeCondition* Node::FindCondition(std::string_view type) const {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

const Taint* Node::FindTaint(std::string_view key) const {
  for (const auto& t : taints) {
    if (t.key == key) return &t;
  }
  return nullptr;
}

std::string_view Pod::ControllerKind() const {
  const OwnerReference* c = meta.Controller();
  return c ? std::string_view(c->kind) : std::string_view();
}

bool LabelSelector::Matches(const LabelMap& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto got = labels.Get(k);
    if (!got || *got != v) return false;
  }
  for (const auto& req : match_expressions) {
    auto got = labels.Get(req.key);
    bool in = got && std::find(req.values.begin(), req.values.end(), *got) != req.values.end();
    if (req.op == "In") {
      if (!in) return false;
    } else if (req.op == "NotIn") {
      if (in) return false;
    } else if (req.op == "Exists") {
      if (!got) return false;
    } else if (req.op == "DoesNotExist") {
      if (got) return false;
    } else {
      return false;  // unknown operator never matches (Validate reports it)
    }
  }
  return true;
}

std::string LabelSelector::ToQuery() const {
  std::string out;
  auto sep = [&] {
    if (!out.empty()) out += ',';
  };
  for (const auto& [k, v] : match_labels) {
    sep();
    out += k + "=" + v;
  }
  for (const auto& req : match_expressions) {
    sep();
    if (req.op == "Exists") {
      out += req.key;
    } else if (req.op == "DoesNotExist") {
      out += "!" + req.key;
    } else {
      std::vector<std::string> vals = req.values;
      std::sort(vals.begin(), vals.end());
      out += req.key + (req.op == "In" ? " in (" : " notin (");
      for (std::size_t i = 0; i < vals.size(); ++i) {
        if (i) out += ',';
        out += vals[i];
      }
      out += ')';
    }
  }
  return out;
}

Status LabelSelector::Validate() const {
  for (const auto& req : match_expressions) {
    if (req.key.empty()) return InvalidArgumentError("matchExpressions: empty key");
    if (req.op == "In" || req.op == "NotIn") {
      if (req.values.empty()) {
        return InvalidArgumentError("matchExpressions[" + req.key + "]: " + req.op +
                                    " needs values");
      }
    } else if (req.op == "Exists" || req.op == "DoesNotExist") {
      if (!req.values.empty()) {
        return InvalidArgumentError("matchExpressions[" + req.key + "]: " + req.op +
                                    " takes no values");
      }
    } else {
      return InvalidArgumentError("matchExpressions[" + req.key + "]: unknown operator \"" +
                                  req.op + "\"");
    }
  }
  return OkStatus();
}

std::string_view WatchEventTypeName(WatchEventType t) {
  switch (t) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

}  // namespace gg::k8s
