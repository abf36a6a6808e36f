#include "ui/segmentation_comparison.h"

#include "core/log.h"
#include "edit/segmentation_load.h"
#include "ui/mpr_view.h"
#include "ui/viewer_state.h"

#include <QCheckBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace voxseg::ui {
namespace {

constexpr const char* kComponent = "viewer.compare";

}  // namespace

SegmentationComparison::SegmentationComparison(ViewerState* state, QObject* parent)
    : QObject(parent), state_(state) {
    connect(state_, &ViewerState::imageChanged, this, &SegmentationComparison::clear);
    connect(state_, &ViewerState::labelMapChanged, this, [this] {
        if (active()) (void)recompute();
    });
}

Status SegmentationComparison::load(const QString& path) {
    if (!state_->hasImage())
        return Status(StatusCode::kFailedPrecondition, "open the image first", path.toStdString());
    const auto& series = state_->study().series;
    VOXSEG_ASSIGN_OR_RETURN(edit::LoadedSegmentation file,
                            edit::loadSegmentation(path.toStdString(), state_->image().geometry(),
                                                   series ? &*series : nullptr));
    for (const std::string& w : file.warnings)
        log::warning(kComponent, "{}: {}", path.toStdString(), w);
    return setOther(std::move(file.label_map), path);
}

Status SegmentationComparison::setOther(Volume label_map, const QString& source) {
    if (!state_->hasImage())
        return Status(StatusCode::kFailedPrecondition, "open the image first",
                      source.toStdString());
    Volume previous = other_;
    other_ = std::move(label_map);
    source_ = source;
    Status s = recompute();
    if (!s.isOk()) {
        other_ = previous;
        return s;
    }
    int max_value = 0;
    for (const auto& a : agreement_) max_value = std::max(max_value, a.label);
    colors_.colors.assign(static_cast<size_t>(max_value) + 1, kContourColor);
    colors_.colors[0] = 0;
    log::info(kComponent, "{} compared with the shown segmentation ({} labels)",
              source.toStdString(), agreement_.size());
    emit changed();
    return Status::ok();
}

void SegmentationComparison::clear() {
    other_ = Volume();
    source_.clear();
    agreement_.clear();
    emit changed();
}

Status SegmentationComparison::recompute() {
    agreement_.clear();
    if (!active()) return Status::ok();
    // Without a shown label map every label of the other one is "only in b".
    Volume shown = state_->hasLabelMap() ? state_->labelMap()
                                         : Volume::allocate<uint8_t>(state_->image().geometry());
    auto r = edit::compareSegmentations(shown, other_);
    if (!r.isOk()) return r.status();
    agreement_ = std::move(*r);
    emit changed();
    return Status::ok();
}

void SegmentationComparison::setContoursShown(bool shown) {
    if (shown == shown_) return;
    shown_ = shown;
    emit changed();
}

QImage SegmentationComparison::contours(const SliceFrame& frame, int64_t slice) const {
    QImage img(static_cast<int>(frame.width), static_cast<int>(frame.height),
               QImage::Format_ARGB32);
    img.fill(Qt::transparent);
    if (!active()) return img;
    blendLabels(other_, frame, slice, colors_, OverlayMode::kOutline,
                reinterpret_cast<uint32_t*>(img.bits()));
    return img;
}

void drawComparison(QPainter& p, const MprView& view, const SegmentationComparison& c) {
    if (!c.active() || !c.contoursShown()) return;
    const ViewerState& state = *c.state();
    if (!state.hasImage()) return;
    const SliceFrame& f = state.frame(view.axis());
    const QImage img = c.contours(f, state.slice(view.axis()));
    // The image's pixel edges: pixel centres are at widgetPointOfPixel(c, r).
    const QPointF tl = view.widgetPointOfPixel(-0.5, -0.5);
    const QPointF br = view.widgetPointOfPixel(static_cast<double>(f.width) - 0.5,
                                               static_cast<double>(f.height) - 0.5);
    p.save();
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(QRectF(tl, br), img);
    p.restore();
}

ComparisonPanel::ComparisonPanel(SegmentationComparison* comparison, ViewerState* state,
                                 QWidget* parent)
    : QWidget(parent), comparison_(comparison), state_(state) {
    setObjectName("comparison_panel");
    title_ = new QLabel(this);
    title_->setWordWrap(true);
    table_ = new QTableWidget(0, 6, this);
    table_->setHorizontalHeaderLabels(
        {"Label", "Dice", "mL shown", "mL loaded", "diff mL", "diff %"});
    table_->verticalHeader()->hide();
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
    contours_ = new QCheckBox("Contours of the loaded one", this);
    contours_->setObjectName("comparison_contours");
    contours_->setChecked(comparison_->contoursShown());
    auto* recompute = new QPushButton("Recompute", this);
    recompute->setToolTip("Compare again after edits of the shown segmentation");
    auto* close = new QPushButton("Close", this);
    auto* row = new QHBoxLayout;
    row->addWidget(contours_);
    row->addStretch();
    row->addWidget(recompute);
    row->addWidget(close);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(title_);
    layout->addLayout(row);
    layout->addWidget(table_);
    connect(contours_, &QCheckBox::toggled, comparison_, &SegmentationComparison::setContoursShown);
    connect(recompute, &QPushButton::clicked, this, [this] { (void)comparison_->recompute(); });
    connect(close, &QPushButton::clicked, comparison_, &SegmentationComparison::clear);
    connect(comparison_, &SegmentationComparison::changed, this, &ComparisonPanel::refresh);
    refresh();
}

void ComparisonPanel::refresh() {
    const auto& rows = comparison_->agreement();
    title_->setText(comparison_->active()
                        ? "Shown segmentation vs " + QFileInfo(comparison_->source()).fileName()
                        : "No segmentation to compare (Segmentation > Compare with "
                          "segmentation...)");
    table_->setRowCount(static_cast<int>(rows.size()));
    for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
        const edit::LabelAgreement& a = rows[static_cast<size_t>(r)];
        const std::string name = state_->labelName(a.label);
        const QString cells[] = {
            name.empty() ? QString("label %1").arg(a.label) : QString::fromStdString(name),
            QString::number(a.dice, 'f', 3),
            QString::number(a.volume_a_ml, 'f', 2),
            QString::number(a.volume_b_ml, 'f', 2),
            QString::number(a.volume_difference_ml, 'f', 2),
            a.volume_difference_percent ? QString::number(*a.volume_difference_percent, 'f', 1)
                                        : QString("-")};
        for (int c = 0; c < 6; ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c == 0) item->setData(Qt::UserRole, a.label);
            if (c == 1) item->setData(Qt::UserRole, a.dice);
            table_->setItem(r, c, item);
        }
    }
}

}  // namespace voxseg::ui
