#include "node/http_endpoints.h"

#include <httplib.h>

#include <thread>

namespace voxseg::node {

struct HttpEndpoints::Impl {
    httplib::Server server;
    std::thread thread;
};

HttpEndpoints::HttpEndpoints(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpEndpoints::~HttpEndpoints() { stop(); }

Result<std::unique_ptr<HttpEndpoints>> HttpEndpoints::start(
    const std::string& bind, int port, std::function<std::pair<bool, std::string>()> health,
    std::function<std::string()> metrics) {
    auto impl = std::make_unique<Impl>();
    impl->server.Get("/healthz", [health](const httplib::Request&, httplib::Response& res) {
        const auto [ok, body] = health();
        res.status = ok ? 200 : 503;
        res.set_content(body, "application/json");
    });
    impl->server.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    if (!impl->server.bind_to_port(bind.c_str(), port))
        return ioError("cannot listen for HTTP on " + bind + ":" + std::to_string(port));
    Impl* raw = impl.get();
    raw->thread = std::thread([raw] { raw->server.listen_after_bind(); });
    return std::unique_ptr<HttpEndpoints>(new HttpEndpoints(std::move(impl)));
}

void HttpEndpoints::stop() {
    if (!impl_ || !impl_->thread.joinable()) return;
    impl_->server.stop();
    impl_->thread.join();
}

}  // namespace voxseg::node
