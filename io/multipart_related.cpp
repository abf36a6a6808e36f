#include "io/multipart_related.h"

#include <fmt/format.h>

#include <cctype>
#include <vector>

namespace voxseg::io {
namespace {

// Part headers longer than this are not headers of a DICOM part: the body is not multipart.
constexpr size_t kMaxHeaderBytes = 16 * 1024;

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// "a; b=c; d=\"e;f\"" -> {"a", "b=c", "d=\"e;f\""}: splits on ';' outside quotes.
std::vector<std::string> splitParameters(std::string_view s) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (char c : s) {
        if (c == '"') quoted = !quoted;
        if (c == ';' && !quoted)
            out.emplace_back();
        else
            out.back() += c;
    }
    return out;
}

std::string unquote(std::string_view v) {
    v = trim(v);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return std::string(v);
}

}  // namespace

Result<std::string> multipartBoundary(const std::string& content_type, const std::string& part_type,
                                      const std::string& subject) {
    const auto params = splitParameters(content_type);
    const std::string media = lower(trim(params[0]));
    if (media != "multipart/related")
        return unsupported(fmt::format("expected a multipart/related response, got Content-Type "
                                       "\"{}\"; check that the URL is a DICOMweb (WADO-RS) service",
                                       content_type),
                           subject);
    std::string boundary, type;
    for (size_t i = 1; i < params.size(); ++i) {
        const auto eq = params[i].find('=');
        if (eq == std::string::npos) continue;
        const std::string name = lower(trim(std::string_view(params[i]).substr(0, eq)));
        const std::string value = unquote(std::string_view(params[i]).substr(eq + 1));
        if (name == "boundary") boundary = value;
        if (name == "type") type = lower(value);
    }
    if (!type.empty() && type != lower(part_type))
        return unsupported(
            fmt::format("the multipart response holds \"{}\", not \"{}\"", type, part_type),
            subject);
    if (boundary.empty() || boundary.size() > 70)
        return corruptData(fmt::format("the multipart Content-Type \"{}\" has no valid boundary "
                                       "(1 to 70 characters); the server's response is unusable",
                                       content_type),
                           subject);
    return boundary;
}

MultipartReader::MultipartReader(std::string boundary, Handler* handler, std::string subject)
    : delimiter_("\r\n--" + std::move(boundary)),
      handler_(handler),
      subject_(std::move(subject)),
      // The first delimiter may open the body without a CRLF before it: supply one.
      buffer_("\r\n") {}

Status MultipartReader::malformed(const std::string& what) const {
    return corruptData("malformed multipart body: " + what +
                           "; the server's response is unusable (retry, or report it to the "
                           "PACS administrator)",
                       subject_);
}

Status MultipartReader::feed(std::string_view bytes) {
    buffer_.append(bytes);
    bool progressed = true;
    while (progressed) {
        progressed = false;
        VOXSEG_RETURN_IF_ERROR(step(progressed));
    }
    return Status::ok();
}

Status MultipartReader::step(bool& progressed) {
    switch (state_) {
        case State::kPreamble: {
            const auto at = buffer_.find(delimiter_);
            if (at == std::string::npos) {
                // Keep what could be the start of a delimiter split across two chunks.
                if (buffer_.size() > delimiter_.size())
                    buffer_.erase(0, buffer_.size() - delimiter_.size());
                return Status::ok();
            }
            buffer_.erase(0, at + delimiter_.size());
            state_ = State::kAfterDelimiter;
            progressed = true;
            return Status::ok();
        }
        case State::kAfterDelimiter: {
            // "--" closes the body; otherwise optional white space, then CRLF.
            if (buffer_.size() >= 2 && buffer_.compare(0, 2, "--") == 0) {
                state_ = State::kDone;
                buffer_.clear();
                return Status::ok();
            }
            size_t i = 0;
            while (i < buffer_.size() && (buffer_[i] == ' ' || buffer_[i] == '\t')) ++i;
            if (buffer_.size() < i + 2) return Status::ok();
            if (buffer_.compare(i, 2, "\r\n") != 0)
                return malformed(
                    fmt::format("a boundary line is followed by other text "
                                "(part {})",
                                parts_ + 1));
            buffer_.erase(0, i + 2);
            state_ = State::kHeaders;
            progressed = true;
            return Status::ok();
        }
        case State::kHeaders: {
            size_t end = 0, skip = 0;
            if (buffer_.compare(0, 2, "\r\n") == 0) {
                end = 0;
                skip = 2;
            } else {
                end = buffer_.find("\r\n\r\n");
                if (end == std::string::npos) {
                    if (buffer_.size() > kMaxHeaderBytes)
                        return malformed(
                            fmt::format("the headers of part {} never end", parts_ + 1));
                    return Status::ok();
                }
                skip = end + 4;
            }
            std::map<std::string, std::string> headers;
            std::string_view block(buffer_.data(), end);
            while (!block.empty()) {
                const auto eol = block.find("\r\n");
                const std::string_view line = block.substr(0, eol);
                const auto colon = line.find(':');
                if (colon == std::string_view::npos)
                    return malformed(
                        fmt::format("part {} has a header line without ':'", parts_ + 1));
                headers[lower(trim(line.substr(0, colon)))] =
                    std::string(trim(line.substr(colon + 1)));
                block = eol == std::string_view::npos ? std::string_view{} : block.substr(eol + 2);
            }
            buffer_.erase(0, skip);
            ++parts_;
            VOXSEG_RETURN_IF_ERROR(handler_->beginPart(headers));
            state_ = State::kBody;
            progressed = true;
            return Status::ok();
        }
        case State::kBody: {
            const auto at = buffer_.find(delimiter_);
            if (at == std::string::npos) {
                if (buffer_.size() > delimiter_.size()) {
                    const size_t n = buffer_.size() - delimiter_.size();
                    VOXSEG_RETURN_IF_ERROR(handler_->partData(std::string_view(buffer_.data(), n)));
                    buffer_.erase(0, n);
                }
                return Status::ok();
            }
            VOXSEG_RETURN_IF_ERROR(handler_->partData(std::string_view(buffer_.data(), at)));
            VOXSEG_RETURN_IF_ERROR(handler_->endPart());
            buffer_.erase(0, at + delimiter_.size());
            state_ = State::kAfterDelimiter;
            progressed = true;
            return Status::ok();
        }
        case State::kDone:
            buffer_.clear();  // the epilogue is ignored
            return Status::ok();
    }
    return Status::ok();
}

Status MultipartReader::finish() const {
    if (state_ == State::kDone) return Status::ok();
    if (state_ == State::kPreamble && parts_ == 0)
        return malformed("no boundary line in the body (empty or not multipart)");
    return malformed(
        fmt::format("the body ends inside part {} before the closing boundary "
                    "(truncated response)",
                    std::max(parts_, 1)));
}

}  // namespace voxseg::io
