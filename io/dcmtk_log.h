// DCMTK's own diagnostics. DCMTK logs through its oflog root logger straight to stderr ("W: ..."),
// outside voxseg's log (core/log.h): warnings about details voxseg already handles (e.g. dcmseg's
// "Will not check dimension consistency with functional groups") would reach users between the
// progress bar and the results. Programs call this once after choosing their log level: DCMTK's
// errors always show; its warnings only with --verbose.
#pragma once

namespace voxseg::io {

void configureDcmtkLogging(bool show_warnings);

}  // namespace voxseg::io
