#pragma once

namespace metrics::detail {

/// Registers, once, the meta kernels of the ATen ops the device paths use that this LibTorch lacks
/// (1.13 has none for bucketize, where.self_out and nan_to_num.out; Python's torch may register one
/// first, which is then kept), so
/// that every metric runs on the meta device from C++ as from Python.
void register_missing_meta_kernels();

}  // namespace metrics::detail
