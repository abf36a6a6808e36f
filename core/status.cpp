#include "core/status.h"

#include <string_view>

namespace voxseg {

const char* statusCodeName(StatusCode code) {
    switch (code) {
        case StatusCode::kOk:
            return "ok";
        case StatusCode::kInvalidArgument:
            return "invalid argument";
        case StatusCode::kNotFound:
            return "not found";
        case StatusCode::kIoError:
            return "I/O error";
        case StatusCode::kCorruptData:
            return "corrupt data";
        case StatusCode::kUnsupported:
            return "unsupported";
        case StatusCode::kAmbiguous:
            return "ambiguous";
        case StatusCode::kOutOfMemory:
            return "out of memory";
        case StatusCode::kCancelled:
            return "cancelled";
        case StatusCode::kDeviceError:
            return "device error";
        case StatusCode::kFailedPrecondition:
            return "failed precondition";
        case StatusCode::kInternal:
            return "internal error";
    }
    return "unknown";
}

std::string Status::toString() const {
    if (isOk()) return "ok";
    if (subject_.empty()) return message_;
    return subject_ + ": " + message_;
}

Status Status::withContext(const std::string& context) const {
    if (isOk()) return *this;
    std::string_view head = context;
    while (!head.empty() && (head.back() == ' ' || head.back() == ':')) head.remove_suffix(1);
    if (head.empty()) return *this;
    if (message_.empty()) return Status(code_, std::string(head), subject_);
    return Status(code_, std::string(head) + ": " + message_, subject_);
}

}  // namespace voxseg
