#include "io/dicomweb_wado.h"

#include "core/file_io.h"
#include "io/dicom_net_scu.h"
#include "io/multipart_related.h"
#include "io/retrieve_folder.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

namespace voxseg::io {
namespace {

// Writes each part to "<name>.part" in the staging folder, renamed to <name> once complete
// and read back as DICOM.
class PartsToFiles : public MultipartReader::Handler {
  public:
    PartsToFiles(RetrieveFolder& folder, std::string url, int expected,
                 const RetrieveCallback& progress, const CancelToken& cancel)
        : folder_(folder),
          url_(std::move(url)),
          expected_(expected),
          progress_(progress),
          cancel_(cancel) {}
    ~PartsToFiles() override {
        if (fd_ >= 0) ::close(fd_);
    }

    Status beginPart(const std::map<std::string, std::string>& headers) override {
        // Several parts may arrive in one chunk, between two of libcurl's progress checks.
        if (cancel_.isCancelled()) return Status(StatusCode::kCancelled, "cancelled", url_);
        const auto ct = headers.find("content-type");
        if (ct != headers.end() && ct->second.rfind("application/dicom", 0) != 0)
            return unsupported(fmt::format("part {} is \"{}\", not application/dicom",
                                           folder_.count() + 1, ct->second),
                               url_);
        name_ = folder_.nextFileName();
        path_ = folder_.staging() + "/" + name_;
        fd_ = ::open((path_ + ".part").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd_ < 0) return ioError(std::string("cannot create: ") + std::strerror(errno), path_);
        return Status::ok();
    }
    Status partData(std::string_view bytes) override {
        if (int err = writeAllBytes(fd_, bytes.data(), bytes.size()))
            return ioError(std::string("cannot write: ") + std::strerror(err), path_);
        return Status::ok();
    }
    Status endPart() override {
        const bool synced = ::fsync(fd_) == 0;
        const int err = errno;
        ::close(fd_);
        fd_ = -1;
        if (!synced) return ioError(std::string("cannot write: ") + std::strerror(err), path_);
        if (std::rename((path_ + ".part").c_str(), path_.c_str()) != 0)
            return ioError(std::string("cannot rename: ") + std::strerror(errno), path_);
        auto ids = readDicomFileIds(path_);
        if (!ids.isOk())
            return corruptData(fmt::format("part {} of the WADO-RS response is not a DICOM file "
                                           "({}); report it to the PACS administrator",
                                           folder_.count() + 1, ids.status().message()),
                               url_);
        folder_.added(name_);
        if (progress_) progress_(folder_.count(), expected_);
        return Status::ok();
    }

  private:
    RetrieveFolder& folder_;
    std::string url_;
    int expected_;
    const RetrieveCallback& progress_;
    CancelToken cancel_;
    std::string name_, path_;
    int fd_ = -1;
};

}  // namespace

Result<RetrievedSeries> wadoRetrieveSeries(const HttpEndpoint& server, const std::string& study_uid,
                                           const std::string& series_uid,
                                           const std::string& target_folder, int expected,
                                           const RetrieveCallback& progress,
                                           const CancelToken& cancel) {
    std::string root = server.url;
    while (!root.empty() && root.back() == '/') root.pop_back();
    const std::string url =
        root + "/studies/" + urlEncode(study_uid) + "/series/" + urlEncode(series_uid);
    VOXSEG_ASSIGN_OR_RETURN(auto folder, RetrieveFolder::create(target_folder));
    PartsToFiles parts(*folder, url, expected, progress, cancel);
    std::optional<MultipartReader> reader;
    HttpRequest req;
    req.url = url;
    // transfer-syntax=*: the instances as stored (no transcoding by the server).
    req.accept = "multipart/related; type=\"application/dicom\"; transfer-syntax=*";
    req.cancel = cancel;
    req.sink = [&](const HttpResponse& head, std::string_view chunk) -> Status {
        if (!reader) {
            VOXSEG_ASSIGN_OR_RETURN(std::string boundary,
                                    multipartBoundary(head.content_type, "application/dicom", url));
            reader.emplace(boundary, &parts, url);
        }
        return reader->feed(chunk);
    };
    VOXSEG_ASSIGN_OR_RETURN(HttpResponse r, httpRequest(server, req));
    if (r.status != 200 && r.status != 206)
        return httpStatusError("WADO-RS " + url, url, r,
                               "check the DICOMweb root URL and that the series is on the server");
    if (!reader) {  // an empty 200 body
        VOXSEG_ASSIGN_OR_RETURN(std::string boundary,
                                multipartBoundary(r.content_type, "application/dicom", url));
        reader.emplace(boundary, &parts, url);
    }
    VOXSEG_RETURN_IF_ERROR(reader->finish());
    if (cancel.isCancelled()) return Status(StatusCode::kCancelled, "cancelled", url);
    if (folder->count() == 0)
        return notFound("WADO-RS returned no instance for the series " + series_uid, url);
    return folder->commit();
}

}  // namespace voxseg::io
