#pragma once
// The user-facing error tier: Status and Expected<T> carry a message that names the file,
// tensor, task group, edge or request at fault. Internal invariants use EVT_CHECK (check.h).

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace evt {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& message() const {
    static const std::string kOk = "ok";
    return message_ ? *message_ : kOk;
  }

  // Prefixes context, e.g. the file name, keeping the original message after it.
  Status with_context(const std::string& context) const {
    return ok() ? *this : Status(context + ": " + *message_);
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename... Args>
Status error(fmt::format_string<Args...> format, Args&&... args) {
  return Status::error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : state_(std::move(status)) {  // NOLINT
    if (std::get<Status>(state_).ok()) state_ = Status::error("Expected built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(state_);
  }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace evt

// Returns early from a function returning Status or Expected<U> when `expr` failed.
#define EVT_RETURN_IF_ERROR(expr)                  \
  do {                                             \
    ::evt::Status evt_status_ = (expr);            \
    if (!evt_status_.ok()) return evt_status_;     \
  } while (0)

#define EVT_CONCAT_INNER(a, b) a##b
#define EVT_CONCAT(a, b) EVT_CONCAT_INNER(a, b)
// `EVT_ASSIGN_OR_RETURN(auto x, f());` binds the value of an Expected or returns its error.
#define EVT_ASSIGN_OR_RETURN(lhs, expr) EVT_ASSIGN_OR_RETURN_IMPL(EVT_CONCAT(evt_expected_, __LINE__), lhs, expr)
#define EVT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
