#include "ui/label_table.h"

#include "ui/code_picker.h"
#include "ui/viewer_state.h"

#include <QColorDialog>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QPixmap>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>

namespace voxseg::ui {
namespace {

QIcon swatch(const std::array<uint8_t, 3>& c) {
    QPixmap pm(14, 14);
    pm.fill(QColor(c[0], c[1], c[2]));
    return QIcon(pm);
}

constexpr edit::ReviewStatus kStatuses[] = {
    edit::ReviewStatus::kNotReviewed, edit::ReviewStatus::kAccepted, edit::ReviewStatus::kCorrected,
    edit::ReviewStatus::kRejected};

QString codesText(const LabelEntry& e) {
    return QString::fromStdString(e.category.meaning + " / " + e.type.meaning);
}

}  // namespace

LabelTable::LabelTable(ViewerState* state, QWidget* parent) : QWidget(parent), state_(state) {
    setObjectName("label_table");
    table_ = new QTableWidget(0, kColumns, this);
    table_->setHorizontalHeaderLabels(
        {"Label", "Value", "Volume (mL)", "Voxels", "Opacity %", "Review", "Category / type"});
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);

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
    auto* row2 = new QHBoxLayout;
    row2->addWidget(add_);
    row2->addWidget(delete_);
    row2->addStretch();
    row2->addWidget(filter_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addLayout(row);
    layout->addLayout(row2);
    layout->addWidget(table_);

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
        if (column == kName || r < 0 || static_cast<size_t>(r) >= state_->labels().size()) return;
        const int value = state_->labels()[r].value;
        for (const auto& l : state_->statistics().labels) {
            if (l.label != value || l.voxels == 0) continue;
            const Vec3 idx = state_->image().geometry().physicalToIndex(l.centroid_lps);
            state_->setCursor({static_cast<int64_t>(std::lround(idx[0])),
                               static_cast<int64_t>(std::lround(idx[1])),
                               static_cast<int64_t>(std::lround(idx[2]))});
        }
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
    connect(state_, &ViewerState::labelMapChanged, this, &LabelTable::rebuild);
    // Queued: a rename or status change is reported from inside the row's own widget signal.
    connect(state_, &ViewerState::labelTableChanged, this, &LabelTable::rebuild,
            Qt::QueuedConnection);
    connect(state_, &ViewerState::labelDisplayChanged, this, &LabelTable::syncDisplay);
    rebuild();
}

void LabelTable::rebuild() {
    updating_ = true;
    const int current = table_->currentRow();
    const auto& labels = state_->labels();
    table_->setRowCount(static_cast<int>(labels.size()));
    for (size_t i = 0; i < labels.size(); ++i) {
        const LabelEntry& e = labels[i];
        const int r = static_cast<int>(i);
        auto* name = new QTableWidgetItem(swatch(e.color), QString::fromStdString(e.name));
        name->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable |
                       Qt::ItemIsEditable);
        name->setCheckState(e.visible ? Qt::Checked : Qt::Unchecked);
        table_->setItem(r, kName, name);
        auto fixed = [](const QString& text) {
            auto* item = new QTableWidgetItem(text);
            item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
            return item;
        };
        table_->setItem(r, kValue, fixed(QString::number(e.value)));
        table_->setItem(r, kVolume, fixed(QString::number(e.volume_ml, 'f', 2)));
        table_->setItem(r, kVoxels, fixed(QString::number(e.voxels)));
        auto* opacity = new QSpinBox(table_);
        opacity->setRange(0, 100);
        opacity->setValue(static_cast<int>(std::lround(e.opacity * 100)));
        connect(opacity, &QSpinBox::valueChanged, this, [this, i](int v) {
            if (!updating_) state_->setLabelOpacity(i, v / 100.0);
        });
        table_->setCellWidget(r, kOpacity, opacity);
        auto* status = new QComboBox(table_);
        for (edit::ReviewStatus s : kStatuses)
            status->addItem(edit::reviewStatusName(s), static_cast<int>(s));
        status->setCurrentIndex(status->findData(static_cast<int>(e.status)));
        connect(status, &QComboBox::activated, this, [this, i, status](int index) {
            if (!updating_)
                state_->setLabelStatus(
                    i, static_cast<edit::ReviewStatus>(status->itemData(index).toInt()));
        });
        table_->setCellWidget(r, kStatus, status);
        auto* codes = new QToolButton(table_);
        codes->setText(codesText(e));
        codes->setToolTip("Pick the DICOM category and type (CID 7150 / 7151)");
        codes->setAutoRaise(true);
        connect(codes, &QToolButton::clicked, this, [this, r] { editCodes(r); });
        table_->setCellWidget(r, kCodes, codes);
    }
    if (current >= 0 && current < table_->rowCount()) table_->setCurrentCell(current, kName);
    updating_ = false;
    applyFilter();
    syncDisplay();
}

void LabelTable::applyFilter() {
    const int wanted = filter_->currentData().toInt();
    const auto& labels = state_->labels();
    for (int r = 0; r < table_->rowCount() && static_cast<size_t>(r) < labels.size(); ++r)
        table_->setRowHidden(r, wanted >= 0 && static_cast<int>(labels[r].status) != wanted);
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
            item->setIcon(swatch(labels[r].color));
        }
        if (auto* spin = qobject_cast<QSpinBox*>(table_->cellWidget(r, kOpacity)))
            spin->setValue(static_cast<int>(std::lround(labels[r].opacity * 100)));
    }
    updating_ = false;
}

}  // namespace voxseg::ui
