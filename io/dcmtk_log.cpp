#include "io/dcmtk_log.h"

#include <dcmtk/oflog/oflog.h>

namespace voxseg::io {

void configureDcmtkLogging(bool show_warnings) {
    OFLog::configure(show_warnings ? OFLogger::WARN_LOG_LEVEL : OFLogger::ERROR_LOG_LEVEL);
}

}  // namespace voxseg::io
