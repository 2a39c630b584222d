// See static_holder.h.

#include "tests/process/lifecycle/static_holder.h"

#include <functional>
#include <utility>
#include <vector>

namespace gpupool_test_support {
namespace {

class Holder {
 public:
  ~Holder() {
    for (auto& callback : callbacks_) callback();
  }
  void Add(std::function<void()> callback) {
    callbacks_.push_back(std::move(callback));
  }

 private:
  std::vector<std::function<void()>> callbacks_;
};

// Namespace scope on purpose: constructed when the library is loaded.
Holder holder;

}  // namespace

void RunAtLibraryStaticDestruction(std::function<void()> callback) {
  holder.Add(std::move(callback));
}

}  // namespace gpupool_test_support
