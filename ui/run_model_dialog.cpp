#include "ui/run_model_dialog.h"

#include "pipeline/model_card.h"
#include "pipeline/segment_options_schema.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

namespace voxseg::ui {

using pipeline::SegmentOptionSpec;

namespace {

constexpr const char* kWarningColor = "#b85c00";  // amber: readable on light and dark themes
constexpr const char* kErrorColor = "#c03030";
constexpr const char* kFineColor = "#2e7d32";
constexpr const char* kIgnoreModality = "--ignore-modality";

QString qstr(const std::string& s) { return QString::fromStdString(s); }

// The card as an HTML table: heading in bold, text with its line breaks.
QString cardHtml(const std::vector<pipeline::ModelCardEntry>& card) {
    QString html = "<table cellspacing='2'>";
    for (const auto& e : card) {
        QString text = qstr(e.text).toHtmlEscaped().replace('\n', "<br>");
        if (e.heading == "Disclaimer") text = "<b>" + text + "</b>";
        html += "<tr><td valign='top'><b>" + qstr(e.heading).toHtmlEscaped() +
                "</b>&nbsp;&nbsp;</td><td>" + text + "</td></tr>";
    }
    return html + "</table>";
}

QString coloured(const QString& color, const QStringList& lines) {
    QStringList escaped;
    for (const QString& l : lines) escaped << l.toHtmlEscaped();
    return "<span style='color:" + color + "'>" + escaped.join("<br>") + "</span>";
}

}  // namespace

RunModelDialog::RunModelDialog(const QString& model_folder, QWidget* parent) : QDialog(parent) {
    setObjectName("run_model_dialog");
    setWindowTitle("Run model");
    folder_ = new QLineEdit(model_folder, this);
    folder_->setObjectName("model_folder");
    folder_->setPlaceholderText("model package folder (model.json + model.onnx)");
    auto* browse = new QPushButton("Browse...", this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(
            this, "Model package (folder with model.json)", folder_->text());
        if (!dir.isEmpty()) folder_->setText(dir);
    });
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel("Model:", this));
    top->addWidget(folder_, 1);
    top->addWidget(browse);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);

    // The card, scrolled when long (a citation and an attribution can be paragraphs).
    auto* card_box = new QGroupBox("Model card", this);
    auto* card_layout = new QVBoxLayout(card_box);
    card_ = new QLabel(card_box);
    card_->setObjectName("model_card");
    card_->setWordWrap(true);
    card_->setTextFormat(Qt::RichText);
    card_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    card_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    auto* scroll = new QScrollArea(card_box);
    scroll->setWidget(card_);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setMinimumHeight(160);
    card_layout->addWidget(scroll);
    checks_ = new QLabel(card_box);
    checks_->setObjectName("input_checks");
    checks_->setWordWrap(true);
    checks_->setTextFormat(Qt::RichText);
    card_layout->addWidget(checks_);
    // Shown only when a channel's modality is not the model's: the reason and the override.
    modality_box_ = new QWidget(card_box);
    modality_box_->setObjectName("modality_mismatch");
    auto* modality_layout = new QVBoxLayout(modality_box_);
    modality_layout->setContentsMargins(0, 0, 0, 0);
    modality_reason_ = new QLabel(modality_box_);
    modality_reason_->setWordWrap(true);
    modality_reason_->setStyleSheet(QString("color: %1;").arg(kErrorColor));
    const SegmentOptionSpec& ignore = pipeline::segmentOptionSpec(kIgnoreModality);
    ignore_modality_ = new QCheckBox(qstr(ignore.label), modality_box_);
    ignore_modality_->setObjectName("option_ignore_modality");
    ignore_modality_->setToolTip(qstr(ignore.help));
    connect(ignore_modality_, &QCheckBox::toggled, this, [this] {
        checkInput();
        validate();
    });
    modality_layout->addWidget(modality_reason_);
    modality_layout->addWidget(ignore_modality_);
    modality_box_->setVisible(false);
    card_layout->addWidget(modality_box_);
    layout->addWidget(card_box);

    buildOptions(layout);
    error_ = new QLabel(this);
    error_->setObjectName("option_error");
    error_->setStyleSheet(QString("color: %1;").arg(kErrorColor));
    error_->setWordWrap(true);
    layout->addWidget(error_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText("Run");
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (refusal().isEmpty()) accept();
        validate();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    connect(folder_, &QLineEdit::textChanged, this, [this] {
        loadModel();
        validate();
    });
    loadModel();
    validate();
}

// One group box per schema group, in the schema's order; the advanced options in one folded
// section below them.
void RunModelDialog::buildOptions(QVBoxLayout* layout) {
    QMap<QString, QFormLayout*> groups;
    auto* options_layout = new QVBoxLayout;
    layout->addLayout(options_layout);
    advanced_toggle_ = new QToolButton(this);
    advanced_toggle_->setObjectName("advanced_toggle");
    advanced_toggle_->setText("Advanced");
    advanced_toggle_->setCheckable(true);
    advanced_toggle_->setChecked(false);
    advanced_toggle_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    advanced_toggle_->setArrowType(Qt::RightArrow);
    advanced_toggle_->setAutoRaise(true);
    advanced_ = new QGroupBox(this);
    advanced_->setObjectName("advanced_options");
    auto* advanced_form = new QFormLayout(advanced_);
    advanced_->setVisible(false);
    connect(advanced_toggle_, &QToolButton::toggled, this, [this](bool open) {
        advanced_->setVisible(open);
        advanced_toggle_->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
        adjustSize();
    });
    for (const SegmentOptionSpec& spec : pipeline::segmentOptionSchema()) {
        if (!spec.in_dialog) continue;  // output files: the viewer's own
        QWidget* w = makeField(spec);
        const QString flag = qstr(spec.flag);
        fields_[flag] = w;
        if (spec.advanced) {
            advanced_form->addRow(qstr(spec.label), w);
            continue;
        }
        const QString group = qstr(spec.group);
        if (!groups.contains(group)) {
            auto* box = new QGroupBox(group, this);
            groups[group] = new QFormLayout(box);
            options_layout->addWidget(box);
        }
        groups[group]->addRow(qstr(spec.label), w);
    }
    layout->addWidget(advanced_toggle_);
    layout->addWidget(advanced_);
}

QWidget* RunModelDialog::makeField(const SegmentOptionSpec& spec) {
    const QString flag = qstr(spec.flag);
    const QString value = qstr(spec.default_text);
    QWidget* w = nullptr;
    switch (spec.kind) {
        case SegmentOptionSpec::Kind::kChoice: {
            auto* c = new QComboBox(this);
            for (const auto& choice : spec.choices) c->addItem(qstr(choice));
            c->setEditable(true);  // e.g. cuda:1: whatever the parser accepts
            c->setCurrentText(value);
            connect(c, &QComboBox::currentTextChanged, this, &RunModelDialog::validate);
            w = c;
            break;
        }
        case SegmentOptionSpec::Kind::kInteger: {
            auto* b = new QSpinBox(this);
            b->setRange(static_cast<int>(spec.min), static_cast<int>(spec.max));
            b->setValue(value.toInt());
            w = b;
            break;
        }
        case SegmentOptionSpec::Kind::kFlag: {
            auto* b = new QCheckBox(this);
            b->setChecked(value == "true");
            connect(b, &QCheckBox::toggled, this, [this] {
                checkInput();  // --strict-input changes what the findings mean
                validate();
            });
            w = b;
            break;
        }
        default: {  // kNumber (kList and kText are not in the dialog)
            auto* e = new QLineEdit(value, this);
            e->setPlaceholderText(spec.default_text.empty() ? "model's" : value);
            connect(e, &QLineEdit::textChanged, this, &RunModelDialog::validate);
            w = e;
            break;
        }
    }
    w->setObjectName("option" + QString(flag).replace('-', '_'));
    w->setToolTip(qstr(spec.help) + "\n(voxseg segment " + flag + ")");
    return w;
}

QString RunModelDialog::modelFolder() const { return folder_->text().trimmed(); }
void RunModelDialog::setModelFolder(const QString& folder) { folder_->setText(folder); }

void RunModelDialog::setInput(const pipeline::StudyInput& study) {
    input_ = pipeline::InputDescription{study.volume.geometry(), study.volume.info().modality};
    input_modalities_ = study.modalities();
    checkInput();
    validate();
}

void RunModelDialog::loadModel() {
    const QString folder = modelFolder();
    if (folder == loaded_folder_ && (model_ || !model_error_.isEmpty())) return;
    loaded_folder_ = folder;
    model_.reset();
    model_error_.clear();
    if (folder.isEmpty()) {
        card_->setText("<i>Choose a model package folder to see its card.</i>");
    } else if (!QFileInfo(QDir(folder).filePath("model.json")).isFile()) {
        model_error_ = "no model.json in " + folder + ": choose a model package folder";
    } else {
        auto package = engine::readModelPackage(folder.toStdString());
        if (package.isOk()) {
            model_ = std::move(package.value());
        } else {
            model_error_ = qstr(package.status().toString());
        }
    }
    if (model_) card_->setText(cardHtml(pipeline::modelCard(*model_)));
    if (!model_error_.isEmpty()) card_->setText(coloured(kErrorColor, {model_error_}));
    checkInput();
}

void RunModelDialog::checkInput() {
    mismatches_.clear();
    findings_.clear();
    if (!model_ || !input_) {
        checks_->setText(model_ && !input_ ? "<i>No image loaded: the input is not checked.</i>"
                                           : QString());
        modality_box_->setVisible(false);
        return;
    }
    mismatches_ = pipeline::modalityMismatches(*model_, input_modalities_);
    QStringList reasons;
    for (const auto& m : mismatches_) reasons << qstr(pipeline::modalityMismatchReason(*model_, m));
    modality_reason_->setText(reasons.join("\n"));
    modality_box_->setVisible(!mismatches_.empty());
    if (mismatches_.empty()) ignore_modality_->setChecked(false);
    findings_ = pipeline::checkIntendedInput(*model_, *input_,
                                             /*check_modality=*/!ignore_modality_->isChecked());
    if (findings_.empty()) {
        checks_->setText(
            coloured(kFineColor, {"The loaded image fits the model's intended input."}));
        return;
    }
    QStringList lines;
    for (const auto& f : findings_) lines << QString::fromUtf8("\u26A0 ") + qstr(f);
    QCheckBox* strict = qobject_cast<QCheckBox*>(field("--strict-input"));
    if (strict && strict->isChecked())
        lines << "\"" + qstr(pipeline::segmentOptionSpec("--strict-input").label) +
                     "\" is ticked: this run will be refused.";
    checks_->setText(coloured(kWarningColor, lines));
}

QString RunModelDialog::text(const QString& flag) const {
    QWidget* w = fields_.value(flag);
    if (auto* c = qobject_cast<QComboBox*>(w)) return c->currentText().trimmed();
    if (auto* e = qobject_cast<QLineEdit*>(w)) return e->text().trimmed();
    if (auto* b = qobject_cast<QSpinBox*>(w)) return QString::number(b->value());
    if (auto* b = qobject_cast<QCheckBox*>(w)) return b->isChecked() ? "true" : "false";
    return {};
}

void RunModelDialog::setValue(const QString& flag, const QString& value) {
    QWidget* w = fields_.value(flag);
    if (flag == kIgnoreModality) w = ignore_modality_;
    if (auto* c = qobject_cast<QComboBox*>(w)) c->setCurrentText(value);
    if (auto* e = qobject_cast<QLineEdit*>(w)) e->setText(value);
    if (auto* b = qobject_cast<QSpinBox*>(w)) b->setValue(value.toInt());
    if (auto* b = qobject_cast<QCheckBox*>(w)) b->setChecked(value == "true");
    validate();
}

Result<pipeline::SegmentOptions> RunModelDialog::options() const {
    pipeline::SegmentOptions o;
    // In the schema's order, as the CLI applies them; a conflict (--tta with --no-tta) is an error.
    for (const SegmentOptionSpec& spec : pipeline::segmentOptionSchema())
        if (spec.in_dialog)
            VOXSEG_RETURN_IF_ERROR(
                pipeline::applySegmentOption(spec.flag, text(qstr(spec.flag)).toStdString(), o));
    VOXSEG_RETURN_IF_ERROR(pipeline::applySegmentOption(
        kIgnoreModality, ignore_modality_->isChecked() ? "true" : "false", o));
    return o;
}

QString RunModelDialog::refusal() const {
    if (modelFolder().isEmpty()) return "choose a model package folder";
    if (!model_error_.isEmpty()) return model_error_;
    auto o = options();
    if (!o.isOk()) return qstr(o.status().message());
    if (model_ && !mismatches_.empty() && !ignore_modality_->isChecked())
        return qstr(pipeline::modalityMismatchReason(*model_, mismatches_.front())) +
               ": choose another series or model, or tick \"" + ignore_modality_->text() +
               "\" to run anyway";
    return {};
}

void RunModelDialog::validate() { error_->setText(refusal()); }

}  // namespace voxseg::ui
