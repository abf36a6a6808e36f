// Internal to io/ (dicom_net_scu.cpp, dicom_net_find.cpp, dicom_net_move.cpp): one way to set up
// a DCMTK DcmSCU for a DicomPeer (AE titles, host, port, timeouts, non-blocking DIMSE) and to
// open its association (network, TLS when the peer says so, negotiation), with errors that name
// the peer and say what to check. One Scu per association, one thread.
#pragma once

#include "core/status.h"
#include "io/dicom_net_scu.h"
#include "io/dicom_net_tls_layer.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmnet/scu.h>

#include <string>

namespace voxseg::io {

// DcmSCU keeps its transport-layer setter protected (DcmTLSSCU builds its own layer from file
// names); makeDcmTlsLayer already gives a configured one.
class Scu : public DcmSCU {
  public:
    using DcmSCU::useSecureConnection;
};

// AE titles, peer address and timeouts; presentation contexts are the caller's, added after
// this and before openAssociation.
void setUpScu(DcmSCU& scu, const DicomPeer& peer, const std::string& calling_ae);

// initNetwork, the TLS layer (kept in `tls`, which must outlive the association) and the
// association negotiation.
Status openAssociation(Scu& scu, const DicomPeer& peer, const std::string& calling_ae,
                       DcmTlsLayerPtr& tls);

}  // namespace voxseg::io
