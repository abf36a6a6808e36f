// File > PACS...: query and retrieve from a PACS, and send the segmentation to it, through the
// Qt-free io/pacs_client.h (C-FIND / C-MOVE / C-STORE or QIDO-RS / WADO-RS / STOW-RS). Servers
// are edited here and remembered in QSettings (ui/pacs_servers.h). A search lists patient /
// study (date, description, accession, modalities) / series (series are queried when a study is
// expanded). Retrieve runs in the background with progress and cancel, into a temporary folder
// that lives as long as the window (a SEG written later references those files), then opens the
// series as File > Open DICOM folder does; a SEG or RTSTRUCT series opens onto the image shown,
// as File > Open segmentation does (names, colours and review status from the file). Send
// writes the SEG (or RTSTRUCT) as File > Save does into that folder and sends it. One task at a
// time; each ends with its signal.
// One dialog per main window (forWindow), hidden on close, GUI thread only.
#pragma once

#include "core/progress.h"
#include "io/pacs_client.h"

#include <QDialog>
#include <QPointer>
#include <QThread>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTemporaryDir;
class QTreeWidget;
class QTreeWidgetItem;

namespace voxseg::ui {

class MainWindow;

class PacsDialog : public QDialog {
    Q_OBJECT

  public:
    // The window's dialog, created on first use.
    static PacsDialog* forWindow(MainWindow* window);
    ~PacsDialog() override;  // cancels a running task and waits for it

    // Adds the server (or replaces the one of that name), saves the list and selects it.
    void saveServer(const io::PacsServer& server);
    bool selectServer(const QString& name);
    // The server as the fields describe it; nothing when no name is given.
    std::optional<io::PacsServer> currentServer() const;

    void search();                            // -> searchFinished
    void loadSeries(QTreeWidgetItem* study);  // -> seriesFinished
    // -> retrieveFinished, then the window opens it (beside the open series: Open::kBeside).
    void retrieveSelected(bool beside = false);
    void sendSegmentation(bool rtstruct);  // -> sendFinished
    void cancel();
    bool busy() const { return busy_; }

    QTreeWidget* results() const { return results_; }
    QString statusText() const;
    QPushButton* sendButton() const { return send_seg_; }

  signals:
    void searchFinished(bool ok, const QString& message);
    void seriesFinished(bool ok, const QString& message);
    void retrieveFinished(bool ok, const QString& message);
    void sendFinished(bool ok, const QString& message);

  private:
    explicit PacsDialog(MainWindow* window);
    QWidget* buildServerBox();
    QWidget* buildSearchBox();
    void fillServerFields(const io::PacsServer& server);
    void reloadServers(const QString& select);
    void showStudies(const std::vector<io::PacsStudy>& studies);
    // Runs `work` off the GUI thread (one task at a time); `done` gets its result on the GUI
    // thread. False (and `message` shown) when a task is running already.
    template <typename R>
    bool startTask(const QString& what, std::function<R(const CancelToken&)> work,
                   std::function<void(R&)> done);
    void finishTask(bool ok, const QString& message);
    QString workFolder(const QString& prefix);

    MainWindow* window_;
    std::vector<io::PacsServer> servers_;
    QComboBox* server_box_ = nullptr;
    QLineEdit* name_ = nullptr;
    QComboBox* protocol_ = nullptr;
    QLineEdit* ae_title_ = nullptr;
    QLineEdit* host_ = nullptr;
    QSpinBox* port_ = nullptr;
    QCheckBox* tls_ = nullptr;
    QLineEdit* tls_ca_ = nullptr;
    QLineEdit* tls_cert_ = nullptr;
    QLineEdit* tls_key_ = nullptr;
    QLineEdit* url_ = nullptr;
    QLineEdit* own_ae_ = nullptr;
    QSpinBox* own_port_ = nullptr;
    QLineEdit* patient_name_ = nullptr;
    QLineEdit* patient_id_ = nullptr;
    QLineEdit* date_from_ = nullptr;
    QLineEdit* date_to_ = nullptr;
    QLineEdit* accession_ = nullptr;
    QComboBox* modality_ = nullptr;
    QTreeWidget* results_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QPushButton* cancel_ = nullptr;
    QPushButton* retrieve_ = nullptr;
    QPushButton* retrieve_beside_ = nullptr;
    QPushButton* send_seg_ = nullptr;
    QPushButton* send_rtstruct_ = nullptr;
    QLabel* status_ = nullptr;
    std::unique_ptr<QTemporaryDir> folder_;  // retrieved series and sent files
    int folder_count_ = 0;
    bool busy_ = false;
    CancelToken token_;
    QList<QPointer<QThread>> threads_;
};

}  // namespace voxseg::ui
