#include "ui/label_table.h"

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
#include <QVBoxLayout>

namespace voxseg::ui {
namespace {

enum Column { kName = 0, kValue, kVolume, kVoxels, kOpacity, kColumns };

QIcon swatch(const std::array<uint8_t, 3>& c) {
    QPixmap pm(14, 14);
    pm.fill(QColor(c[0], c[1], c[2]));
    return QIcon(pm);
}

}  // namespace

LabelTable::LabelTable(ViewerState* state, QWidget* parent) : QWidget(parent), state_(state) {
    setObjectName("label_table");
    table_ = new QTableWidget(0, kColumns, this);
    table_->setHorizontalHeaderLabels({"Label", "Value", "Volume (mL)", "Voxels", "Opacity %"});
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);

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
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addLayout(row);
    layout->addWidget(table_);

    connect(mode_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (!updating_) state_->setOverlayMode(i == 1 ? OverlayMode::kOutline : OverlayMode::kFill);
    });
    connect(show_all, &QPushButton::clicked, this, [this] { state_->setAllLabelsVisible(true); });
    connect(hide_all, &QPushButton::clicked, this, [this] { state_->setAllLabelsVisible(false); });
    connect(table_, &QTableWidget::itemChanged, this, [this](QTableWidgetItem* item) {
        if (updating_ || item->column() != kName) return;
        state_->setLabelVisible(static_cast<size_t>(item->row()),
                                item->checkState() == Qt::Checked);
    });
    // Double-click on a row moves the crosshair to that label's centroid.
    connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int r, int) {
        const auto& stats = state_->statistics().labels;
        if (r < 0 || static_cast<size_t>(r) >= stats.size() || stats[r].voxels == 0) return;
        const Vec3 idx = state_->image().geometry().physicalToIndex(stats[r].centroid_lps);
        state_->setCursor({static_cast<int64_t>(std::lround(idx[0])),
                           static_cast<int64_t>(std::lround(idx[1])),
                           static_cast<int64_t>(std::lround(idx[2]))});
    });
    // Colour: right-click a row (or its context-menu key) opens a colour dialog.
    table_->setContextMenuPolicy(Qt::CustomContextMenu);
    connect(table_, &QTableWidget::customContextMenuRequested, this, [this](const QPoint& p) {
        const int r = table_->rowAt(p.y());
        if (r < 0) return;
        QMenu menu(this);
        menu.addAction("Colour...", this, [this, r] { chooseColor(r); });
        menu.exec(table_->viewport()->mapToGlobal(p));
    });
    connect(state_, &ViewerState::labelMapChanged, this, &LabelTable::rebuild);
    connect(state_, &ViewerState::labelDisplayChanged, this, &LabelTable::syncDisplay);
    rebuild();
}

void LabelTable::rebuild() {
    updating_ = true;
    const auto& labels = state_->labels();
    table_->setRowCount(static_cast<int>(labels.size()));
    for (size_t i = 0; i < labels.size(); ++i) {
        const LabelEntry& e = labels[i];
        const int r = static_cast<int>(i);
        auto* name = new QTableWidgetItem(swatch(e.color), QString::fromStdString(e.name));
        name->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable);
        name->setCheckState(e.visible ? Qt::Checked : Qt::Unchecked);
        table_->setItem(r, kName, name);
        table_->setItem(r, kValue, new QTableWidgetItem(QString::number(e.value)));
        table_->setItem(r, kVolume, new QTableWidgetItem(QString::number(e.volume_ml, 'f', 2)));
        table_->setItem(r, kVoxels, new QTableWidgetItem(QString::number(e.voxels)));
        auto* opacity = new QSpinBox(table_);
        opacity->setRange(0, 100);
        opacity->setValue(static_cast<int>(std::lround(e.opacity * 100)));
        connect(opacity, &QSpinBox::valueChanged, this, [this, i](int v) {
            if (!updating_) state_->setLabelOpacity(i, v / 100.0);
        });
        table_->setCellWidget(r, kOpacity, opacity);
    }
    updating_ = false;
    syncDisplay();
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
