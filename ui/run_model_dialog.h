// Segmentation > Run model: the model package folder and segment's per-run options (device,
// precision, overlap, batch, accumulator, test-time augmentation, post-processing: the schema's
// options marked in_dialog), as a form built from pipeline/segment_options_schema.h, the
// description `voxseg segment` takes its
// options' help and ranges from; values are applied through the schema's parsers, so the
// dialog accepts exactly what the CLI accepts. GUI thread only.
#pragma once

#include "core/status.h"
#include "pipeline/segment.h"

#include <QDialog>
#include <QMap>

class QLabel;
class QLineEdit;

namespace voxseg::ui {

class RunModelDialog : public QDialog {
    Q_OBJECT

  public:
    explicit RunModelDialog(const QString& model_folder = {}, QWidget* parent = nullptr);

    QString modelFolder() const;
    void setModelFolder(const QString& folder);
    // The widget of a schema flag ("--overlap"): QComboBox, QLineEdit, QSpinBox or QCheckBox.
    QWidget* field(const QString& flag) const { return fields_.value(flag); }
    // Sets a field from text as the CLI would take it ("0.25", "cuda:1", "true").
    void setValue(const QString& flag, const QString& text);
    // The form applied to default SegmentOptions; an error names the option.
    Result<pipeline::SegmentOptions> options() const;

  private:
    QString text(const QString& flag) const;
    void validate();

    QLineEdit* folder_;
    QLabel* error_;
    QMap<QString, QWidget*> fields_;
};

}  // namespace voxseg::ui
