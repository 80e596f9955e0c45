#pragma once

// Vector kernels (AVX2 and AVX-512) of the binary and multilabel CPU path, for unweighted float32
// scores and int64 targets. One pass counts each label under both thresholds the batch may need
// (TorchMetrics decides per batch whether scores are probabilities or logits) and finds the
// scores' range, which decides it; or counts under the one already chosen and checks the scores
// against that reading. They count clean batches only (finite scores, targets 0 or 1, or the
// ignore_index) and say when a batch is not; the scalar loop in classification_cpu.cpp judges
// those entry by entry.

#include <cstdint>
#include <optional>

#include "../cpu_isa.h"
#include "ignore.h"

namespace metrics::detail::cpu {

/// The most labels one count_labels call takes: the lanes of one vector, 16 (AVX-512) or 8 (AVX2).
int64_t label_lanes(Isa isa);

/// Per-label sums count_labels adds to: entries whose target is 1; entries whose target is the
/// ignore_index, which no other sum counts; and, for thresholds[0] and thresholds[1] (the
/// probability and the logit threshold; where one is counted alone, the one chosen), entries
/// scored above it and entries that are both (the true positives).
struct LabelSums {
  int64_t* positives;
  int64_t* ignored;
  int64_t* predicted[2];
  int64_t* both[2];
};

/// Which thresholds count_labels counts under: both, or thresholds[0] alone (into the sums' [0]),
/// once the batch has shown which one it takes: the probabilities' or the logits'. Counting under
/// one, it checks the scores judged against that reading alone: inside [0, 1] (as bits, so neither
/// -0.0 nor NaN), or of a finite sum (so finite).
enum class Thresholds { Both, Probabilities, Logits };

/// What count_labels saw: whether every target was 0 or 1 (or the ignore_index) and every score
/// judged finite (if not, the sums mean nothing), and whether a score judged lies outside [0, 1]
/// (the batch is then logits); ignoring, the scores judged are the kept ones or every one (Ignore).
/// Counting under one threshold, `clean` also says that every score judged is as that reading
/// needs, and `logits` is false.
struct LabelScan {
  bool clean = true;
  bool logits = false;
};

/// Adds to `sums`[0, width) the labels [0, width) of `rows` rows, row r at preds + r * stride and
/// target + r * stride; width <= label_lanes(isa). A score counts as predicted when it is greater
/// than the threshold: thresholds[0] (probabilities) or thresholds[1] (logits); `counted` says
/// whether both are counted or thresholds[0] alone, which the caller sets to the threshold of the
/// reading it chose (sums.predicted[1] and sums.both[1] untouched). Entries whose target is
/// `ignore`'s index (one vector_kernels_take) count in sums.ignored alone.
LabelScan count_labels(const float* preds, const int64_t* target, int64_t rows, int64_t stride, int64_t width,
                       const float (&thresholds)[2], Isa isa, const LabelSums& sums,
                       const std::optional<Ignore>& ignore, Thresholds counted = Thresholds::Both);

}  // namespace metrics::detail::cpu
