// One PACS as a front end sees it, whichever protocol it speaks: DICOM (C-FIND, C-MOVE to our
// own storage SCP, C-STORE; io/dicom_net_*.h) or DICOMweb (QIDO-RS, WADO-RS, STOW-RS;
// io/dicomweb_*.h). The viewer's PACS dialog calls these; so could a command line. Errors name
// the server (its label or URL) and say what to do. Reentrant; a call blocks (run it off the
// GUI thread).
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "io/dicom_net_move.h"
#include "io/dicom_net_scu.h"
#include "io/http_client.h"
#include "io/pacs_query.h"

#include <string>
#include <vector>

namespace voxseg::io {

enum class PacsProtocol { kDicom, kDicomWeb };

struct PacsServer {
    std::string name;
    PacsProtocol protocol = PacsProtocol::kDicom;
    DicomPeer peer;        // kDicom: the PACS (label, AE title, host, port, TLS)
    MoveDestination self;  // kDicom: our AE title (calling AE and C-MOVE destination), its port
    HttpEndpoint web;      // kDicomWeb: the DICOMweb root URL (…/dicom-web), CA file, token
};

// "name (AE@host:port)" or "name (URL)": how messages name the server.
std::string pacsServerLabel(const PacsServer& server);

Result<std::vector<PacsStudy>> pacsFindStudies(const PacsServer& server,
                                               const PacsStudyQuery& query,
                                               const CancelToken& cancel = {});
Result<std::vector<PacsSeries>> pacsFindSeries(const PacsServer& server,
                                               const std::string& study_uid,
                                               const CancelToken& cancel = {});
// The series into `target_folder` (which must not exist), all or nothing
// (io/retrieve_folder.h).
Result<RetrievedSeries> pacsRetrieveSeries(const PacsServer& server, const PacsSeries& series,
                                           const std::string& target_folder,
                                           const RetrieveCallback& progress,
                                           const CancelToken& cancel = {});
// C-STORE or STOW-RS ({root}/studies) of DICOM files (a SEG, an RTSTRUCT).
Status pacsSendFiles(const PacsServer& server, const std::vector<std::string>& files);

}  // namespace voxseg::io
