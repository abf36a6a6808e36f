#include "io/http_client.h"

#include "core/file_io.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cctype>
#include <memory>

namespace voxseg::io {
namespace {

constexpr size_t kErrorBodyBytes = 300;

struct Transfer {
    const HttpRequest* request = nullptr;
    HttpResponse response;
    Status sink_status;
    bool in_headers = true;
};

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' '))
        s.remove_suffix(1);
    return std::string(s);
}

size_t onHeader(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::string_view line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a 100 Continue): start again
        t->response.content_type.clear();
        const auto sp = line.find(' ');
        if (sp != std::string_view::npos) t->response.status = std::atol(line.data() + sp + 1);
        return size * n;
    }
    const auto colon = line.find(':');
    if (colon != std::string_view::npos && lower(line.substr(0, colon)) == "content-type")
        t->response.content_type = trim(line.substr(colon + 1));
    return size * n;
}

size_t onBody(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::string_view chunk(data, size * n);
    const bool success = t->response.status >= 200 && t->response.status < 300;
    if (!success || !t->request->sink) {
        // Error bodies are kept short: they only go into a message.
        const size_t room = success ? chunk.size()
                                    : (t->response.body.size() < kErrorBodyBytes
                                           ? kErrorBodyBytes - t->response.body.size()
                                           : 0);
        t->response.body.append(chunk.substr(0, std::min(room, chunk.size())));
        return size * n;
    }
    t->sink_status = t->request->sink(t->response, chunk);
    return t->sink_status.isOk() ? size * n : 0;  // 0 aborts the transfer
}

int onProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Transfer*>(user)->request->cancel.isCancelled() ? 1 : 0;
}

Status initCurl() {
    static const bool initialised = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    return initialised ? Status::ok() : internalError("libcurl could not be initialised");
}

}  // namespace

std::string urlEncode(std::string_view value, std::string_view keep) {
    std::string out;
    for (unsigned char c : value) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
            keep.find(static_cast<char>(c)) != std::string_view::npos)
            out += static_cast<char>(c);
        else
            out += fmt::format("%{:02X}", c);
    }
    return out;
}

Status httpStatusError(const std::string& what, const std::string& url,
                       const HttpResponse& response, const std::string& advice) {
    std::string body = trim(response.body);
    for (char& c : body)
        if (c == '\n' || c == '\r') c = ' ';
    std::string msg = fmt::format("{} answered HTTP {}", what, response.status);
    if (!body.empty()) msg += ": " + body;
    if (!advice.empty()) msg += "; " + advice;
    return response.status == 404 ? notFound(msg, url) : ioError(msg, url);
}

Result<HttpResponse> httpRequest(const HttpEndpoint& ep, const HttpRequest& req) {
    VOXSEG_RETURN_IF_ERROR(initCurl());
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return internalError("libcurl handle could not be created");
    struct curl_slist* headers = nullptr;
    if (!req.accept.empty())
        headers = curl_slist_append(headers, ("Accept: " + req.accept).c_str());
    if (req.body)
        headers = curl_slist_append(headers, ("Content-Type: " + req.content_type).c_str());
    if (!ep.bearer_token_file.empty()) {
        VOXSEG_ASSIGN_OR_RETURN(std::string token,
                                readFileBytes(ep.bearer_token_file, "the bearer token file"));
        token = trim(token.substr(0, token.find('\n')));
        headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
    }
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers,
                                                                             curl_slist_free_all);
    Transfer t;
    t.request = &req;
    CURL* h = curl.get();
    curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
    if (req.body) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body->data());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body->size()));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, onHeader);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, onBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, onProgress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    // A large series may take long: only a stalled transfer (under 1 byte/s for the timeout)
    // is given up, not a slow one.
    const long timeout_s = std::max(1L, static_cast<long>(ep.timeout_seconds));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, timeout_s);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!ep.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, ep.ca_file.c_str());
    const CURLcode rc = curl_easy_perform(h);
    if (!t.sink_status.isOk()) return t.sink_status;
    if (rc == CURLE_ABORTED_BY_CALLBACK || req.cancel.isCancelled())
        return Status(StatusCode::kCancelled, "cancelled", req.url);
    if (rc != CURLE_OK)
        return ioError(fmt::format("{} {} failed: {}; check the URL, that the server runs and "
                                   "that this machine may reach it",
                                   req.body ? "POST" : "GET", req.url, curl_easy_strerror(rc)),
                       req.url);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &t.response.status);
    return std::move(t.response);
}

}  // namespace voxseg::io
