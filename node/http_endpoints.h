// /healthz and /metrics (Prometheus text) over plain HTTP on their own port (cpp-httplib),
// for a load balancer, Kubernetes probes and a Prometheus scraper. Bind to loopback or a
// management network: the endpoints carry no patient data but are not authenticated.
// start() returns once the port is bound; stop() joins. Thread-safe.
#pragma once

#include "core/status.h"

#include <functional>
#include <memory>
#include <string>

namespace voxseg::node {

class HttpEndpoints {
  public:
    ~HttpEndpoints();
    // `health` returns the JSON body and whether the node is healthy (200, else 503).
    static Result<std::unique_ptr<HttpEndpoints>> start(
        const std::string& bind, int port, std::function<std::pair<bool, std::string>()> health,
        std::function<std::string()> metrics);
    void stop();

    struct Impl;

  private:
    explicit HttpEndpoints(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace voxseg::node
