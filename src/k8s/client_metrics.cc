// rest_client_requests_total, counted per attempt.
#include "k8s/client_metrics.h"

#include <string>

namespace gg::k8s {

RequestHook RestClientMetrics(metrics::Registry& registry) {
  auto* family =
      &registry.AddCounter("rest_client_requests_total",
                           "Number of HTTP requests, partitioned by status code, method, and host.",
                           {"code", "method", "host"});
  return [family](std::string_view method, std::string_view code, std::string_view host) {
    family->WithLabels({code, method, host}).Inc();
  };
}

const RequestHook& DefaultRequestHook() {
  static const RequestHook hook = RestClientMetrics(metrics::DefaultRegistry());
  return hook;
}

}  // namespace gg::k8s
