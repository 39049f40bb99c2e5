#pragma once
// OpenAI `stop` strings over streamed text: generation ends where one first appears, and the text
// sent ends just before it. Text arrives in pieces, so a stop string may span several; a piece's
// tail that could still begin a stop string is held back until the next piece decides it.

#include <string>
#include <string_view>
#include <vector>

namespace evt::server {

class StopMatcher {
 public:
  // Empty strings are the caller's to reject (they would match everywhere).
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Takes the next piece of decoded text and returns what may be sent now. Once a stop string
  // is found, stopped() is true, the returned text ends just before it, and later pieces are
  // dropped.
  std::string push(std::string_view piece);
  // At the end of generation: the text still held back (a prefix of a stop string that never
  // completed).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace evt::server
