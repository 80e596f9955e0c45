#pragma once

// An update's tensors are on the metric's device. Inputs on two devices are told so; inputs together
// on another device are told to move the metric there (advice that then works).

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>
#include <utility>

#include <metrics/update_call.h>

namespace metrics::detail {

/// An input tensor of an update, with its argument's name.
using NamedInput = std::pair<const char*, const at::Tensor*>;

/// Refuses `inputs` (one or more) of `metric`'s update unless every one is on `state_device`. (The
/// messages are made only for a refusal: updates pass here.)
inline void check_devices(const std::string& metric, c10::ArrayRef<NamedInput> inputs, at::Device state_device) {
  const auto device = inputs.front().second->device();
  const bool together = std::all_of(inputs.begin(), inputs.end(), [&](const NamedInput& input) {
    return input.second->device() == device;
  });
  if (together && device == state_device) return;
  std::string where, names;  // "preds is on cpu, target on meta"; "preds and target"
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& [name, tensor] = inputs[i];
    where += (i == 0 ? std::string(name) + " is on " : std::string(", ") + name + " on ") + tensor->device().str();
    names += (i == 0 ? "" : i + 1 == inputs.size() ? " and " : ", ") + std::string(name);
  }
  TORCH_CHECK_VALUE(together, UpdateCall::prefix(metric), where, "; every input must be on the metric's device, ",
                    state_device);
  TORCH_CHECK_VALUE(false, UpdateCall::prefix(metric), names, inputs.size() == 1 ? " is" : " are", " on ", device,
                    " but the metric's state is on ", state_device, "; move the metric with .to(", device, ")");
}

}  // namespace metrics::detail
