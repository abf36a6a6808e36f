// Searching a PACS by C-FIND (DCMTK DcmSCU, Study Root Query/Retrieve model, over TLS when the
// peer says so): the studies matching a PacsStudyQuery and the series of one study, with the
// return keys of io/pacs_query.h (strings converted to UTF-8 from each answer's character set).
// One association per call; errors name the peer (its label) and say what to check. Reentrant.
#pragma once

#include "core/status.h"
#include "io/dicom_net_scu.h"
#include "io/pacs_query.h"

#include <string>
#include <vector>

namespace voxseg::io {

Result<std::vector<PacsStudy>> findStudies(const DicomPeer& peer, const std::string& calling_ae,
                                           const PacsStudyQuery& query);
Result<std::vector<PacsSeries>> findSeries(const DicomPeer& peer, const std::string& calling_ae,
                                           const std::string& study_uid);

}  // namespace voxseg::io
