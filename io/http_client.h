// HTTP(S) requests for DICOMweb (QIDO-RS, WADO-RS, STOW-RS) through libcurl: one GET or POST
// per call, the response body collected or streamed to a sink as it arrives, cancellable. HTTPS
// verifies the server's certificate (the system's CAs, or ca_file); a bearer token is read from
// bearer_token_file at each request (so it can be rotated). Errors name the URL and say what to
// check. Reentrant: one curl handle per call.
#pragma once

#include "core/progress.h"
#include "core/status.h"

#include <functional>
#include <string>
#include <string_view>

namespace voxseg::io {

struct HttpEndpoint {
    std::string url;                // the service root, e.g. http://pacs:8042/dicom-web
    std::string ca_file;            // optional CA bundle for https (default: the system's)
    std::string bearer_token_file;  // optional; "Authorization: Bearer <its first line>"
    double timeout_seconds = 60.0;  // to connect, and the longest a transfer may stall
};

struct HttpResponse {
    long status = 0;           // HTTP status code
    std::string content_type;  // the response's Content-Type header
    std::string body;          // the body, unless it went to a sink (then empty)
};

// Receives the body of a 2xx response chunk by chunk; a non-OK Status ends the transfer and is
// returned by the request.
using HttpSink = std::function<Status(const HttpResponse& head, std::string_view chunk)>;

struct HttpRequest {
    std::string url;
    std::string accept;                 // Accept header; empty: none
    std::string content_type;           // POST only
    const std::string* body = nullptr;  // POST body; nullptr: GET
    HttpSink sink;                      // empty: the body is collected in HttpResponse::body
    CancelToken cancel;                 // checked while the transfer runs: kCancelled
};

// Sends the request. A transport failure (refused, timeout, TLS) is kIoError naming the URL; an
// HTTP status outside 2xx is returned as a response (the caller words the error, see
// httpStatusError), with the start of its body.
Result<HttpResponse> httpRequest(const HttpEndpoint& endpoint, const HttpRequest& request);

// "GET <url> answered HTTP 404 (Not Found): <start of body>; <advice>", kNotFound for 404 and
// kIoError otherwise, with the URL as subject.
Status httpStatusError(const std::string& what, const std::string& url,
                       const HttpResponse& response, const std::string& advice);

// `value` percent-encoded for a URL query or path segment (RFC 3986 unreserved kept, and the
// characters in `keep`).
std::string urlEncode(std::string_view value, std::string_view keep = {});

}  // namespace voxseg::io
