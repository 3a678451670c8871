#pragma once
// A BSO server in the test process: Zeus's routes over the pure core (bso/optimizer.hpp) in
// memory, on 127.0.0.1 and a port the OS picks. It lets the client's tests look at the job's
// state directly; the live tests run the real `gpucap bso serve`.

#include <httplib.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gpucap/bso/state.hpp"

namespace gpucap::test {

class FakeBsoServer {
 public:
  // `token`: when set, every request must carry "Authorization: Bearer TOKEN" (else 401).
  explicit FakeBsoServer(std::string token = "");
  ~FakeBsoServer();
  FakeBsoServer(const FakeBsoServer&) = delete;
  FakeBsoServer& operator=(const FakeBsoServer&) = delete;

  [[nodiscard]] std::string url() const;
  [[nodiscard]] std::optional<bso::JobState> job(const std::string& job_id) const;

 private:
  void add_routes();
  // Runs `operation` on the job under the lock and answers its JSON; maps refusals to statuses.
  template <typename Operation>
  void answer(httplib::Response& res, Operation&& operation);

  std::string token_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::map<std::string, bso::JobState> jobs_;
  int jobs_created_ = 0;
};

}  // namespace gpucap::test
