#include "io/dicom_net_scu_setup.h"

#include <dcmtk/dcmtls/tlslayer.h>
#include <fmt/format.h>

namespace voxseg::io {

void setUpScu(DcmSCU& scu, const DicomPeer& peer, const std::string& calling_ae) {
    scu.setAETitle(calling_ae.c_str());
    scu.setPeerAETitle(peer.ae_title.c_str());
    scu.setPeerHostName(peer.host.c_str());
    scu.setPeerPort(static_cast<Uint16>(peer.port));
    scu.setConnectionTimeout(static_cast<Sint32>(peer.timeout_seconds));
    scu.setACSETimeout(static_cast<Uint32>(peer.timeout_seconds));
    scu.setDIMSEBlockingMode(DIMSE_NONBLOCKING);
    scu.setDIMSETimeout(static_cast<Uint32>(peer.timeout_seconds));
}

Status openAssociation(Scu& scu, const DicomPeer& peer, const std::string& calling_ae,
                       DcmTlsLayerPtr& tls) {
    const std::string& who = peer.label;
    if (peer.tls.enabled) {
        auto layer = makeDcmTlsLayer(peer.tls, /*server=*/false);
        if (!layer.isOk()) return layer.status();
        tls = std::move(*layer);
    }
    OFCondition c = scu.initNetwork();
    if (c.bad()) return ioError(std::string("cannot set up the network: ") + c.text(), who);
    // Only after initNetwork: it creates the network and association parameters the layer is
    // set on (before it, DcmSCU fails and the association would go out in plain TCP).
    if (tls) {
        c = scu.useSecureConnection(tls.get());
        if (c.bad()) return internalError(std::string("cannot use TLS: ") + c.text(), who);
    }
    c = scu.negotiateAssociation();
    if (c.bad())
        return ioError(fmt::format("association failed: {}; check the peer's AE title, host, "
                                   "port and TLS setting, and that it accepts calls from AE "
                                   "title {}",
                                   c.text(), calling_ae),
                       who);
    return Status::ok();
}

}  // namespace voxseg::io
