#include <metrics/report_context.h>

#include <utility>

namespace metrics {
namespace {

std::string& prefix_in_force() {
  thread_local std::string prefix;
  return prefix;
}

}  // namespace

ReportContext::ReportContext(const std::string& prefix) : previous_(prefix_in_force()) { prefix_in_force() += prefix; }

ReportContext::~ReportContext() { prefix_in_force() = std::move(previous_); }

const std::string& ReportContext::current() { return prefix_in_force(); }

}  // namespace metrics
