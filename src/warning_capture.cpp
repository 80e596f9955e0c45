#include <metrics/warning_capture.h>

#include <c10/util/Exception.h>
#include <torch/version.h>

namespace metrics {

class WarningCapture::Handler : public c10::WarningHandler {
 public:
  explicit Handler(Sink sink) : sink_(std::move(sink)), previous_(c10::Warning::get_warning_handler()) {
    c10::Warning::set_warning_handler(this);
  }
  ~Handler() override { c10::Warning::set_warning_handler(previous_); }

#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& warning) override {
    if (!sink_(warning.msg())) previous_->process(warning);
  }
#else
  void process(const c10::SourceLocation& location, const std::string& msg, const bool verbatim) override {
    if (!sink_(msg)) previous_->process(location, msg, verbatim);
  }
#endif

 private:
  Sink sink_;
  c10::WarningHandler* previous_;
};

WarningCapture::WarningCapture()
    : WarningCapture([this](const std::string& message) {
        messages_.push_back(message);
        return true;
      }) {}

WarningCapture::WarningCapture(Sink sink) : handler_(std::make_unique<Handler>(std::move(sink))) {}

WarningCapture::~WarningCapture() = default;

}  // namespace metrics
