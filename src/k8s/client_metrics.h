// controller-runtime-style client metrics for a RestClient: rest_client_requests_total
// {code,method,host}. Plug the returned hook into RestClientOptions::on_request.
#pragma once

#include <functional>
#include <string_view>

#include "metrics/registry.h"

namespace gg::k8s {

using RequestHook =
    std::function<void(std::string_view method, std::string_view code, std::string_view host)>;

// Declares rest_client_requests_total on `registry` (idempotent) and returns the hook. The
// registry must outlive every client using the hook.
RequestHook RestClientMetrics(metrics::Registry& registry);

// The hook every RestClient without its own on_request uses: rest_client_requests_total on
// metrics::DefaultRegistry(), the registry each binary serves on /metrics — like
// controller-runtime, whose client metrics live in its process-wide registry. Declared on
// first use.
const RequestHook& DefaultRequestHook();

}  // namespace gg::k8s
