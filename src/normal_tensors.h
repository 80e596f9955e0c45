#pragma once

// What the library keeps (a state's buffers, rows and views, an update's reused buffers) is made of
// normal tensors, even under torch.inference_mode(): an inference tensor, or a view made in that
// mode, cannot be written in place outside it, where the metric may be updated, reset or loaded
// next.

#include <c10/core/InferenceMode.h>

namespace metrics::detail {

/// While alive, tensors made are normal ones (c10::InferenceMode(false)). It also turns grad mode
/// on: where an input may require grad, a NoGradGuard made after it turns it off again.
struct NormalTensors : c10::InferenceMode {
  NormalTensors() : c10::InferenceMode(/*enabled=*/false) {}
};

}  // namespace metrics::detail
