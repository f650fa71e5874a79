// Metrics registry: counter / gauge / histogram families with labels and the Prometheus
// text exposition format 0.0.4, written by hand (no prometheus-cpp in Debian).
//
// Convention: one declaration table per component, every series created at zero up front:
//   auto& adds = registry.AddCounter("workqueue_adds_total", "Total adds.", {"name"});
//   Counter& my_adds = adds.WithLabels({"node"});   // cache the handle; Inc() is lock-free
//   my_adds.Inc();
// The registry is injected (constructor argument); DefaultRegistry() exists only for main()s.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gg::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };
std::string_view MetricTypeName(MetricType type);  // "counter", "gauge", "histogram"

// A monotonically increasing value. Thread-safe, lock-free.
class Counter {
 public:
  void Inc(double v = 1.0);  // negative or NaN increments are ignored (a counter never goes down)
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down; optionally computed at scrape time by a callback.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Inc(double v = 1.0) { value_.fetch_add(v, std::memory_order_relaxed); }
  void Dec(double v = 1.0) { value_.fetch_sub(v, std::memory_order_relaxed); }
  // Value() then calls `fn` (at scrape). Pass nullptr to go back to the stored value. The
  // callback must stay valid until it is cleared (owners clear it in their destructor).
  void SetCallback(std::function<double()> fn);
  double Value() const;

  Gauge() = default;
  ~Gauge();
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

 private:
  // The callback and its lock live apart, made on the first SetCallback: a per-node series
  // (gpu_guardian_node_healthy) is then 16 bytes, not 88.
  struct Callback {
    std::mutex mu;
    std::function<double()> fn;
  };
  std::atomic<double> value_{0.0};
  std::atomic<Callback*> callback_{nullptr};  // never replaced once set; freed with the gauge
};

// Observations counted into buckets with upper bounds (le); +Inf is implicit.
class Histogram {
 public:
  explicit Histogram(std::shared_ptr<const std::vector<double>> bounds);
  void Observe(double v);  // NaN is ignored

  struct Snapshot {
    std::vector<double> bounds;             // upper bounds, without +Inf
    std::vector<std::uint64_t> cumulative;  // size bounds.size() + 1 (last = +Inf = count)
    double sum = 0;
    std::uint64_t count = 0;
  };
  Snapshot Snap() const;

 private:
  std::shared_ptr<const std::vector<double>> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // per-bucket (non-cumulative) counts
  std::atomic<double> sum_{0.0};
};

// Prometheus' default buckets: .005 .01 .025 .05 .1 .25 .5 1 2.5 5 10 (seconds).
std::vector<double> DefaultBuckets();
// start, start*factor, ... (count bounds). Invalid arguments yield DefaultBuckets().
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// start, start+width, ... (count bounds).
std::vector<double> LinearBuckets(double start, double width, int count);

using LabelValues = std::vector<std::string>;

// Shared machinery of the three family kinds: label names, series by label values.
template <typename T>
class Family {
 public:
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // The series for these label values (in label-name order), created at zero on first use.
  // The reference stays valid for the registry's lifetime: cache it on hot paths. A wrong
  // number of values is a programmer error: it returns a detached series that is never
  // exposed (and logs once) rather than crashing.
  T& WithLabels(std::initializer_list<std::string_view> values);
  T& WithLabels(const LabelValues& values);
  // Removes one series (e.g. a node that left the cluster). False if absent.
  bool Remove(const LabelValues& values);

  // Every series, sorted by label values (what the exposition writes).
  std::vector<std::pair<LabelValues, const T*>> Series() const;

 protected:
  Family(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  virtual ~Family() = default;
  virtual std::unique_ptr<T> MakeSeries() const = 0;

 private:
  T& Lookup(LabelValues values);

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<T>> series_;
  std::unique_ptr<T> detached_;
};

class CounterFamily final : public Family<Counter> {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> label_names)
      : Family(std::move(name), std::move(help), std::move(label_names)) {}

 private:
  std::unique_ptr<Counter> MakeSeries() const override { return std::make_unique<Counter>(); }
};

class GaugeFamily final : public Family<Gauge> {
 public:
  GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names)
      : Family(std::move(name), std::move(help), std::move(label_names)) {}

 private:
  std::unique_ptr<Gauge> MakeSeries() const override { return std::make_unique<Gauge>(); }
};

// A gauge family of one label with a series per member of a large set (a node of the fleet:
// gpu_guardian_node_healthy): each series is a (label value, value) pair in one vector sorted
// by label value, 40 bytes a series where a GaugeFamily series costs ~160 (its map node, label
// vector and gauge). Set inserts in order (O(n) moves for a value that sorts before the last;
// fleets are listed and reconciled in name order, so mostly an append).
class KeyedGaugeFamily {
 public:
  KeyedGaugeFamily(std::string name, std::string help, std::string label_name)
      : name_(std::move(name)), help_(std::move(help)), label_names_{std::move(label_name)} {}
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  void Set(std::string_view key, double v);
  bool Remove(std::string_view key);
  std::optional<double> Get(std::string_view key) const;
  std::size_t Size() const;
  // fn(label value, value) for every series in label order, under the family's lock.
  void ForEach(const std::function<void(const std::string&, double)>& fn) const;

 private:
  using Series = std::pair<std::string, double>;
  std::vector<Series>::const_iterator Find(std::string_view key) const;  // requires mu_

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  mutable std::mutex mu_;
  std::vector<Series> series_;
};

class HistogramFamily final : public Family<Histogram> {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> buckets);
  const std::vector<double>& buckets() const { return *bounds_; }

 private:
  std::unique_ptr<Histogram> MakeSeries() const override {
    return std::make_unique<Histogram>(bounds_);
  }
  std::shared_ptr<const std::vector<double>> bounds_;
};

// Owns all families of one process (or one test). Thread-safe.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Declares a family. Help text is mandatory (empty help is replaced by the name and
  // logged). Declaring the same name again with the same type and label names returns the
  // existing family (so several work queues can share workqueue_*); a clash in type or
  // labels, or an invalid metric/label name, returns a detached family that is never
  // exposed and logs an error (programmer error, not a crash).
  CounterFamily& AddCounter(std::string name, std::string help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(std::string name, std::string help,
                        std::vector<std::string> label_names = {});
  HistogramFamily& AddHistogram(std::string name, std::string help,
                                std::vector<std::string> label_names = {},
                                std::vector<double> buckets = DefaultBuckets());
  // A label-less series whose value is computed at scrape (e.g. process RSS). `type` is
  // kCounter or kGauge. `fn` must stay valid for the registry's lifetime.
  // Same name and label again: the same family.
  KeyedGaugeFamily& AddKeyedGauge(std::string name, std::string help, std::string label_name);
  void AddCallback(std::string name, std::string help, MetricType type, std::function<double()> fn);

  // Prometheus text format 0.0.4, families sorted by name, series by label values.
  std::string ExposeText() const;

  bool Contains(std::string_view name) const;
  // Test/debug helpers: the current value of one counter/gauge series (NaN when absent).
  double Value(std::string_view name, const LabelValues& values = {}) const;

 private:
  struct Entry;
  Entry* Find(std::string_view name) const;  // requires mu_
  // The family already declared as (name, type, labels); clears *valid on a conflict (mu_).
  Entry* Declared(const std::string& name, MetricType type,
                  const std::vector<std::string>& label_names, bool* valid,
                  bool keyed = false) const;
  void Keep(const std::string& name, std::unique_ptr<Entry> e, bool valid);  // requires mu_
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>, std::less<>> families_;
  std::vector<std::unique_ptr<Entry>> detached_;
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// The process-wide registry for binaries' main(); libraries take a Registry& instead.
Registry& DefaultRegistry();

// process_resident_memory_bytes, process_virtual_memory_bytes, process_cpu_seconds_total,
// process_start_time_seconds, process_open_fds, read at scrape time from `proc_root`
// (default /proc: <root>/self/stat, <root>/stat for btime, <root>/self/fd). Unreadable or
// garbled files expose NaN, never crash. Registering twice is harmless.
void RegisterProcessMetrics(Registry& registry, std::string proc_root = "/proc");
// The parsed numbers (exposed for tests); NaN where unavailable.
struct ProcessStats {
  double resident_bytes, virtual_bytes, cpu_seconds, start_time_seconds, open_fds;
};
ProcessStats ReadProcessStats(const std::string& proc_root);

// Exposition helpers (exposed for tests and for other writers of the format).
std::string FormatValue(double v);                 // shortest round-trip; "+Inf", "-Inf", "NaN"
std::string EscapeLabelValue(std::string_view v);  // \\ \" \n
std::string EscapeHelp(std::string_view v);        // \\ \n
bool IsValidMetricName(std::string_view name);
bool IsValidLabelName(std::string_view name);

}  // namespace gg::metrics
