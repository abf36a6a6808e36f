#include "ui/series_browser.h"

#include <QHeaderView>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <map>

namespace voxseg::ui {
namespace {

constexpr int kIndexRole = Qt::UserRole + 1;

QString str(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

SeriesBrowser::SeriesBrowser(QWidget* parent) : QWidget(parent) {
    setObjectName("series_browser");
    tree_ = new QTreeWidget(this);
    tree_->setColumnCount(7);
    tree_->setHeaderLabels({"Patient / study / series", "Modality", "Description", "Size",
                            "Spacing (mm)", "Files", "Warnings"});
    tree_->setRootIsDecorated(true);
    tree_->setAlternatingRowColors(true);
    tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
    load_ = new QPushButton("Load series", this);
    load_->setEnabled(false);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(tree_);
    layout->addWidget(load_);
    connect(tree_, &QTreeWidget::itemActivated, this, [this] { activateCurrent(); });
    connect(load_, &QPushButton::clicked, this, [this] { activateCurrent(); });
    connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
        load_->setEnabled(item && item->data(0, kIndexRole).isValid());
    });
}

void SeriesBrowser::clear() {
    tree_->clear();
    series_count_ = 0;
    load_->setEnabled(false);
}

void SeriesBrowser::setScan(const io::DicomScanResult& scan, const QString& source) {
    clear();
    std::map<std::string, QTreeWidgetItem*> patients, studies;
    for (const auto& c : scan.series) {
        const std::string patient_key = c.patient.name + "\x1f" + c.patient.id;
        QTreeWidgetItem*& patient = patients[patient_key];
        if (!patient) {
            QString name = str(c.patient.name).replace('^', ' ').trimmed();
            if (name.isEmpty()) name = "(no patient name)";
            if (!c.patient.id.empty()) name += "  [" + str(c.patient.id) + "]";
            patient = new QTreeWidgetItem(tree_, {name});
            patient->setExpanded(true);
        }
        QTreeWidgetItem*& study = studies[patient_key + "\x1f" + c.study_uid];
        if (!study) {
            study = new QTreeWidgetItem(patient, {"study " + str(c.study_uid)});
            study->setExpanded(true);
        }
        const Geometry& g = c.geometry;
        QStringList notes;
        if (!c.split_reason.empty()) notes << str(c.split_reason);
        for (const auto& w : c.warnings) notes << str(w);
        auto* item = new QTreeWidgetItem(
            study,
            {QString("#%1  series %2").arg(c.index).arg(c.series_number), str(c.modality),
             str(c.description), QString("%1x%2x%3").arg(g.size[0]).arg(g.size[1]).arg(g.size[2]),
             QString("%1 x %2 x %3")
                 .arg(g.spacing[0], 0, 'g', 4)
                 .arg(g.spacing[1], 0, 'g', 4)
                 .arg(g.spacing[2], 0, 'g', 4),
             QString::number(c.num_files), notes.join("; ")});
        item->setData(0, kIndexRole, c.index);
        item->setToolTip(0, str(c.series_uid));
        item->setToolTip(6, notes.join("\n"));
        if (!c.warnings.empty()) item->setForeground(6, QColor(200, 120, 0));
        ++series_count_;
    }
    if (!scan.skipped.empty()) {
        auto* skipped =
            new QTreeWidgetItem(tree_, {QString("%1 files skipped").arg(scan.skipped.size())});
        for (const auto& s : scan.skipped)
            new QTreeWidgetItem(skipped, {str(s.path), "", "", "", "", "", str(s.reason)});
    }
    tree_->setToolTip(source);
    // Select the first series so Enter / Load works at once.
    for (QTreeWidgetItemIterator it(tree_); *it; ++it)
        if ((*it)->data(0, kIndexRole).isValid()) {
            tree_->setCurrentItem(*it);
            break;
        }
}

void SeriesBrowser::activateCurrent() {
    QTreeWidgetItem* item = tree_->currentItem();
    if (!item || !item->data(0, kIndexRole).isValid()) return;
    emit seriesActivated(item->data(0, kIndexRole).toInt());
}

}  // namespace voxseg::ui
