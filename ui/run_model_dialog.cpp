#include "ui/run_model_dialog.h"

#include "pipeline/segment_options_schema.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace voxseg::ui {

using pipeline::SegmentOptionSpec;

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

    // One group box per schema group, in the schema's order.
    QMap<QString, QFormLayout*> groups;
    for (const SegmentOptionSpec& spec : pipeline::segmentOptionSchema()) {
        if (!spec.in_dialog) continue;  // output files: the viewer's own
        const QString group = QString::fromStdString(spec.group);
        if (!groups.contains(group)) {
            auto* box = new QGroupBox(group, this);
            groups[group] = new QFormLayout(box);
            layout->addWidget(box);
        }
        const QString flag = QString::fromStdString(spec.flag);
        const QString help = QString::fromStdString(spec.help) + "\n(voxseg segment " + flag + ")";
        const QString value = QString::fromStdString(spec.default_text);
        QWidget* w = nullptr;
        switch (spec.kind) {
            case SegmentOptionSpec::Kind::kChoice: {
                auto* c = new QComboBox(this);
                for (const auto& choice : spec.choices) c->addItem(QString::fromStdString(choice));
                c->setEditable(true);  // e.g. cuda:1: whatever the parser accepts
                c->setCurrentText(value);
                connect(c, &QComboBox::currentTextChanged, this, &RunModelDialog::validate);
                w = c;
                break;
            }
            case SegmentOptionSpec::Kind::kNumber: {
                auto* e = new QLineEdit(value, this);
                e->setPlaceholderText(spec.default_text.empty() ? "model's" : value);
                connect(e, &QLineEdit::textChanged, this, &RunModelDialog::validate);
                w = e;
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
                connect(b, &QCheckBox::toggled, this, &RunModelDialog::validate);
                w = b;
                break;
            }
        }
        w->setObjectName("option" + QString(flag).replace('-', '_'));
        w->setToolTip(help);
        groups[group]->addRow(QString::fromStdString(spec.label), w);
        fields_[flag] = w;
    }
    error_ = new QLabel(this);
    error_->setObjectName("option_error");
    error_->setStyleSheet("color: #c03030;");
    error_->setWordWrap(true);
    layout->addWidget(error_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText("Run");
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (options().isOk() && !modelFolder().isEmpty()) accept();
        validate();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    validate();
}

QString RunModelDialog::modelFolder() const { return folder_->text().trimmed(); }
void RunModelDialog::setModelFolder(const QString& folder) { folder_->setText(folder); }

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
            VOXSEG_RETURN_IF_ERROR(pipeline::applySegmentOption(
                spec.flag, text(QString::fromStdString(spec.flag)).toStdString(), o));
    return o;
}

void RunModelDialog::validate() {
    auto o = options();
    error_->setText(o.isOk() ? (modelFolder().isEmpty() ? "choose a model package folder" : "")
                             : QString::fromStdString(o.status().message()));
}

}  // namespace voxseg::ui
