// Retrieving one series from a DICOMweb server by WADO-RS (PS3.18 10.4): GET
// {root}/studies/{study}/series/{series} as multipart/related; type="application/dicom", each
// part streamed into its own file in a RetrieveFolder (io/retrieve_folder.h) and checked to be
// a DICOM file, the folder renamed into place only when the body ended with its closing
// boundary. `expected` (the series' instance count from the query, 0 unknown) is passed on to
// the progress callback; a response with another count is not an error (the PACS may have
// received more meanwhile). Cancellable through `cancel`. Errors name the URL. Reentrant.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "io/http_client.h"
#include "io/pacs_query.h"

#include <string>

namespace voxseg::io {

Result<RetrievedSeries> wadoRetrieveSeries(const HttpEndpoint& server, const std::string& study_uid,
                                           const std::string& series_uid,
                                           const std::string& target_folder, int expected,
                                           const RetrieveCallback& progress,
                                           const CancelToken& cancel = {});

}  // namespace voxseg::io
