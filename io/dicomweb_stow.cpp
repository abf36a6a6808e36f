#include "io/dicomweb_stow.h"

#include "core/file_io.h"

#include <fmt/format.h>

#include <random>

namespace voxseg::io {

Status stowFiles(const HttpEndpoint& endpoint, const std::string& studies_url,
                 const std::vector<std::string>& files) {
    std::mt19937_64 rng(std::random_device{}());
    const std::string boundary = fmt::format("voxseg-{:016x}", rng());
    std::string body;
    for (const auto& f : files) {
        VOXSEG_ASSIGN_OR_RETURN(std::string bytes, readFileBytes(f, "the DICOM file to send"));
        body += "--" + boundary + "\r\nContent-Type: application/dicom\r\n\r\n";
        body += bytes;
        body += "\r\n";
    }
    body += "--" + boundary + "--\r\n";
    HttpRequest req;
    req.url = studies_url;
    req.accept = "application/dicom+json";
    req.content_type = "multipart/related; type=\"application/dicom\"; boundary=" + boundary;
    req.body = &body;
    auto r = httpRequest(endpoint, req);
    if (!r.isOk())
        return Status(r.status().code(), "STOW-RS request failed: " + r.status().message(),
                      studies_url);
    if (r->status != 200)
        return httpStatusError("STOW-RS", studies_url, *r,
                               "check the STOW-RS URL ({root}/studies) and the server's log");
    return Status::ok();
}

}  // namespace voxseg::io
