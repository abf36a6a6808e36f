#include "ui/series_browser.h"

#include <QApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputEvent>
#include <QMenu>
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
    beside_ = new QPushButton("Open beside", this);
    beside_->setToolTip("Open the series beside the open ones (Ctrl+double-click, Ctrl+Enter)");
    beside_->setEnabled(false);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(tree_);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(load_, 1);
    buttons->addWidget(beside_, 1);
    layout->addLayout(buttons);
    // Ctrl held while activating (double-click, Enter): beside.
    tree_->installEventFilter(this);
    tree_->viewport()->installEventFilter(this);
    connect(tree_, &QTreeWidget::itemActivated, this, [this] {
        activateCurrent(ctrl_ || (QApplication::keyboardModifiers() & Qt::ControlModifier));
    });
    connect(load_, &QPushButton::clicked, this, [this] { activateCurrent(false); });
    connect(beside_, &QPushButton::clicked, this, [this] { activateCurrent(true); });
    connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
        const bool series = item && item->data(0, kIndexRole).isValid();
        load_->setEnabled(series);
        beside_->setEnabled(series);
    });
    tree_->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(tree_, &QWidget::customContextMenuRequested, this, [this](const QPoint& p) {
        QTreeWidgetItem* item = tree_->itemAt(p);
        if (!item || !item->data(0, kIndexRole).isValid()) return;
        tree_->setCurrentItem(item);
        QMenu menu(this);
        menu.addAction("Open (replace the active series)", this,
                       [this] { activateCurrent(false); });
        menu.addAction("Open beside", this, [this] { activateCurrent(true); });
        menu.exec(tree_->viewport()->mapToGlobal(p));
    });
}

void SeriesBrowser::clear() {
    tree_->clear();
    series_count_ = 0;
    load_->setEnabled(false);
    beside_->setEnabled(false);
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

bool SeriesBrowser::eventFilter(QObject* watched, QEvent* event) {
    switch (event->type()) {
        case QEvent::MouseButtonPress:
        case QEvent::MouseButtonDblClick:
        case QEvent::KeyPress:
            ctrl_ = static_cast<QInputEvent*>(event)->modifiers() & Qt::ControlModifier;
            break;
        default:
            break;
    }
    return QWidget::eventFilter(watched, event);
}

void SeriesBrowser::activateCurrent(bool beside) {
    QTreeWidgetItem* item = tree_->currentItem();
    if (!item || !item->data(0, kIndexRole).isValid()) return;
    const int index = item->data(0, kIndexRole).toInt();
    if (beside)
        emit seriesActivatedBeside(index);
    else
        emit seriesActivated(index);
}

}  // namespace voxseg::ui
