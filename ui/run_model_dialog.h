// Segmentation > Run model: the model package folder, the model's card and the input checks
// against the loaded image, and segment's per-run options, before the user presses Run.
// - The card (pipeline/model_card.h, read through engine::readModelPackage): name, description,
//   intended input, licence, attribution, citation, disclaimer, declared measurements, plausible
//   results.
// - The input checks (pipeline/input_checks.h, the functions `voxseg segment` runs): the loaded
//   image's modality, extent and spacing against the model's intended input, shown in colour.
//   A channel modality the model does not take is shown with its reason and a "Run anyway
//   (ignore modality)" box, segment's --ignore-modality (Run stays refused until it is ticked).
// - The options (device, precision, overlap, batch, accumulator, test-time augmentation,
//   post-processing, input checks: the schema's options marked in_dialog) as a form built from
//   pipeline/segment_options_schema.h, the description `voxseg segment` takes its options' help
//   and ranges from; those marked advanced (device, precision, batch, accumulator) sit in a
//   collapsed "Advanced" section. Values are applied through the schema's parsers, so the dialog
//   accepts exactly what the CLI accepts.
// GUI thread only.
#pragma once

#include "core/status.h"
#include "engine/model/model_package.h"
#include "pipeline/input_checks.h"
#include "pipeline/segment.h"
#include "pipeline/segment_options_schema.h"

#include <QDialog>
#include <QMap>

#include <optional>
#include <string>
#include <vector>

class QCheckBox;
class QLabel;
class QLineEdit;
class QToolButton;
class QVBoxLayout;

namespace voxseg::ui {

// How the viewer's user runs a model on another modality anyway (in refusals instead of
// segment's --ignore-modality, which a viewer user never types).
inline constexpr const char* kIgnoreModalityHint =
    "tick \"Run anyway (ignore modality)\" in the Run model dialog";

class RunModelDialog : public QDialog {
    Q_OBJECT

  public:
    explicit RunModelDialog(const QString& model_folder = {}, QWidget* parent = nullptr);

    QString modelFolder() const;
    void setModelFolder(const QString& folder);
    // The image the model would run on (its grid and channel modalities): the input checks
    // compare it with the model's card. Without one, no input is checked.
    void setInput(const pipeline::StudyInput& study);
    // The widget of a schema flag ("--overlap"): QComboBox, QLineEdit, QSpinBox or QCheckBox.
    QWidget* field(const QString& flag) const { return fields_.value(flag); }
    // Sets a field from text as the CLI would take it ("0.25", "cuda:1", "true").
    void setValue(const QString& flag, const QString& text);
    // The form applied to default SegmentOptions; an error names the option.
    Result<pipeline::SegmentOptions> options() const;

    // The model's card as shown (plain text), the input checks' findings, the modality box.
    QLabel* cardLabel() const { return card_; }
    QLabel* inputChecksLabel() const { return checks_; }
    const std::vector<std::string>& inputFindings() const { return findings_; }
    QWidget* modalityBox() const { return modality_box_; }
    QCheckBox* ignoreModalityBox() const { return ignore_modality_; }
    QToolButton* advancedToggle() const { return advanced_toggle_; }
    QWidget* advancedSection() const { return advanced_; }
    // Why Run is refused now ("" when it may run).
    QString refusal() const;

  private:
    void buildOptions(QVBoxLayout* layout);
    QWidget* makeField(const pipeline::SegmentOptionSpec& spec);
    QString text(const QString& flag) const;
    // Reads the package when the folder changed; shows its card.
    void loadModel();
    // Runs the input checks of the loaded model on the input; shows them.
    void checkInput();
    void validate();

    QLineEdit* folder_;
    QLabel* card_;
    QLabel* checks_;
    QWidget* modality_box_;
    QLabel* modality_reason_;
    QCheckBox* ignore_modality_;
    QToolButton* advanced_toggle_;
    QWidget* advanced_;
    QLabel* error_;
    QMap<QString, QWidget*> fields_;

    QString loaded_folder_;
    std::optional<engine::ModelPackage> model_;
    QString model_error_;
    std::optional<pipeline::InputDescription> input_;
    std::vector<std::string> input_modalities_;
    std::vector<pipeline::ModalityMismatch> mismatches_;
    std::vector<std::string> findings_;
};

}  // namespace voxseg::ui
