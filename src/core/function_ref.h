// FunctionRef: a non-owning reference to a callable, for "call this while I wait" parameters.
//
// Job: what std::function is for parallel_for's job, minus the ownership: it stores a pointer to
// the callable and a pointer to a trampoline, so constructing one never allocates, whatever the
// callable captures (std::function allocates once a lambda's captures pass its small buffer).
//
// Invariant: the callable must outlive every call through the reference. Binding a temporary
// lambda at a call site (`pool.parallel_for(n, [&](size_t b, size_t e) {...})`) is safe because
// the temporary lives until the end of the full expression; storing a FunctionRef past that is
// a bug.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace edgelm {

template <typename Sig>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): a lambda converts implicitly
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace edgelm
