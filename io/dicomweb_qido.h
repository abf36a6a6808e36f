// Searching a DICOMweb server by QIDO-RS (PS3.18 10.6): studies matching a PacsStudyQuery
// (GET {root}/studies?...) and the series of a study (GET {root}/studies/{uid}/series), with the
// return keys of io/pacs_query.h, parsed from application/dicom+json. Errors name the URL; a
// response that is not a DICOM JSON array is refused. Reentrant.
#pragma once

#include "core/status.h"
#include "io/http_client.h"
#include "io/pacs_query.h"

#include <string>
#include <vector>

namespace voxseg::io {

Result<std::vector<PacsStudy>> qidoStudies(const HttpEndpoint& server, const PacsStudyQuery& query,
                                           const CancelToken& cancel = {});
Result<std::vector<PacsSeries>> qidoSeries(const HttpEndpoint& server, const std::string& study_uid,
                                           const CancelToken& cancel = {});

// The DICOM JSON (PS3.18 F.2) of a QIDO answer as rows; `subject` names it in errors.
Result<std::vector<PacsStudy>> parseQidoStudies(const std::string& json,
                                                const std::string& subject);
Result<std::vector<PacsSeries>> parseQidoSeries(const std::string& json,
                                                const std::string& subject);

}  // namespace voxseg::io
