#include "ui/label_table.h"

#include "pipeline/input_checks.h"
#include "pipeline/model_card.h"
#include "ui/code_picker.h"
#include "ui/viewer_state.h"

#include <QAction>
#include <QApplication>
#include <QColorDialog>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QPixmap>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QStyle>
#include <QTableWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

namespace voxseg::ui {
namespace {

QIcon swatch(const std::array<uint8_t, 3>& c) {
    QPixmap pm(14, 14);
    pm.fill(QColor(c[0], c[1], c[2]));
    return QIcon(pm);
}

constexpr int kColorRole = Qt::UserRole + 1;
constexpr int kFlagRole = Qt::UserRole + 2;

// The volume cell's warning icon and tooltip for an implausible volume; the icon is set only
// when the flag changes (a new icon makes the view lay its columns out again).
void setFlag(QTableWidgetItem* item, const QString& flag, const QString& tip) {
    if (item->data(kFlagRole).toString() != flag) {
        item->setData(kFlagRole, flag);
        item->setIcon(flag.isEmpty()
                          ? QIcon()
                          : QApplication::style()->standardIcon(QStyle::SP_MessageBoxWarning));
    }
    item->setToolTip(flag.isEmpty() ? tip : flag + "\n" + tip);
}

// Sets the name cell's swatch when the colour changed (a new icon is a change of the cell: the
// view would lay its columns out again).
void setSwatch(QTableWidgetItem* item, const std::array<uint8_t, 3>& c) {
    const uint rgb = qRgb(c[0], c[1], c[2]);
    const QVariant shown = item->data(kColorRole);
    if (shown.isValid() && shown.toUInt() == rgb) return;
    item->setData(kColorRole, rgb);
    item->setIcon(swatch(c));
}

constexpr edit::ReviewStatus kStatuses[] = {
    edit::ReviewStatus::kNotReviewed, edit::ReviewStatus::kAccepted, edit::ReviewStatus::kCorrected,
    edit::ReviewStatus::kRejected};

// The type names the structure ("Liver"); the category is in the tooltip (the column stays
// narrow enough for the dock).
QString codesText(const LabelEntry& e) { return QString::fromStdString(e.type.meaning); }
QString codesTip(const LabelEntry& e) {
    return QString::fromStdString(e.category.meaning + " / " + e.type.meaning) +
           "\nClick to pick the DICOM category and type (CID 7150 / 7151)";
}

// The mean cell: "41.2 ± 3.1" (mean and SD as numbers in UserRole and UserRole + 1, for tests and
// sorting), min and max in the tooltip; empty for a label without voxels.
void setMean(QTableWidgetItem* item, const pipeline::StatisticsReport& stats, int value) {
    const pipeline::IntensityStatistics* in = nullptr;
    for (const auto& l : stats.labels)
        if (l.label == value && l.intensity) in = &*l.intensity;
    if (!in) {
        item->setText({});
        item->setData(Qt::UserRole, {});
        item->setData(Qt::UserRole + 1, {});
        item->setToolTip({});
        return;
    }
    auto num = [](double x) { return QString::number(x, 'f', std::abs(x) >= 100 ? 0 : 1); };
    const QString unit = QString::fromStdString(stats.intensity_unit);
    item->setText(num(in->mean) + " ± " + num(in->std));
    item->setData(Qt::UserRole, in->mean);
    item->setData(Qt::UserRole + 1, in->std);
    item->setToolTip(QString("Image inside the label: mean %1 %2, SD %3, min %4, max %5")
                         .arg(in->mean, 0, 'f', 2)
                         .arg(unit)
                         .arg(in->std, 0, 'f', 2)
                         .arg(in->min)
                         .arg(in->max));
}

}  // namespace

LabelTable::LabelTable(ViewerState* state, QWidget* parent) : QWidget(parent), state_(state) {
    setObjectName("label_table");
    setUpTable();

    mode_ = new QComboBox(this);
    mode_->setObjectName("overlay_mode");
    mode_->addItems({"Fill", "Outline"});
    auto* show_all = new QPushButton("Show all", this);
    auto* hide_all = new QPushButton("Hide all", this);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel("Overlay:", this));
    row->addWidget(mode_);
    row->addStretch();
    row->addWidget(show_all);
    row->addWidget(hide_all);
    add_ = new QPushButton("Add", this);
    add_->setObjectName("add_label");
    add_->setToolTip("Add a label (the lowest free value); paint it with the edit tools");
    delete_ = new QPushButton("Delete", this);
    delete_->setObjectName("delete_label");
    delete_->setToolTip("Delete the selected label and clear its voxels (undoable)");
    filter_ = new QComboBox(this);
    filter_->setObjectName("status_filter");
    filter_->addItem("All statuses", -1);
    for (edit::ReviewStatus s : kStatuses)
        filter_->addItem(QString("Only ") + edit::reviewStatusName(s), static_cast<int>(s));
    accept_next_ = new QPushButton("Accept + next", this);
    accept_next_->setObjectName("accept_next");
    accept_next_->setToolTip(
        "Accept the selected label and select the next one not reviewed, with the crosshair on "
        "it (A; C corrected, X rejected, N next without a status)");
    progress_ = new QLabel(this);
    progress_->setObjectName("review_progress");
    auto* row2 = new QHBoxLayout;
    row2->addWidget(add_);
    row2->addWidget(delete_);
    row2->addStretch();
    row2->addWidget(filter_);
    auto* row3 = new QHBoxLayout;
    row3->addWidget(accept_next_);
    row3->addStretch();
    row3->addWidget(progress_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addLayout(row);
    layout->addLayout(row2);
    layout->addLayout(row3);
    findings_ = new QLabel(this);
    findings_->setObjectName("run_findings");
    findings_->setWordWrap(true);
    findings_->setTextFormat(Qt::RichText);
    findings_->setVisible(false);
    layout->addWidget(findings_);
    layout->addWidget(table_);
    addReviewKeys();

    connect(mode_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_) state_->setOverlayMode(i == 1 ? OverlayMode::kOutline : OverlayMode::kFill);
    });
    connect(show_all, &QPushButton::clicked, this, [this] { state_->setAllLabelsVisible(true); });
    connect(hide_all, &QPushButton::clicked, this, [this] { state_->setAllLabelsVisible(false); });
    connect(add_, &QPushButton::clicked, this, [this] { addLabel(); });
    connect(delete_, &QPushButton::clicked, this, [this] {
        const auto rows = table_->selectionModel()->selectedRows();
        if (!rows.isEmpty()) (void)deleteLabel(rows.front().row());
    });
    connect(filter_, &QComboBox::currentIndexChanged, this, &LabelTable::applyFilter);
    connectTable();
    // Another label map: the last run's findings are not about it (a run sets them after).
    connect(state_, &ViewerState::labelMapChanged, this, [this] {
        flags_.clear();
        findings_->clear();
        findings_->setVisible(false);
    });
    connect(state_, &ViewerState::labelMapChanged, this, &LabelTable::rebuild);
    // Queued: a rename or status change is reported from inside the row's own widget signal.
    connect(state_, &ViewerState::labelTableChanged, this, &LabelTable::rebuild,
            Qt::QueuedConnection);
    connect(state_, &ViewerState::labelDisplayChanged, this, &LabelTable::syncDisplay);
    rebuild();
}

// The table: its columns, one row selected at a time.
void LabelTable::setUpTable() {
    table_ = new QTableWidget(0, kColumns, this);
    table_->setHorizontalHeaderLabels(
        {"Label", "Review", "mL", "Mean", "Type", "Value", "Voxels", "Opacity %"});
    table_->verticalHeader()->hide();
    // The name takes what the others leave (elided; full in its tooltip); the rest fit their
    // contents. Voxels (also in the mL tooltip) and opacity are shown from the header's context
    // menu.
    QHeaderView* header = table_->horizontalHeader();
    header->setSectionResizeMode(QHeaderView::ResizeToContents);
    header->setSectionResizeMode(kName, QHeaderView::Stretch);
    header->setStretchLastSection(false);
    header->setMinimumSectionSize(36);
    table_->setColumnHidden(kVoxels, true);
    table_->setColumnHidden(kOpacity, true);
    table_->setTextElideMode(Qt::ElideRight);
    table_->setWordWrap(false);
    header->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(header, &QHeaderView::customContextMenuRequested, this, [this, header](QPoint p) {
        QMenu menu(this);
        for (int c = kStatus; c < kColumns; ++c) {
            QAction* a = menu.addAction(table_->horizontalHeaderItem(c)->text());
            a->setCheckable(true);
            a->setChecked(!table_->isColumnHidden(c));
            connect(a, &QAction::toggled, this,
                    [this, c](bool on) { table_->setColumnHidden(c, !on); });
        }
        menu.exec(header->mapToGlobal(p));
    });
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
}

void LabelTable::addReviewKeys() {
    // The review keys: window shortcuts (a text field with the focus keeps its letters).
    struct ReviewKey {
        Qt::Key key;
        const char* text;
        std::optional<edit::ReviewStatus> status;
    };
    const ReviewKey keys[] = {
        {Qt::Key_A, "Accept and next", edit::ReviewStatus::kAccepted},
        {Qt::Key_C, "Corrected and next", edit::ReviewStatus::kCorrected},
        {Qt::Key_X, "Rejected and next", edit::ReviewStatus::kRejected},
        {Qt::Key_N, "Next label not reviewed", std::nullopt},
    };
    for (const ReviewKey& k : keys) {
        auto* a = new QAction(k.text, this);
        a->setShortcut(QKeySequence(k.key));
        a->setShortcutContext(Qt::WindowShortcut);
        a->setObjectName(QString("review_") + QChar(static_cast<char>(k.key)).toLower());
        connect(a, &QAction::triggered, this, [this, status = k.status] { reviewAndNext(status); });
        addAction(a);
        if (k.key == Qt::Key_A) accept_next_action_ = a;
    }
    connect(accept_next_, &QPushButton::clicked, this,
            [this] { reviewAndNext(edit::ReviewStatus::kAccepted); });
}

// A row's check box and name, selection, double-click and context menu.
void LabelTable::connectTable() {
    connect(table_, &QTableWidget::itemChanged, this, [this](QTableWidgetItem* item) {
        if (updating_ || item->column() != kName) return;
        const auto r = static_cast<size_t>(item->row());
        state_->setLabelVisible(r, item->checkState() == Qt::Checked);
        const std::string name = item->text().trimmed().toStdString();
        if (r < state_->labels().size() && !name.empty() && name != state_->labels()[r].name)
            state_->renameLabel(r, name);
    });
    connect(table_, &QTableWidget::currentCellChanged, this, [this](int r, int, int, int) {
        if (!updating_ && r >= 0 && static_cast<size_t>(r) < state_->labels().size())
            emit labelActivated(state_->labels()[r].value);
    });
    // Double-click on the value, volume or voxel cells moves the crosshair to that label's
    // centroid (double-click on the name renames).
    connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int r, int column) {
        if (column != kName) goToLabel(r);
    });
    // Colour and codes: right-click a row (or its context-menu key).
    table_->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(table_, &QTableWidget::customContextMenuRequested, this, [this](const QPoint& p) {
        const int r = table_->rowAt(p.y());
        if (r < 0) return;
        QMenu menu(this);
        menu.addAction("Colour...", this, [this, r] { chooseColor(r); });
        menu.addAction("Category and type...", this, [this, r] { editCodes(r); });
        menu.addAction("Rename", this, [this, r] { table_->editItem(table_->item(r, kName)); });
        menu.addAction("Delete", this, [this, r] { (void)deleteLabel(r); });
        menu.exec(table_->viewport()->mapToGlobal(p));
    });
}

void LabelTable::goToLabel(int r) {
    if (r < 0 || static_cast<size_t>(r) >= state_->labels().size()) return;
    const int value = state_->labels()[static_cast<size_t>(r)].value;
    for (const auto& l : state_->statistics().labels) {
        if (l.label != value || l.voxels == 0) continue;
        const Vec3 idx = state_->image().geometry().physicalToIndex(l.centroid_lps);
        state_->setCursor({static_cast<int64_t>(std::lround(idx[0])),
                           static_cast<int64_t>(std::lround(idx[1])),
                           static_cast<int64_t>(std::lround(idx[2]))});
    }
}

QString LabelTable::progressText() const {
    const auto& labels = state_->labels();
    const auto reviewed = std::count_if(labels.begin(), labels.end(), [](const LabelEntry& e) {
        return e.status != edit::ReviewStatus::kNotReviewed;
    });
    return QString("%1 of %2 reviewed").arg(reviewed).arg(labels.size());
}

bool LabelTable::reviewAndNext(std::optional<edit::ReviewStatus> status) {
    const auto& labels = state_->labels();
    const int n = static_cast<int>(labels.size());
    if (n == 0) return false;
    auto open = [&](int r) {
        return !table_->isRowHidden(r) &&
               labels[static_cast<size_t>(r)].status == edit::ReviewStatus::kNotReviewed;
    };
    int r = table_->currentRow();
    if (r < 0 || r >= n) {
        r = 0;
        while (r < n && !open(r)) ++r;
        if (r == n) return false;
    }
    if (status) state_->setLabelStatus(static_cast<size_t>(r), *status);
    // The next one not reviewed after r (wrapping; r itself when only moving and still open).
    for (int step = 1; step <= n; ++step) {
        const int next = (r + step) % n;
        if (!open(next)) continue;
        table_->setCurrentCell(next, kName);
        table_->scrollToItem(table_->item(next, kName));
        goToLabel(next);
        return true;
    }
    emit reviewFinished();
    return false;
}

void LabelTable::fillRow(int r) {
    const size_t i = static_cast<size_t>(r);
    const LabelEntry& e = state_->labels()[i];
    auto* name = new QTableWidgetItem(swatch(e.color), QString::fromStdString(e.name));
    name->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable |
                   Qt::ItemIsEditable);
    table_->setItem(r, kName, name);
    for (int c : {kValue, kVolume, kMean, kVoxels}) {
        auto* item = new QTableWidgetItem;
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
        table_->setItem(r, c, item);
    }
    auto* opacity = new QSpinBox(table_);
    opacity->setRange(0, 100);
    connect(opacity, &QSpinBox::valueChanged, this, [this, i](int v) {
        if (!updating_) state_->setLabelOpacity(i, v / 100.0);
    });
    table_->setCellWidget(r, kOpacity, opacity);
    auto* status = new QComboBox(table_);
    for (edit::ReviewStatus s : kStatuses)
        status->addItem(edit::reviewStatusName(s), static_cast<int>(s));
    connect(status, &QComboBox::activated, this, [this, i, status](int index) {
        if (!updating_)
            state_->setLabelStatus(
                i, static_cast<edit::ReviewStatus>(status->itemData(index).toInt()));
    });
    table_->setCellWidget(r, kStatus, status);
    auto* codes = new QToolButton(table_);
    codes->setAutoRaise(true);
    connect(codes, &QToolButton::clicked, this, [this, r] { editCodes(r); });
    table_->setCellWidget(r, kCodes, codes);
}

bool LabelTable::refreshRows() {
    const auto& labels = state_->labels();
    if (table_->rowCount() != static_cast<int>(labels.size())) return false;
    for (size_t i = 0; i < labels.size(); ++i) {
        const LabelEntry& e = labels[i];
        const int r = static_cast<int>(i);
        QTableWidgetItem* value = table_->item(r, kValue);
        if (!value || value->data(Qt::UserRole).toInt() != e.value) return false;
        QTableWidgetItem* name = table_->item(r, kName);
        name->setText(QString::fromStdString(e.name));
        name->setToolTip(QString("%1 (value %2)").arg(QString::fromStdString(e.name)).arg(e.value));
        name->setCheckState(e.visible ? Qt::Checked : Qt::Unchecked);
        setSwatch(name, e.color);
        table_->item(r, kVolume)->setText(QString::number(e.volume_ml, 'f', 2));
        setFlag(table_->item(r, kVolume), labelFlag(e.value), QString("%1 voxels").arg(e.voxels));
        table_->item(r, kVoxels)->setText(QString::number(e.voxels));
        setMean(table_->item(r, kMean), state_->statistics(), e.value);
        if (auto* o = qobject_cast<QSpinBox*>(table_->cellWidget(r, kOpacity)))
            o->setValue(static_cast<int>(std::lround(e.opacity * 100)));
        if (auto* s = qobject_cast<QComboBox*>(table_->cellWidget(r, kStatus)))
            s->setCurrentIndex(s->findData(static_cast<int>(e.status)));
        if (auto* c = qobject_cast<QToolButton*>(table_->cellWidget(r, kCodes))) {
            c->setText(codesText(e));
            c->setToolTip(codesTip(e));
        }
    }
    return true;
}

void LabelTable::setModelFindings(const pipeline::StatisticsReport& run) {
    flags_.clear();
    for (const auto& l : run.labels)
        if (l.implausible && l.plausible_volume_ml)
            flags_[l.label] = QString(
                                  "implausible: %1 mL is outside the model's plausible "
                                  "%2..%3 mL; check the input and the result")
                                  .arg(l.volume_ml, 0, 'f', 2)
                                  .arg((*l.plausible_volume_ml)[0])
                                  .arg((*l.plausible_volume_ml)[1]);
    QStringList lines;
    for (const auto& m : run.measurements)
        lines << QString::fromStdString(pipeline::measurementText(m)).toHtmlEscaped();
    // segment's advice on its CLI flag ("(--strict-input refuses such inputs)") is not the
    // viewer user's: the dialog's box has another name.
    const QString cli_advice = QString::fromStdString(pipeline::inputWarning(""));
    for (const auto& w : run.warnings) {
        QString text = QString::fromStdString(w);
        if (text.endsWith(cli_advice)) text.chop(cli_advice.size());
        lines << "<span style='color:#b85c00'>&#9888; " + text.toHtmlEscaped() + "</span>";
    }
    findings_->setText(lines.join("<br>"));
    findings_->setVisible(!lines.isEmpty());
    rebuild();
}

QString LabelTable::labelFlag(int value) const {
    const auto it = flags_.find(value);
    return it == flags_.end() ? QString() : it->second;
}

void LabelTable::rebuild() {
    updating_ = true;
    // A change (status, name, statistics) updates the cells in place; new or removed labels
    // rebuild the rows. Either way the scroll position and the current row stay.
    QScrollBar* h = table_->horizontalScrollBar();
    QScrollBar* v = table_->verticalScrollBar();
    const int hpos = h->value(), vpos = v->value();
    if (!refreshRows()) {
        const int current = table_->currentRow();
        const auto& labels = state_->labels();
        table_->setRowCount(0);
        table_->setRowCount(static_cast<int>(labels.size()));
        for (int r = 0; r < table_->rowCount(); ++r) {
            fillRow(r);
            table_->item(r, kValue)->setText(QString::number(labels[static_cast<size_t>(r)].value));
            table_->item(r, kValue)->setData(Qt::UserRole, labels[static_cast<size_t>(r)].value);
        }
        refreshRows();
        if (current >= 0 && current < table_->rowCount()) table_->setCurrentCell(current, kName);
    }
    progress_->setText(progressText());
    // "HU" on CT, else "Mean" (the image's own units).
    const QString unit = QString::fromStdString(state_->statistics().intensity_unit);
    const QString mean_header = unit.isEmpty() ? QString("Mean") : unit;
    if (table_->horizontalHeaderItem(kMean)->text() != mean_header)
        table_->horizontalHeaderItem(kMean)->setText(mean_header);
    updating_ = false;
    applyFilter();
    syncDisplay();
    h->setValue(hpos);
    v->setValue(vpos);
    // Column widths follow the contents after the next layout: keep the position then too.
    QTimer::singleShot(0, this, [this, hpos, vpos] {
        table_->horizontalScrollBar()->setValue(hpos);
        table_->verticalScrollBar()->setValue(vpos);
    });
}

void LabelTable::applyFilter() {
    const int wanted = filter_->currentData().toInt();
    const auto& labels = state_->labels();
    for (int r = 0; r < table_->rowCount() && static_cast<size_t>(r) < labels.size(); ++r) {
        const bool hide = wanted >= 0 && static_cast<int>(labels[r].status) != wanted;
        if (table_->isRowHidden(r) != hide) table_->setRowHidden(r, hide);
    }
}

void LabelTable::chooseColor(int row) {
    const auto& labels = state_->labels();
    if (row < 0 || static_cast<size_t>(row) >= labels.size()) return;
    const auto c = labels[static_cast<size_t>(row)].color;
    const QColor chosen = QColorDialog::getColor(
        QColor(c[0], c[1], c[2]), this, "Colour of " + QString::fromStdString(labels[row].name));
    if (!chosen.isValid()) return;  // cancelled
    state_->setLabelColor(static_cast<size_t>(row),
                          {static_cast<uint8_t>(chosen.red()), static_cast<uint8_t>(chosen.green()),
                           static_cast<uint8_t>(chosen.blue())});
}

CodePicker* LabelTable::editCodes(int row) {
    const auto& labels = state_->labels();
    if (row < 0 || static_cast<size_t>(row) >= labels.size()) return nullptr;
    const LabelEntry& e = labels[static_cast<size_t>(row)];
    auto* picker = new CodePicker(e.category, e.type, this);
    picker->setAttribute(Qt::WA_DeleteOnClose);
    const int value = e.value;
    connect(picker, &QDialog::accepted, this, [this, picker, value] {
        const int r = state_->rowOfLabel(value);
        if (r >= 0)
            state_->setLabelCodes(static_cast<size_t>(r), picker->category(), picker->type());
    });
    picker->open();
    return picker;
}

int LabelTable::addLabel() {
    if (!state_->hasImage()) return 0;
    const size_t row = state_->addLabel("");
    const int value = state_->labels()[row].value;
    table_->setCurrentCell(static_cast<int>(row), kName);
    emit labelActivated(value);
    return value;
}

Status LabelTable::deleteLabel(int row) {
    const auto& labels = state_->labels();
    if (row < 0 || static_cast<size_t>(row) >= labels.size())
        return Status(StatusCode::kInvalidArgument, "no such label row");
    const int value = labels[static_cast<size_t>(row)].value;
    // Counts lag edits until statistics are recomputed: clear whatever the count says.
    if (clear_label_ && state_->hasLabelMap()) VOXSEG_RETURN_IF_ERROR(clear_label_(value));
    const int r = state_->rowOfLabel(value);
    if (r >= 0) state_->removeLabel(static_cast<size_t>(r));
    return Status::ok();
}

void LabelTable::syncDisplay() {
    updating_ = true;
    mode_->setCurrentIndex(state_->overlayMode() == OverlayMode::kOutline ? 1 : 0);
    const auto& labels = state_->labels();
    for (int r = 0; r < table_->rowCount() && static_cast<size_t>(r) < labels.size(); ++r) {
        if (auto* item = table_->item(r, kName)) {
            item->setCheckState(labels[r].visible ? Qt::Checked : Qt::Unchecked);
            setSwatch(item, labels[r].color);
        }
        if (auto* spin = qobject_cast<QSpinBox*>(table_->cellWidget(r, kOpacity)))
            spin->setValue(static_cast<int>(std::lround(labels[r].opacity * 100)));
    }
    updating_ = false;
}

}  // namespace voxseg::ui
