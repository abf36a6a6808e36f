// Retrieving one series from a PACS by C-MOVE (DCMTK DcmSCU, Study Root model) to our own AE:
// for the duration of the call a storage SCP (io/dicom_net_scp.h: CT, MR and PET image storage,
// and SEG and RTSTRUCT, each instance checked before it is kept) listens on `self.port` as
// `self.ae_title`, the PACS is asked to move the series there, and what arrives lands in a
// RetrieveFolder (io/retrieve_folder.h), renamed into place only when the PACS reported the move
// complete with no failed sub-operation. The PACS must know `self.ae_title` with this host and port
// (its list of DICOM nodes); its C-MOVE answer "move destination unknown" is reported with that
// advice. Progress counts instances received against `expected` (or the PACS's own count when 0);
// the token cancels (C-CANCEL, then the folder is removed). Only one C-MOVE per process at a time
// (one storage SCP per process). Errors name the peer.
#pragma once

#include "core/progress.h"
#include "core/status.h"
#include "io/dicom_net_scu.h"
#include "io/pacs_query.h"

#include <string>

namespace voxseg::io {

// Where the PACS sends the series: this process's storage SCP.
struct MoveDestination {
    std::string ae_title = "VOXSEG";
    int port = 11113;
    DicomTlsConfig tls;  // enabled: the SCP listens with DICOM TLS (certificate and key needed)
};

Result<RetrievedSeries> moveSeries(const DicomPeer& peer, const MoveDestination& self,
                                   const std::string& study_uid, const std::string& series_uid,
                                   const std::string& target_folder, int expected,
                                   const RetrieveCallback& progress,
                                   const CancelToken& cancel = {});

}  // namespace voxseg::io
