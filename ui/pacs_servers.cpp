#include "ui/pacs_servers.h"

#include <QSettings>

namespace voxseg::ui {
namespace {

std::string get(const QSettings& s, const char* key, const char* fallback = "") {
    return s.value(key, fallback).toString().toStdString();
}

}  // namespace

std::vector<io::PacsServer> loadPacsServers() {
    QSettings settings;
    std::vector<io::PacsServer> out;
    const int n = settings.beginReadArray("pacs/servers");
    for (int i = 0; i < n; ++i) {
        settings.setArrayIndex(i);
        io::PacsServer s;
        s.name = get(settings, "name");
        s.protocol = settings.value("protocol").toString() == "dicomweb"
                         ? io::PacsProtocol::kDicomWeb
                         : io::PacsProtocol::kDicom;
        s.peer.ae_title = get(settings, "ae_title");
        s.peer.host = get(settings, "host");
        s.peer.port = settings.value("port", 104).toInt();
        s.peer.tls.enabled = settings.value("tls", false).toBool();
        const std::string ca = get(settings, "tls_ca");
        if (!ca.empty()) s.peer.tls.trusted = {ca};
        s.peer.tls.certificate = get(settings, "tls_certificate");
        s.peer.tls.private_key = get(settings, "tls_key");
        s.self.ae_title = get(settings, "own_ae_title", "VOXSEG");
        s.self.port = settings.value("own_port", 11113).toInt();
        s.self.tls = s.peer.tls;
        s.self.tls.require_peer_certificate = false;
        s.web.url = get(settings, "url");
        s.web.ca_file = ca;
        if (!s.name.empty()) out.push_back(std::move(s));
    }
    settings.endArray();
    return out;
}

void savePacsServers(const std::vector<io::PacsServer>& servers) {
    QSettings settings;
    settings.remove("pacs/servers");
    settings.beginWriteArray("pacs/servers", static_cast<int>(servers.size()));
    for (int i = 0; i < static_cast<int>(servers.size()); ++i) {
        const io::PacsServer& s = servers[static_cast<size_t>(i)];
        settings.setArrayIndex(i);
        settings.setValue("name", QString::fromStdString(s.name));
        settings.setValue("protocol",
                          s.protocol == io::PacsProtocol::kDicomWeb ? "dicomweb" : "dicom");
        settings.setValue("ae_title", QString::fromStdString(s.peer.ae_title));
        settings.setValue("host", QString::fromStdString(s.peer.host));
        settings.setValue("port", s.peer.port);
        settings.setValue("tls", s.peer.tls.enabled);
        settings.setValue("tls_ca", QString::fromStdString(s.peer.tls.trusted.empty()
                                                               ? s.web.ca_file
                                                               : s.peer.tls.trusted.front()));
        settings.setValue("tls_certificate", QString::fromStdString(s.peer.tls.certificate));
        settings.setValue("tls_key", QString::fromStdString(s.peer.tls.private_key));
        settings.setValue("own_ae_title", QString::fromStdString(s.self.ae_title));
        settings.setValue("own_port", s.self.port);
        settings.setValue("url", QString::fromStdString(s.web.url));
    }
    settings.endArray();
}

QString currentPacsServer() { return QSettings().value("pacs/current").toString(); }

void setCurrentPacsServer(const QString& name) { QSettings().setValue("pacs/current", name); }

}  // namespace voxseg::ui
