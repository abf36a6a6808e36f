#include "app/exit_codes.h"

namespace voxseg::app {

ExitCode exitCodeFor(const Status& status, Stage stage) {
    switch (status.code()) {
        case StatusCode::kOk:
            return ExitCode::kOk;
        case StatusCode::kInvalidArgument:
            return ExitCode::kUsage;
        case StatusCode::kNotFound:
            return stage == Stage::kInput ? ExitCode::kInputNotFound : ExitCode::kOutputNotWritable;
        case StatusCode::kIoError:
            return stage == Stage::kInput ? ExitCode::kInputNotFound : ExitCode::kOutputNotWritable;
        case StatusCode::kFailedPrecondition:  // e.g. a refused tilt, or an existing output
            return stage == Stage::kInput ? ExitCode::kUnsupportedInput
                                          : ExitCode::kOutputNotWritable;
        case StatusCode::kCorruptData:
        case StatusCode::kUnsupported:
            return ExitCode::kUnsupportedInput;
        case StatusCode::kAmbiguous:
            return ExitCode::kAmbiguousSeries;
        case StatusCode::kOutOfMemory:
            return ExitCode::kOutOfMemory;
        case StatusCode::kCancelled:
            return ExitCode::kCancelled;
        case StatusCode::kDeviceError:
            return ExitCode::kNoCudaDevice;
        case StatusCode::kInternal:
            return ExitCode::kInternal;
    }
    return ExitCode::kInternal;
}

}  // namespace voxseg::app
