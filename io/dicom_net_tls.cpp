#include "io/dicom_net_tls_layer.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmtls/tlslayer.h>

namespace voxseg::io {

void DcmTlsLayerDeleter::operator()(DcmTLSTransportLayer* layer) const { delete layer; }

Result<DcmTlsLayerPtr> makeDcmTlsLayer(const DicomTlsConfig& c, bool server) {
    DcmTlsLayerPtr layer(
        new DcmTLSTransportLayer(server ? NET_ACCEPTOR : NET_REQUESTOR, nullptr, OFTrue));
    DcmTLSTransportLayer& l = *layer;
    if (!l) return internalError("OpenSSL could not be initialised for DICOM TLS");
    if (l.setTLSProfile(TSP_Profile_BCP195).bad() || l.activateCipherSuites().bad())
        return internalError("the BCP 195 TLS profile could not be activated");
    if (!c.certificate.empty() || server) {
        if (c.certificate.empty() || c.private_key.empty())
            return invalidArgument("TLS needs a certificate and a private_key (PEM)");
        if (l.setPrivateKeyFile(c.private_key.c_str(), DCF_Filetype_PEM).bad())
            return invalidArgument("cannot load the TLS private key", c.private_key);
        if (l.setCertificateFile(c.certificate.c_str(), DCF_Filetype_PEM).bad())
            return invalidArgument("cannot load the TLS certificate", c.certificate);
        if (!l.checkPrivateKeyMatchesCertificate())
            return invalidArgument("the TLS private key does not match the certificate",
                                   c.certificate);
    }
    for (const auto& f : c.trusted)
        if (l.addTrustedCertificateFile(f.c_str(), DCF_Filetype_PEM).bad())
            return invalidArgument("cannot load the trusted certificate", f);
    l.setCertificateVerification(server && !c.require_peer_certificate ? DCV_checkCertificate
                                                                       : DCV_requireCertificate);
    return layer;
}

}  // namespace voxseg::io
