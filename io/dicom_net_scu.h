// Sending DICOM files to a remote AE by C-STORE (DCMTK DcmSCU), over TLS when the peer says so.
// One association per call; the files are sent as stored (their own transfer syntax, or
// explicit/implicit little endian when the peer prefers). Success only when every file got a
// success or warning status; errors name the peer by its label. Reentrant: one DCMTK object
// per call.
#pragma once

#include "core/status.h"
#include "io/dicom_net_tls.h"

#include <string>
#include <vector>

namespace voxseg::io {

struct DicomPeer {
    std::string label;  // how errors name the peer, e.g. "pacs (PACS@10.0.5.10:4242)"
    std::string ae_title;
    std::string host;
    int port = 104;
    double timeout_seconds = 60.0;  // connect, association and each DIMSE message
    DicomTlsConfig tls;
};

Status storeFiles(const DicomPeer& peer, const std::string& calling_ae,
                  const std::vector<std::string>& files);

// What a sender needs from a DICOM file's meta header.
struct DicomFileIds {
    std::string sop_class_uid;
    std::string sop_instance_uid;
    std::string transfer_syntax_uid;
};
Result<DicomFileIds> readDicomFileIds(const std::string& path);

}  // namespace voxseg::io
