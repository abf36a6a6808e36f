// Status and Result<T>: how voxseg reports recoverable failures (LevelDB Status / Abseil StatusOr).
//
// A Status carries a code, a message that says what went wrong and what to do, and the input it
// concerns (a file path, a series UID, a model folder). Library code returns these instead of
// throwing or exiting; exceptions from ITK/DCMTK are caught at the io/ boundary and turned into
// a Status. Programmer bugs assert. Values are cheap to copy; thread-compatible.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace voxseg {

enum class StatusCode {
    kOk = 0,
    kInvalidArgument,     // bad option or parameter given by the caller
    kNotFound,            // file, series, key or device that does not exist
    kIoError,             // read/write failed (permissions, disk full, vanished file)
    kCorruptData,         // input exists but is malformed (truncated DICOM, bad ONNX)
    kUnsupported,         // valid input we do not handle (transfer syntax, op, layout)
    kAmbiguous,           // several candidates and no choice given (e.g. series)
    kOutOfMemory,         // host or device allocation failed
    kCancelled,           // the user or a signal asked us to stop
    kDeviceError,         // GPU/driver failure
    kFailedPrecondition,  // state does not allow the operation (e.g. output exists)
    kInternal,            // a bug: should not happen
};

const char* statusCodeName(StatusCode code);

class [[nodiscard]] Status {
  public:
    Status() = default;
    Status(StatusCode code, std::string message, std::string subject = {})
        : code_(code), message_(std::move(message)), subject_(std::move(subject)) {}

    static Status ok() { return {}; }

    bool isOk() const { return code_ == StatusCode::kOk; }
    explicit operator bool() const { return isOk(); }
    StatusCode code() const { return code_; }
    const std::string& message() const { return message_; }
    // The input the failure concerns (path, series UID, model folder); may be empty.
    const std::string& subject() const { return subject_; }

    // "subject: message" (or just the message), as shown to users.
    std::string toString() const;

    // Prepends context and ": ", e.g. "reading series 3: " + message, keeping code and subject.
    // A context that already ends in ':' (and spaces) gets no second one (no "X: : message").
    Status withContext(const std::string& context) const;

  private:
    StatusCode code_ = StatusCode::kOk;
    std::string message_;
    std::string subject_;
};

// Shorthands that read well at call sites.
inline Status invalidArgument(std::string msg, std::string subject = {}) {
    return {StatusCode::kInvalidArgument, std::move(msg), std::move(subject)};
}
inline Status notFound(std::string msg, std::string subject = {}) {
    return {StatusCode::kNotFound, std::move(msg), std::move(subject)};
}
inline Status ioError(std::string msg, std::string subject = {}) {
    return {StatusCode::kIoError, std::move(msg), std::move(subject)};
}
inline Status corruptData(std::string msg, std::string subject = {}) {
    return {StatusCode::kCorruptData, std::move(msg), std::move(subject)};
}
inline Status unsupported(std::string msg, std::string subject = {}) {
    return {StatusCode::kUnsupported, std::move(msg), std::move(subject)};
}
inline Status internalError(std::string msg, std::string subject = {}) {
    return {StatusCode::kInternal, std::move(msg), std::move(subject)};
}

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
  public:
    Result(T value) : data_(std::move(value)) {}        // NOLINT: implicit by design
    Result(Status status) : data_(std::move(status)) {  // NOLINT: implicit by design
        assert(!std::get<Status>(data_).isOk() && "Result constructed from an OK Status");
    }

    bool isOk() const { return std::holds_alternative<T>(data_); }
    explicit operator bool() const { return isOk(); }

    const Status& status() const {
        static const Status kOkStatus;
        return isOk() ? kOkStatus : std::get<Status>(data_);
    }
    T& value() & {
        assert(isOk());
        return std::get<T>(data_);
    }
    const T& value() const& {
        assert(isOk());
        return std::get<T>(data_);
    }
    T&& value() && {
        assert(isOk());
        return std::get<T>(std::move(data_));
    }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

  private:
    std::variant<T, Status> data_;
};

}  // namespace voxseg

#define VOXSEG_CONCAT_INNER(a, b) a##b
#define VOXSEG_CONCAT(a, b) VOXSEG_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define VOXSEG_RETURN_IF_ERROR(expr)                       \
    do {                                                   \
        ::voxseg::Status voxseg_status_ = (expr);          \
        if (!voxseg_status_.isOk()) return voxseg_status_; \
    } while (0)

// `lhs = value of expr`, or returns its Status. lhs may declare a variable: `auto x`.
#define VOXSEG_ASSIGN_OR_RETURN(lhs, expr) \
    VOXSEG_ASSIGN_OR_RETURN_IMPL(VOXSEG_CONCAT(voxseg_result_, __LINE__), lhs, expr)
#define VOXSEG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
    auto tmp = (expr);                               \
    if (!tmp.isOk()) return tmp.status();            \
    lhs = std::move(tmp).value()
