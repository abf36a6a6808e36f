#include "node/stow_sender.h"

#include "node/spool_crypto.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <memory>
#include <random>

namespace voxseg::node {
namespace {

size_t collect(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

}  // namespace

Status sendByStow(const Destination& d, const std::vector<std::string>& files) {
    static const bool initialised = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    if (!initialised) return internalError("libcurl could not be initialised");
    std::mt19937_64 rng(std::random_device{}());
    const std::string boundary = fmt::format("voxseg-{:016x}", rng());
    std::string body;
    for (const auto& f : files) {
        VOXSEG_ASSIGN_OR_RETURN(std::string bytes, readFileBytes(f));
        body += "--" + boundary + "\r\nContent-Type: application/dicom\r\n\r\n";
        body += bytes;
        body += "\r\n";
    }
    body += "--" + boundary + "--\r\n";

    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) return internalError("libcurl handle could not be created");
    struct curl_slist* headers = nullptr;
    headers = curl_slist_append(
        headers,
        ("Content-Type: multipart/related; type=\"application/dicom\"; boundary=" + boundary)
            .c_str());
    headers = curl_slist_append(headers, "Accept: application/dicom+json");
    if (!d.bearer_token_file.empty()) {
        VOXSEG_ASSIGN_OR_RETURN(std::string token, readFileBytes(d.bearer_token_file));
        while (!token.empty() &&
               (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
            token.pop_back();
        headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
    }
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers,
                                                                             curl_slist_free_all);
    std::string response;
    CURL* h = curl.get();
    curl_easy_setopt(h, CURLOPT_URL, d.url.c_str());
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &response);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(d.timeout_seconds * 1000));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!d.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, d.ca_file.c_str());
    const CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK)
        return ioError(std::string("STOW-RS request failed: ") + curl_easy_strerror(rc), d.url);
    long http = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
    if (http != 200)
        return ioError(fmt::format("STOW-RS answered HTTP {}: {}", http, response.substr(0, 300)),
                       d.url);
    return Status::ok();
}

}  // namespace voxseg::node
