// Registry, metric types and the Prometheus text exposition (format 0.0.4).
#include "metrics/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <variant>

#include "common/log.h"

namespace gg::metrics {

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// ---- series -------------------------------------------------------------------------

void Counter::Inc(double v) {
  if (!(v > 0)) return;  // also drops NaN
  value_.fetch_add(v, std::memory_order_relaxed);
}

Gauge::~Gauge() { delete callback_.load(); }

void Gauge::SetCallback(std::function<double()> fn) {
  Callback* c = callback_.load(std::memory_order_acquire);
  if (!c) {
    if (!fn) return;
    auto fresh = std::make_unique<Callback>();
    if (callback_.compare_exchange_strong(c, fresh.get(), std::memory_order_acq_rel)) {
      c = fresh.release();
    }  // else another SetCallback won: `c` is its Callback
  }
  std::scoped_lock lock(c->mu);  // waits for a scrape running the old callback
  c->fn = std::move(fn);
}

double Gauge::Value() const {
  if (Callback* c = callback_.load(std::memory_order_acquire)) {
    std::scoped_lock lock(c->mu);
    if (c->fn) return c->fn();
  }
  return value_.load(std::memory_order_relaxed);
}

Histogram::Histogram(std::shared_ptr<const std::vector<double>> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_->size() + 1)) {}

void Histogram::Observe(double v) {
  if (std::isnan(v)) return;
  const auto& b = *bounds_;
  // First bound >= v (le is inclusive); past the end is the +Inf bucket.
  std::size_t i = static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), v) - b.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Snap() const {
  Snapshot s;
  s.bounds = *bounds_;
  s.cumulative.resize(bounds_->size() + 1);
  std::uint64_t acc = 0;
  for (std::size_t i = 0; i <= bounds_->size(); ++i) {
    acc += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = acc;
  }
  // Count derives from the buckets so that +Inf == count always holds in one scrape.
  s.count = acc;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> DefaultBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) return DefaultBuckets();
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(count));
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

std::vector<double> LinearBuckets(double start, double width, int count) {
  if (!(width > 0) || count < 1) return DefaultBuckets();
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) out.push_back(start + width * i);
  return out;
}

// ---- families -----------------------------------------------------------------------

template <typename T>
T& Family<T>::WithLabels(std::initializer_list<std::string_view> values) {
  LabelValues v;
  v.reserve(values.size());
  for (auto s : values) v.emplace_back(s);
  return Lookup(std::move(v));
}

template <typename T>
T& Family<T>::WithLabels(const LabelValues& values) {
  return Lookup(values);
}

template <typename T>
T& Family<T>::Lookup(LabelValues values) {
  std::scoped_lock lock(mu_);
  if (values.size() != label_names_.size()) {
    if (!detached_) {
      detached_ = MakeSeries();
      Logger().Error("metric used with the wrong number of label values",
                     {{"metric", name_},
                      {"want", static_cast<int>(label_names_.size())},
                      {"got", static_cast<int>(values.size())}});
    }
    return *detached_;
  }
  auto it = series_.find(values);
  if (it == series_.end()) it = series_.emplace(std::move(values), MakeSeries()).first;
  return *it->second;
}

template <typename T>
bool Family<T>::Remove(const LabelValues& values) {
  std::scoped_lock lock(mu_);
  return series_.erase(values) > 0;
}

template <typename T>
std::vector<std::pair<LabelValues, const T*>> Family<T>::Series() const {
  std::scoped_lock lock(mu_);
  std::vector<std::pair<LabelValues, const T*>> out;
  out.reserve(series_.size());
  for (const auto& [k, v] : series_) out.emplace_back(k, v.get());
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names, std::vector<double> buckets)
    : Family(std::move(name), std::move(help), std::move(label_names)) {
  // Sorted, unique, finite bounds; +Inf is implicit.
  std::vector<double> b;
  for (double x : buckets)
    if (std::isfinite(x)) b.push_back(x);
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  bounds_ = std::make_shared<const std::vector<double>>(std::move(b));
}

// ---- registry -----------------------------------------------------------------------

struct Registry::Entry {
  MetricType type;
  std::vector<std::string> label_names;
  std::unique_ptr<CounterFamily> counter;
  std::unique_ptr<GaugeFamily> gauge;
  std::unique_ptr<HistogramFamily> histogram;
  std::unique_ptr<KeyedGaugeFamily> keyed;
  // Callback series (no labels).
  std::string name;
  std::string help;
  std::function<double()> callback;
};

namespace {

bool ValidHelp(std::string& help, const std::string& name) {
  if (!help.empty()) return true;
  Logger().Error("metric declared without help text", {{"metric", name}});
  help = name;
  return false;
}

}  // namespace

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::Entry* Registry::Find(std::string_view name) const {
  auto it = families_.find(name);
  return it == families_.end() ? nullptr : it->second.get();
}

Registry::Entry* Registry::Declared(const std::string& name, MetricType type,
                                    const std::vector<std::string>& label_names, bool* valid,
                                    bool keyed) const {
  *valid = *valid && IsValidMetricName(name);
  if (!*valid) return nullptr;
  Entry* e = Find(name);
  if (e && e->type == type && !e->callback && e->label_names == label_names &&
      (e->keyed != nullptr) == keyed) {
    return e;
  }
  if (e) *valid = false;  // the name is taken by another type, labels or a callback
  return nullptr;
}

void Registry::Keep(const std::string& name, std::unique_ptr<Entry> e, bool valid) {
  if (valid) {
    families_.emplace(name, std::move(e));
  } else {
    Logger().Error("invalid or conflicting metric declaration; not exposed", {{"metric", name}});
    detached_.push_back(std::move(e));
  }
}

CounterFamily& Registry::AddCounter(std::string name, std::string help,
                                    std::vector<std::string> label_names) {
  ValidHelp(help, name);
  std::scoped_lock lock(mu_);
  bool valid = std::all_of(label_names.begin(), label_names.end(), IsValidLabelName);
  if (Entry* found = Declared(name, MetricType::kCounter, label_names, &valid))
    return *found->counter;
  auto e = std::make_unique<Entry>();
  e->type = MetricType::kCounter;
  e->label_names = label_names;
  e->counter = std::make_unique<CounterFamily>(name, std::move(help), std::move(label_names));
  CounterFamily& out = *e->counter;
  Keep(name, std::move(e), valid);
  return out;
}

GaugeFamily& Registry::AddGauge(std::string name, std::string help,
                                std::vector<std::string> label_names) {
  ValidHelp(help, name);
  std::scoped_lock lock(mu_);
  bool valid = std::all_of(label_names.begin(), label_names.end(), IsValidLabelName);
  if (Entry* found = Declared(name, MetricType::kGauge, label_names, &valid)) return *found->gauge;
  auto e = std::make_unique<Entry>();
  e->type = MetricType::kGauge;
  e->label_names = label_names;
  e->gauge = std::make_unique<GaugeFamily>(name, std::move(help), std::move(label_names));
  GaugeFamily& out = *e->gauge;
  Keep(name, std::move(e), valid);
  return out;
}

HistogramFamily& Registry::AddHistogram(std::string name, std::string help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> buckets) {
  ValidHelp(help, name);
  std::scoped_lock lock(mu_);
  bool valid = std::all_of(label_names.begin(), label_names.end(), [](const std::string& l) {
    return IsValidLabelName(l) && l != "le";  // "le" is the bucket label
  });
  if (Entry* found = Declared(name, MetricType::kHistogram, label_names, &valid)) {
    return *found->histogram;
  }
  auto e = std::make_unique<Entry>();
  e->type = MetricType::kHistogram;
  e->label_names = label_names;
  e->histogram = std::make_unique<HistogramFamily>(name, std::move(help), std::move(label_names),
                                                   std::move(buckets));
  HistogramFamily& out = *e->histogram;
  Keep(name, std::move(e), valid);
  return out;
}

KeyedGaugeFamily& Registry::AddKeyedGauge(std::string name, std::string help,
                                          std::string label_name) {
  ValidHelp(help, name);
  std::scoped_lock lock(mu_);
  std::vector<std::string> label_names{label_name};
  bool valid = IsValidLabelName(label_name);
  if (Entry* found = Declared(name, MetricType::kGauge, label_names, &valid, /*keyed=*/true)) {
    return *found->keyed;
  }
  auto e = std::make_unique<Entry>();
  e->type = MetricType::kGauge;
  e->label_names = std::move(label_names);
  e->keyed = std::make_unique<KeyedGaugeFamily>(name, std::move(help), std::move(label_name));
  KeyedGaugeFamily& out = *e->keyed;
  Keep(name, std::move(e), valid);
  return out;
}

void KeyedGaugeFamily::Set(std::string_view key, double v) {
  std::scoped_lock lock(mu_);
  auto it = series_.begin() + (Find(key) - series_.cbegin());
  if (it != series_.end() && it->first == key) {
    it->second = v;
  } else {
    series_.emplace(it, std::string(key), v);
  }
}

bool KeyedGaugeFamily::Remove(std::string_view key) {
  std::scoped_lock lock(mu_);
  auto it = Find(key);
  if (it == series_.end() || it->first != key) return false;
  series_.erase(it);
  if (series_.capacity() > 64 && series_.size() < series_.capacity() / 4) series_.shrink_to_fit();
  return true;
}

std::optional<double> KeyedGaugeFamily::Get(std::string_view key) const {
  std::scoped_lock lock(mu_);
  auto it = Find(key);
  if (it == series_.end() || it->first != key) return std::nullopt;
  return it->second;
}

std::size_t KeyedGaugeFamily::Size() const {
  std::scoped_lock lock(mu_);
  return series_.size();
}

void KeyedGaugeFamily::ForEach(const std::function<void(const std::string&, double)>& fn) const {
  std::scoped_lock lock(mu_);
  for (const auto& [k, v] : series_) fn(k, v);
}

std::vector<KeyedGaugeFamily::Series>::const_iterator KeyedGaugeFamily::Find(
    std::string_view key) const {
  // The common case first: the key sorts after every series (a fleet added in name order).
  if (series_.empty() || series_.back().first < key) return series_.end();
  return std::lower_bound(series_.begin(), series_.end(), key,
                          [](const Series& s, std::string_view k) { return s.first < k; });
}

void Registry::AddCallback(std::string name, std::string help, MetricType type,
                           std::function<double()> fn) {
  ValidHelp(help, name);
  std::scoped_lock lock(mu_);
  if (!IsValidMetricName(name) || type == MetricType::kHistogram || !fn || Find(name)) {
    Logger().Error("invalid or conflicting callback metric; not exposed", {{"metric", name}});
    return;
  }
  auto e = std::make_unique<Entry>();
  e->type = type;
  e->name = name;
  e->help = std::move(help);
  e->callback = std::move(fn);
  families_.emplace(std::move(name), std::move(e));
}

namespace {

void AppendLabels(std::string& out, const std::vector<std::string>& names,
                  const LabelValues& values, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (!first) out += ',';
    first = false;
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

void AppendHeader(std::string& out, const std::string& name, const std::string& help,
                  MetricType type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += EscapeHelp(help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += MetricTypeName(type);
  out += '\n';
}

void AppendSample(std::string& out, std::string_view name, std::string_view suffix,
                  const std::vector<std::string>& names, const LabelValues& values, double v,
                  std::string_view extra_name = {}, std::string_view extra_value = {}) {
  out += name;
  out += suffix;
  AppendLabels(out, names, values, extra_name, extra_value);
  out += ' ';
  out += FormatValue(v);
  out += '\n';
}

}  // namespace

std::string Registry::ExposeText() const {
  std::vector<Entry*> entries;
  {
    std::scoped_lock lock(mu_);
    for (const auto& [_, e] : families_) entries.push_back(e.get());
  }
  // Entries are never removed, so they can be read without holding mu_ (callbacks may be
  // slow, e.g. /proc reads).
  std::string out;
  out.reserve(4096);
  for (Entry* e : entries) {
    if (e->callback) {
      AppendHeader(out, e->name, e->help, e->type);
      AppendSample(out, e->name, "", {}, {}, e->callback());
      continue;
    }
    if (e->keyed) {
      const auto& f = *e->keyed;
      AppendHeader(out, f.name(), f.help(), e->type);
      LabelValues values(1);
      f.ForEach([&](const std::string& key, double v) {
        values[0] = key;
        AppendSample(out, f.name(), "", f.label_names(), values, v);
      });
      continue;
    }
    switch (e->type) {
      case MetricType::kCounter: {
        const auto& f = *e->counter;
        AppendHeader(out, f.name(), f.help(), e->type);
        for (const auto& [labels, c] : f.Series())
          AppendSample(out, f.name(), "", f.label_names(), labels, c->Value());
        break;
      }
      case MetricType::kGauge: {
        const auto& f = *e->gauge;
        AppendHeader(out, f.name(), f.help(), e->type);
        for (const auto& [labels, g] : f.Series())
          AppendSample(out, f.name(), "", f.label_names(), labels, g->Value());
        break;
      }
      case MetricType::kHistogram: {
        const auto& f = *e->histogram;
        AppendHeader(out, f.name(), f.help(), e->type);
        for (const auto& [labels, h] : f.Series()) {
          Histogram::Snapshot s = h->Snap();
          for (std::size_t i = 0; i < s.bounds.size(); ++i)
            AppendSample(out, f.name(), "_bucket", f.label_names(), labels,
                         static_cast<double>(s.cumulative[i]), "le", FormatValue(s.bounds[i]));
          AppendSample(out, f.name(), "_bucket", f.label_names(), labels,
                       static_cast<double>(s.count), "le", "+Inf");
          AppendSample(out, f.name(), "_sum", f.label_names(), labels, s.sum);
          AppendSample(out, f.name(), "_count", f.label_names(), labels,
                       static_cast<double>(s.count));
        }
        break;
      }
    }
  }
  return out;
}

bool Registry::Contains(std::string_view name) const {
  std::scoped_lock lock(mu_);
  return Find(name) != nullptr;
}

double Registry::Value(std::string_view name, const LabelValues& values) const {
  Entry* e;
  {
    std::scoped_lock lock(mu_);
    e = Find(name);
  }
  if (!e) return std::numeric_limits<double>::quiet_NaN();
  if (e->callback) return values.empty() ? e->callback() : std::numeric_limits<double>::quiet_NaN();
  auto find = [&](const auto& family) -> double {
    for (const auto& [labels, s] : family.Series())
      if (labels == values) return s->Value();
    return std::numeric_limits<double>::quiet_NaN();
  };
  if (e->keyed) {
    auto v = values.size() == 1 ? e->keyed->Get(values[0]) : std::nullopt;
    return v.value_or(std::numeric_limits<double>::quiet_NaN());
  }
  if (e->counter) return find(*e->counter);
  if (e->gauge) return find(*e->gauge);
  if (e->histogram) {
    for (const auto& [labels, h] : e->histogram->Series())
      if (labels == values) return static_cast<double>(h->Snap().count);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

Registry& DefaultRegistry() {
  static Registry* r = new Registry();  // never destroyed: outlives all users
  return *r;
}

// ---- format helpers -----------------------------------------------------------------

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

bool IsValidMetricName(std::string_view name) {
  if (name.empty() || !(IsAlpha(name[0]) || name[0] == ':')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAlpha(c) || IsDigit(c) || c == ':'; });
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || !IsAlpha(name[0])) return false;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return false;  // reserved
  return std::all_of(name.begin(), name.end(), [](char c) { return IsAlpha(c) || IsDigit(c); });
}

}  // namespace gg::metrics
