// The PACS servers the viewer knows (io/pacs_client.h's PacsServer), remembered in QSettings
// under "pacs/servers" (name, protocol, AE title, host, port, TLS and its PEM files, DICOMweb
// URL, this viewer's AE title and receive port) with the last one used under
// "pacs/current". GUI thread only.
#pragma once

#include "io/pacs_client.h"

#include <QString>

#include <vector>

namespace voxseg::ui {

std::vector<io::PacsServer> loadPacsServers();
void savePacsServers(const std::vector<io::PacsServer>& servers);
QString currentPacsServer();
void setCurrentPacsServer(const QString& name);

}  // namespace voxseg::ui
