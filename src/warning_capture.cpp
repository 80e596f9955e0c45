#include <metrics/warning_capture.h>

#include <c10/util/Exception.h>
#include <torch/version.h>

namespace metrics {
namespace {

// PyTorch 2 moved the handler's getter and setter from c10::Warning to c10::WarningUtils.
#if TORCH_VERSION_MAJOR >= 2
c10::WarningHandler* current_handler() { return c10::WarningUtils::get_warning_handler(); }
void install_handler(c10::WarningHandler* handler) { c10::WarningUtils::set_warning_handler(handler); }
#else
c10::WarningHandler* current_handler() { return c10::Warning::get_warning_handler(); }
void install_handler(c10::WarningHandler* handler) { c10::Warning::set_warning_handler(handler); }
#endif

}  // namespace

class WarningCapture::Handler : public c10::WarningHandler {
 public:
  explicit Handler(Sink sink) : sink_(std::move(sink)), previous_(current_handler()) { install_handler(this); }
  ~Handler() override { install_handler(previous_); }

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
