#include "ui/pacs_dialog.h"

#include "core/log.h"
#include "ui/background_task.h"
#include "ui/main_window.h"
#include "ui/pacs_servers.h"
#include "ui/viewer_state.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QTreeWidgetItemIterator>
#include <QVBoxLayout>

#include <map>

namespace voxseg::ui {
namespace {

constexpr const char* kComponent = "pacs";
enum ItemKind { kPatient = 1, kStudy = 2, kSeries = 3 };
enum Role {
    kKindRole = Qt::UserRole,
    kStudyUidRole,
    kSeriesUidRole,
    kInstancesRole,
    kModalityRole
};

QString qstr(const std::string& s) { return QString::fromStdString(s); }
std::string sstr(const QString& s) { return s.trimmed().toStdString(); }

QString prettyDate(const std::string& da) {
    if (da.size() != 8) return qstr(da);
    return qstr(da.substr(0, 4) + "-" + da.substr(4, 2) + "-" + da.substr(6, 2));
}

QLineEdit* field(QWidget* parent, const char* object_name, const QString& placeholder = {}) {
    auto* e = new QLineEdit(parent);
    e->setObjectName(object_name);
    e->setPlaceholderText(placeholder);
    return e;
}

}  // namespace

PacsDialog* PacsDialog::forWindow(MainWindow* window) {
    if (auto* d = window->findChild<PacsDialog*>(QString(), Qt::FindDirectChildrenOnly)) return d;
    return new PacsDialog(window);
}

PacsDialog::PacsDialog(MainWindow* window) : QDialog(window), window_(window) {
    setWindowTitle("PACS");
    auto* layout = new QVBoxLayout(this);
    auto* top = new QHBoxLayout;
    top->addWidget(buildServerBox());
    top->addWidget(buildSearchBox(), 1);
    layout->addLayout(top);

    results_ = new QTreeWidget(this);
    results_->setObjectName("pacsResults");
    results_->setHeaderLabels(
        {"Patient / study / series", "Date", "Description", "Accession", "Modalities", "Images"});
    results_->setSelectionMode(QAbstractItemView::SingleSelection);
    results_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
    connect(results_, &QTreeWidget::itemExpanded, this, [this](QTreeWidgetItem* item) {
        if (item->data(0, kKindRole).toInt() == kStudy && item->childCount() == 0 && !busy_)
            loadSeries(item);
    });
    connect(results_, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* item) {
        if (item->data(0, kKindRole).toInt() == kSeries) retrieveSelected();
    });
    layout->addWidget(results_, 1);

    auto* actions = new QHBoxLayout;
    retrieve_ = new QPushButton("&Retrieve and open", this);
    retrieve_beside_ = new QPushButton("Retrieve and open &beside", this);
    retrieve_beside_->setToolTip(
        "Opens the series beside the open ones (a prior study, another sequence) instead of "
        "replacing the active series");
    send_seg_ = new QPushButton("Send &SEG", this);
    send_seg_->setToolTip(
        "Writes the segmentation as DICOM SEG (as File > Save DICOM SEG) and "
        "sends it to the selected server");
    send_rtstruct_ = new QPushButton("Send R&TSTRUCT", this);
    progress_ = new QProgressBar(this);
    progress_->setVisible(false);
    cancel_ = new QPushButton("Cancel", this);
    cancel_->setEnabled(false);
    auto* close = new QPushButton("Close", this);
    actions->addWidget(retrieve_);
    actions->addWidget(retrieve_beside_);
    actions->addWidget(send_seg_);
    actions->addWidget(send_rtstruct_);
    actions->addWidget(progress_, 1);
    actions->addWidget(cancel_);
    actions->addWidget(close);
    layout->addLayout(actions);
    status_ = new QLabel(this);
    status_->setObjectName("pacsStatus");
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(status_);
    connect(retrieve_, &QPushButton::clicked, this, [this] { retrieveSelected(); });
    connect(retrieve_beside_, &QPushButton::clicked, this, [this] { retrieveSelected(true); });
    connect(send_seg_, &QPushButton::clicked, this, [this] { sendSegmentation(false); });
    connect(send_rtstruct_, &QPushButton::clicked, this, [this] { sendSegmentation(true); });
    connect(cancel_, &QPushButton::clicked, this, &PacsDialog::cancel);
    connect(close, &QPushButton::clicked, this, &QDialog::hide);
    resize(1100, 700);
    reloadServers(currentPacsServer());
}

PacsDialog::~PacsDialog() {
    token_.cancel();
    for (const QPointer<QThread>& t : threads_)
        if (t) t->wait();
}

QWidget* PacsDialog::buildServerBox() {
    auto* box = new QGroupBox("Server", this);
    auto* form = new QFormLayout(box);
    server_box_ = new QComboBox(box);
    server_box_->setObjectName("pacsServer");
    connect(server_box_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i < 0 || i >= static_cast<int>(servers_.size())) return;
        fillServerFields(servers_[static_cast<size_t>(i)]);
        setCurrentPacsServer(qstr(servers_[static_cast<size_t>(i)].name));
    });
    form->addRow("Known servers", server_box_);
    name_ = field(box, "pacsName", "e.g. hospital PACS");
    protocol_ = new QComboBox(box);
    protocol_->setObjectName("pacsProtocol");
    protocol_->addItems({"DICOM (C-FIND / C-MOVE / C-STORE)", "DICOMweb (QIDO / WADO / STOW)"});
    ae_title_ = field(box, "pacsAeTitle", "PACS AE title");
    host_ = field(box, "pacsHost", "host name or address");
    port_ = new QSpinBox(box);
    port_->setRange(1, 65535);
    port_->setValue(104);
    tls_ = new QCheckBox("DICOM TLS", box);
    tls_ca_ = field(box, "pacsTlsCa", "trusted CA (PEM; also for https)");
    tls_cert_ = field(box, "pacsTlsCert", "own certificate (PEM, optional)");
    tls_key_ = field(box, "pacsTlsKey", "own private key (PEM, optional)");
    url_ = field(box, "pacsUrl", "http://host:8042/dicom-web");
    own_ae_ = field(box, "pacsOwnAe");
    own_ae_->setText("VOXSEG");
    own_port_ = new QSpinBox(box);
    own_port_->setRange(1, 65535);
    own_port_->setValue(11113);
    form->addRow("Name", name_);
    form->addRow("Protocol", protocol_);
    form->addRow("AE title", ae_title_);
    form->addRow("Host", host_);
    form->addRow("Port", port_);
    form->addRow("", tls_);
    form->addRow("CA file", tls_ca_);
    form->addRow("Certificate", tls_cert_);
    form->addRow("Key", tls_key_);
    form->addRow("DICOMweb URL", url_);
    form->addRow("This viewer's AE", own_ae_);
    form->addRow("Receive port", own_port_);
    auto update = [this] {
        const bool web = protocol_->currentIndex() == 1;
        for (QWidget* w : {static_cast<QWidget*>(ae_title_), static_cast<QWidget*>(host_),
                           static_cast<QWidget*>(port_), static_cast<QWidget*>(tls_),
                           static_cast<QWidget*>(tls_cert_), static_cast<QWidget*>(tls_key_),
                           static_cast<QWidget*>(own_ae_), static_cast<QWidget*>(own_port_)})
            w->setEnabled(!web);
        url_->setEnabled(web);
    };
    connect(protocol_, &QComboBox::currentIndexChanged, this, update);
    update();
    auto* buttons = new QHBoxLayout;
    auto* save = new QPushButton("Save server", box);
    auto* remove = new QPushButton("Remove", box);
    buttons->addWidget(save);
    buttons->addWidget(remove);
    form->addRow(buttons);
    connect(save, &QPushButton::clicked, this, [this] {
        if (auto s = currentServer())
            saveServer(*s);
        else
            status_->setText("Give the server a name first.");
    });
    connect(remove, &QPushButton::clicked, this, [this] {
        const int i = server_box_->currentIndex();
        if (i < 0 || i >= static_cast<int>(servers_.size())) return;
        servers_.erase(servers_.begin() + i);
        savePacsServers(servers_);
        reloadServers({});
    });
    return box;
}

QWidget* PacsDialog::buildSearchBox() {
    auto* box = new QGroupBox("Search", this);
    auto* form = new QFormLayout(box);
    patient_name_ = field(box, "pacsPatientName", "DOE^J (a * is added)");
    patient_id_ = field(box, "pacsPatientId");
    date_from_ = field(box, "pacsDateFrom", "YYYYMMDD");
    date_to_ = field(box, "pacsDateTo", "YYYYMMDD");
    accession_ = field(box, "pacsAccession");
    modality_ = new QComboBox(box);
    modality_->setObjectName("pacsModality");
    modality_->setEditable(true);
    modality_->addItems({"", "CT", "MR", "PT", "US", "CR", "DX", "SEG", "RTSTRUCT"});
    form->addRow("Patient name", patient_name_);
    form->addRow("Patient ID", patient_id_);
    auto* dates = new QHBoxLayout;
    dates->addWidget(date_from_);
    dates->addWidget(new QLabel("to", box));
    dates->addWidget(date_to_);
    form->addRow("Study date", dates);
    form->addRow("Accession", accession_);
    form->addRow("Modality", modality_);
    auto* go = new QPushButton("Searc&h", box);
    go->setDefault(true);
    form->addRow(go);
    connect(go, &QPushButton::clicked, this, &PacsDialog::search);
    for (QLineEdit* e : {patient_name_, patient_id_, date_from_, date_to_, accession_})
        connect(e, &QLineEdit::returnPressed, this, &PacsDialog::search);
    return box;
}

void PacsDialog::fillServerFields(const io::PacsServer& s) {
    name_->setText(qstr(s.name));
    protocol_->setCurrentIndex(s.protocol == io::PacsProtocol::kDicomWeb ? 1 : 0);
    ae_title_->setText(qstr(s.peer.ae_title));
    host_->setText(qstr(s.peer.host));
    port_->setValue(s.peer.port);
    tls_->setChecked(s.peer.tls.enabled);
    tls_ca_->setText(qstr(s.peer.tls.trusted.empty() ? s.web.ca_file : s.peer.tls.trusted[0]));
    tls_cert_->setText(qstr(s.peer.tls.certificate));
    tls_key_->setText(qstr(s.peer.tls.private_key));
    url_->setText(qstr(s.web.url));
    own_ae_->setText(qstr(s.self.ae_title));
    own_port_->setValue(s.self.port);
}

void PacsDialog::reloadServers(const QString& select) {
    servers_ = loadPacsServers();
    QSignalBlocker block(server_box_);
    server_box_->clear();
    for (const auto& s : servers_) server_box_->addItem(qstr(s.name));
    block.unblock();
    if (!selectServer(select) && !servers_.empty()) selectServer(qstr(servers_.front().name));
}

void PacsDialog::saveServer(const io::PacsServer& server) {
    servers_ = loadPacsServers();
    auto it = std::find_if(servers_.begin(), servers_.end(),
                           [&](const io::PacsServer& s) { return s.name == server.name; });
    if (it != servers_.end())
        *it = server;
    else
        servers_.push_back(server);
    savePacsServers(servers_);
    reloadServers(qstr(server.name));
}

bool PacsDialog::selectServer(const QString& name) {
    const int i = server_box_->findText(name);
    if (i < 0) return false;
    server_box_->setCurrentIndex(i);
    fillServerFields(servers_[static_cast<size_t>(i)]);
    setCurrentPacsServer(name);
    return true;
}

std::optional<io::PacsServer> PacsDialog::currentServer() const {
    io::PacsServer s;
    s.name = sstr(name_->text());
    if (s.name.empty()) return std::nullopt;
    s.protocol =
        protocol_->currentIndex() == 1 ? io::PacsProtocol::kDicomWeb : io::PacsProtocol::kDicom;
    s.peer.ae_title = sstr(ae_title_->text());
    s.peer.host = sstr(host_->text());
    s.peer.port = port_->value();
    s.peer.tls.enabled = tls_->isChecked();
    if (!tls_ca_->text().trimmed().isEmpty()) s.peer.tls.trusted = {sstr(tls_ca_->text())};
    s.peer.tls.certificate = sstr(tls_cert_->text());
    s.peer.tls.private_key = sstr(tls_key_->text());
    s.self.ae_title = sstr(own_ae_->text());
    s.self.port = own_port_->value();
    s.self.tls = s.peer.tls;
    s.self.tls.require_peer_certificate = false;
    s.web.url = sstr(url_->text());
    s.web.ca_file = sstr(tls_ca_->text());
    return s;
}

QString PacsDialog::statusText() const { return status_->text(); }

template <typename R>
bool PacsDialog::startTask(const QString& what, std::function<R(const CancelToken&)> work,
                           std::function<void(R&)> done) {
    if (busy_) {
        status_->setText("Busy: wait for the running task or cancel it.");
        return false;
    }
    busy_ = true;
    token_ = CancelToken();
    status_->setText(what + "...");
    progress_->setRange(0, 0);
    progress_->setVisible(true);
    cancel_->setEnabled(true);
    const CancelToken token = token_;
    threads_.removeAll(nullptr);
    threads_ << runInBackground<R>(
        this, [work = std::move(work), token] { return work(token); }, std::move(done));
    return true;
}

void PacsDialog::finishTask(bool ok, const QString& message) {
    busy_ = false;
    progress_->setVisible(false);
    cancel_->setEnabled(false);
    status_->setText(message);
    if (!ok) log::warning(kComponent, "{}", message.toStdString());
}

void PacsDialog::cancel() {
    if (busy_) token_.cancel();
}

void PacsDialog::search() {
    const auto server = currentServer();
    if (!server) {
        status_->setText("Choose or describe a server first.");
        return emit searchFinished(false, status_->text());
    }
    io::PacsStudyQuery q;
    q.patient_name = sstr(patient_name_->text());
    q.patient_id = sstr(patient_id_->text());
    q.date_from = sstr(date_from_->text());
    q.date_to = sstr(date_to_->text());
    q.accession = sstr(accession_->text());
    q.modality = sstr(modality_->currentText());
    using R = Result<std::vector<io::PacsStudy>>;
    const bool started = startTask<R>(
        "Searching " + qstr(io::pacsServerLabel(*server)),
        [s = *server, q](const CancelToken& token) { return io::pacsFindStudies(s, q, token); },
        [this](R& r) {
            if (!r.isOk()) {
                finishTask(false, qstr(r.status().toString()));
                return emit searchFinished(false, statusText());
            }
            showStudies(*r);
            finishTask(true, QString("%1 studies found").arg(r->size()));
            emit searchFinished(true, statusText());
        });
    if (!started) emit searchFinished(false, statusText());
}

void PacsDialog::showStudies(const std::vector<io::PacsStudy>& studies) {
    results_->clear();
    std::map<std::pair<std::string, std::string>, QTreeWidgetItem*> patients;
    for (const io::PacsStudy& s : studies) {
        QTreeWidgetItem*& patient = patients[{s.patient_id, s.patient_name}];
        if (!patient) {
            patient = new QTreeWidgetItem(results_);
            patient->setText(0, qstr(s.patient_name) + " (" + qstr(s.patient_id) + ")");
            patient->setData(0, kKindRole, kPatient);
            patient->setExpanded(true);
        }
        auto* study = new QTreeWidgetItem(patient);
        study->setText(0, s.study_description.empty() ? "study" : qstr(s.study_description));
        study->setText(1, prettyDate(s.study_date));
        study->setText(2, qstr(s.study_description));
        study->setText(3, qstr(s.accession));
        QStringList modalities;
        for (const auto& m : s.modalities) modalities << qstr(m);
        study->setText(4, modalities.join(", "));
        study->setData(0, kKindRole, kStudy);
        study->setData(0, kStudyUidRole, qstr(s.study_uid));
        study->setChildIndicatorPolicy(QTreeWidgetItem::ShowIndicator);
    }
}

void PacsDialog::loadSeries(QTreeWidgetItem* study) {
    const auto server = currentServer();
    if (!server || !study || study->data(0, kKindRole).toInt() != kStudy) {
        status_->setText("Pick a study (and a server) first.");
        return emit seriesFinished(false, status_->text());
    }
    const std::string uid = sstr(study->data(0, kStudyUidRole).toString());
    using R = Result<std::vector<io::PacsSeries>>;
    const bool started = startTask<R>(
        "Listing the series of the study",
        [s = *server, uid](const CancelToken& token) { return io::pacsFindSeries(s, uid, token); },
        [this, uid](R& r) {
            // The study item may be gone (a new search); find it by its UID.
            QTreeWidgetItem* item = nullptr;
            for (QTreeWidgetItemIterator it(results_); *it; ++it)
                if ((*it)->data(0, kStudyUidRole).toString() == qstr(uid) &&
                    (*it)->data(0, kKindRole).toInt() == kStudy)
                    item = *it;
            if (!r.isOk() || !item) {
                finishTask(false, r.isOk() ? "the study is no longer listed"
                                           : qstr(r.status().toString()));
                return emit seriesFinished(false, statusText());
            }
            qDeleteAll(item->takeChildren());
            for (const io::PacsSeries& s : *r) {
                auto* series = new QTreeWidgetItem(item);
                series->setText(0, QString("#%1 %2").arg(s.number).arg(qstr(s.modality)));
                series->setText(2, qstr(s.description));
                series->setText(4, qstr(s.modality));
                series->setText(5, QString::number(s.instances));
                series->setData(0, kKindRole, kSeries);
                series->setData(0, kStudyUidRole, qstr(s.study_uid));
                series->setData(0, kSeriesUidRole, qstr(s.series_uid));
                series->setData(0, kInstancesRole, s.instances);
                series->setData(0, kModalityRole, qstr(s.modality));
            }
            item->setExpanded(true);
            finishTask(true, QString("%1 series").arg(r->size()));
            emit seriesFinished(true, statusText());
        });
    if (!started) emit seriesFinished(false, statusText());
}

QString PacsDialog::workFolder(const QString& prefix) {
    if (!folder_) {
        folder_ = std::make_unique<QTemporaryDir>(QDir::temp().filePath("voxseg-pacs-XXXXXX"));
        if (!folder_->isValid()) {
            folder_.reset();
            return {};
        }
    }
    return folder_->filePath(QString("%1-%2").arg(prefix).arg(++folder_count_));
}

void PacsDialog::retrieveSelected(bool beside) {
    const auto server = currentServer();
    QTreeWidgetItem* item = results_->currentItem();
    if (!server || !item || item->data(0, kKindRole).toInt() != kSeries) {
        status_->setText("Pick a series to retrieve (expand a study to list its series).");
        return emit retrieveFinished(false, status_->text());
    }
    io::PacsSeries series;
    series.study_uid = sstr(item->data(0, kStudyUidRole).toString());
    series.series_uid = sstr(item->data(0, kSeriesUidRole).toString());
    series.instances = item->data(0, kInstancesRole).toInt();
    // A SEG or RTSTRUCT is opened onto the image shown (its reader refuses one made on another
    // series, naming it); it has no image to open by itself.
    const QString modality = item->data(0, kModalityRole).toString();
    const bool segmentation = modality == "SEG" || modality == "RTSTRUCT";
    if (segmentation && !window_->state()->hasImage()) {
        status_->setText("A " + modality +
                         " opens onto the image it was made on: retrieve and open that series "
                         "first.");
        return emit retrieveFinished(false, status_->text());
    }
    const QString target = workFolder("series");
    if (target.isEmpty()) {
        status_->setText("Cannot create a temporary folder in " + QDir::tempPath());
        return emit retrieveFinished(false, status_->text());
    }
    QPointer<PacsDialog> self(this);
    auto progress = [self](int received, int expected) {
        QMetaObject::invokeMethod(
            self,
            [self, received, expected] {
                if (!self) return;
                self->progress_->setRange(0, std::max(expected, received));
                self->progress_->setValue(received);
                self->status_->setText(
                    expected > 0
                        ? QString("Retrieving: %1 of %2 images").arg(received).arg(expected)
                        : QString("Retrieving: %1 images").arg(received));
            },
            Qt::QueuedConnection);
    };
    log::info(kComponent, "retrieving series {} from {}", series.series_uid, server->name);
    using R = Result<io::RetrievedSeries>;
    const bool started = startTask<R>(
        "Retrieving",
        [s = *server, series, t = sstr(target), progress](const CancelToken& token) {
            return io::pacsRetrieveSeries(s, series, t, progress, token);
        },
        [this, segmentation, beside](R& r) {
            if (!r.isOk()) {
                finishTask(false, r.status().code() == StatusCode::kCancelled
                                      ? QString("Retrieve cancelled")
                                      : qstr(r.status().toString()));
                return emit retrieveFinished(false, statusText());
            }
            if (segmentation && r->files.size() != 1) {
                finishTask(false, QString("The segmentation series has %1 instances; open one of "
                                          "them with File > Open segmentation from %2")
                                      .arg(r->files.size())
                                      .arg(qstr(r->folder)));
                return emit retrieveFinished(false, statusText());
            }
            finishTask(true, QString("Retrieved %1 images; opening").arg(r->files.size()));
            emit retrieveFinished(true, statusText());
            if (segmentation)
                window_->loadSegmentation(qstr(r->files.front()));
            else
                window_->openPath(qstr(r->folder),
                                  beside ? MainWindow::Open::kBeside : MainWindow::Open::kReplace);
        });
    if (!started) emit retrieveFinished(false, statusText());
}

void PacsDialog::sendSegmentation(bool rtstruct) {
    const auto server = currentServer();
    if (!server) {
        status_->setText("Choose or describe a server first.");
        return emit sendFinished(false, status_->text());
    }
    if (busy_) {
        status_->setText("Busy: wait for the running task or cancel it.");
        return emit sendFinished(false, status_->text());
    }
    const QString dir = workFolder("send");
    if (dir.isEmpty() || !QDir().mkpath(dir)) {
        status_->setText("Cannot create a temporary folder in " + QDir::tempPath());
        return emit sendFinished(false, status_->text());
    }
    const QString path = dir + (rtstruct ? "/rtstruct.dcm" : "/segmentation.dcm");
    const Status saved = rtstruct ? window_->saveRtStruct(path) : window_->saveDicomSeg(path);
    if (!saved.isOk()) {
        status_->setText("Cannot write the " + QString(rtstruct ? "RTSTRUCT" : "SEG") + ": " +
                         qstr(saved.toString()));
        return emit sendFinished(false, status_->text());
    }
    const QString what = rtstruct ? "RTSTRUCT" : "SEG";
    using R = Status;
    startTask<R>(
        "Sending the " + what + " to " + qstr(io::pacsServerLabel(*server)),
        [s = *server, p = sstr(path)](const CancelToken&) { return io::pacsSendFiles(s, {p}); },
        [this, what, label = qstr(io::pacsServerLabel(*server))](R& r) {
            if (!r.isOk()) {
                finishTask(false, qstr(r.toString()));
                return emit sendFinished(false, statusText());
            }
            finishTask(true, what + " sent to " + label);
            emit sendFinished(true, statusText());
        });
}

}  // namespace voxseg::ui
