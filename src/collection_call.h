#pragma once

namespace metrics::detail {

/// Marks the calling thread as inside a MetricCollection call. A metric that shares its state with
/// group-mates of a collection takes changes (updates, resets, loads, merges, moves) only from
/// there: the same call made on it directly would change the group-mates too.
class CollectionCall {
 public:
  CollectionCall() { ++depth(); }
  ~CollectionCall() { --depth(); }
  CollectionCall(const CollectionCall&) = delete;
  CollectionCall& operator=(const CollectionCall&) = delete;

  static bool active() { return depth() > 0; }

 private:
  static int& depth() {
    thread_local int calls = 0;
    return calls;
  }
};

}  // namespace metrics::detail
