// Reading a multipart/related body (RFC 2387 / RFC 2046) as it streams in, as WADO-RS returns
// a series: one part per DICOM instance. The boundary comes from the response's Content-Type
// (multipartBoundary refuses anything else, naming what it got); MultipartReader splits the
// bytes fed to it into parts and hands each part's headers and bytes to a handler, without
// holding a whole part in memory. A body that ends before the closing boundary, a boundary line
// with garbage after it or part headers that never end are errors. Not thread-safe per object.
#pragma once

#include "core/status.h"

#include <map>
#include <string>
#include <string_view>

namespace voxseg::io {

// The boundary of a "multipart/related; type=...; boundary=..." content type. The media type
// must be multipart/related, and its type parameter (when present) `part_type`
// (case-insensitive); `subject` (the URL) names the response in errors.
Result<std::string> multipartBoundary(const std::string& content_type, const std::string& part_type,
                                      const std::string& subject);

class MultipartReader {
  public:
    class Handler {
      public:
        virtual ~Handler() = default;
        // Header names lower-case, values trimmed.
        virtual Status beginPart(const std::map<std::string, std::string>& headers) = 0;
        virtual Status partData(std::string_view bytes) = 0;
        virtual Status endPart() = 0;
    };

    // `subject` names the body in errors.
    MultipartReader(std::string boundary, Handler* handler, std::string subject);
    // The next bytes of the body; the handler's errors are returned.
    Status feed(std::string_view bytes);
    // The body ended: an error unless the closing boundary was read.
    Status finish() const;
    int parts() const { return parts_; }

  private:
    enum class State { kPreamble, kAfterDelimiter, kHeaders, kBody, kDone };
    Status step(bool& progressed);
    Status malformed(const std::string& what) const;

    std::string delimiter_;  // "\r\n--" + boundary
    Handler* handler_;
    std::string subject_;
    std::string buffer_;
    State state_ = State::kPreamble;
    int parts_ = 0;
};

}  // namespace voxseg::io
