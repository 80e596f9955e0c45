#pragma once

// Decoding the fuzz input into choices, shapes and tensors: dtypes, strides (transposed, sliced,
// offset, broadcast) and values (NaN, ±inf, huge, subnormal, -0.0, out-of-range labels).

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

class FuzzedDataProvider;

namespace fuzz {

/// Which values a tensor is filled with.
enum class Values {
  Scores,  ///< probabilities, logits, and the special floats
  Labels,  ///< integers mostly in [0, classes), some outside it
  Weights, ///< mostly positive, some 0, negative, NaN, infinite, huge or subnormal
};

class Source {
 public:
  explicit Source(FuzzedDataProvider& in) : in_(in) {}

  bool empty() const;
  /// True once in `n` draws, about.
  bool one_in(int n);
  int64_t range(int64_t lo, int64_t hi);
  template <typename T>
  T pick(std::initializer_list<T> choices) {
    return *(choices.begin() + range(0, static_cast<int64_t>(choices.size()) - 1));
  }
  double score();
  double weight();
  int64_t label(int64_t classes);

  /// A shape of `dims` dimensions of small sizes (0 now and then), at most ~`max_numel` elements.
  std::vector<int64_t> shape(int64_t dims, int64_t max_numel = 64);
  /// A floating dtype (float32 most often); now and then an integer one when `wrong` is allowed.
  at::ScalarType float_dtype(bool allow_wrong);
  /// An integer dtype (int64 most often, also bool, uint8, int8, int32); now and then a float.
  at::ScalarType label_dtype(bool allow_wrong, bool allow_bool);

  /// A tensor of `shape` and `dtype` with values of `kind`, laid out in memory one of several
  /// ways: contiguous, transposed, every other element of a larger tensor, at a storage offset,
  /// or one slice broadcast along a dimension (stride 0, then the values repeat).
  at::Tensor tensor(const std::vector<int64_t>& shape, at::ScalarType dtype, Values kind, int64_t classes = 2);

 private:
  at::Tensor values(const std::vector<int64_t>& shape, at::ScalarType dtype, Values kind, int64_t classes);
  at::Tensor lay_out(const at::Tensor& contiguous);

  FuzzedDataProvider& in_;
};

/// "float[2, 3] (transposed)" and the like, for failure messages.
std::string describe_tensor(const at::Tensor& t);

}  // namespace fuzz
