#include "bsoclient/fake_bso_server.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "gpucap/bso/optimizer.hpp"
#include "gpucap/core/error.hpp"

namespace gpucap::test {
namespace {

bso::TrialId trial_of(const nlohmann::json& body) {
  return {body.at("job_id").get<std::string>(), body.at("batch_size").get<int>(), body.at("trial_number").get<int>()};
}

void reply(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

}  // namespace

FakeBsoServer::FakeBsoServer(std::string token) : token_(std::move(token)) {
  add_routes();
  port_ = server_.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("fake BSO server: cannot bind 127.0.0.1");
  // The socket listens from bind on: requests queue until the thread accepts them.
  thread_ = std::thread([this] { server_.listen_after_bind(); });
}

FakeBsoServer::~FakeBsoServer() {
  // stop() before the thread began listening would be lost, and join would wait forever.
  while (!server_.is_running()) std::this_thread::yield();
  server_.stop();
  thread_.join();
}

std::string FakeBsoServer::url() const { return fmt::format("http://127.0.0.1:{}", port_); }

std::optional<bso::JobState> FakeBsoServer::job(const std::string& job_id) const {
  std::lock_guard lock(mutex_);
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

template <typename Operation>
void FakeBsoServer::answer(httplib::Response& res, Operation&& operation) {
  try {
    std::lock_guard lock(mutex_);
    const auto [status, body] = operation();
    reply(res, status, body);
  } catch (const bso::Refusal& e) {
    reply(res, bso::http_status(e.kind()), {{"message", e.what()}});
  } catch (const std::exception& e) {
    reply(res, 422, {{"message", e.what()}});
  }
}

void FakeBsoServer::add_routes() {
  server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (token_.empty() || req.get_header_value("Authorization") == "Bearer " + token_) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    reply(res, 401, {{"message", "missing or wrong bearer token"}});
    return httplib::Server::HandlerResponse::Handled;
  });
  server_.Post("/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    answer(res, [&]() -> std::pair<int, nlohmann::json> {
      auto spec = bso::job_spec_from_json(nlohmann::json::parse(req.body));
      if (spec.job_id.empty()) spec.job_id = fmt::format("{}-{:08x}", spec.job_id_prefix, ++jobs_created_);
      const auto it = jobs_.find(spec.job_id);
      if (it != jobs_.end()) {
        if (it->second.spec == spec) return {200, bso::to_json(spec)};
        throw bso::Refusal(bso::RefusalKind::conflict, "job " + spec.job_id + " exists with another config");
      }
      jobs_.emplace(spec.job_id, bso::new_job_state(spec, 7));
      return {201, bso::to_json(spec)};
    });
  });
  const auto find = [this](const std::string& job_id) -> bso::JobState& {
    const auto it = jobs_.find(job_id);
    if (it == jobs_.end()) throw bso::Refusal(bso::RefusalKind::not_found, "unknown job " + job_id);
    return it->second;
  };
  server_.Get("/jobs/batch_size", [this, find](const httplib::Request& req, httplib::Response& res) {
    answer(res, [&]() -> std::pair<int, nlohmann::json> {
      const auto trial = bso::next_trial(find(req.get_param_value("job_id")));
      return {200, {{"job_id", trial.job_id}, {"batch_size", trial.batch_size}, {"trial_number", trial.trial_number}}};
    });
  });
  server_.Post("/report", [this, find](const httplib::Request& req, httplib::Response& res) {
    answer(res, [&]() -> std::pair<int, nlohmann::json> {
      const auto body = nlohmann::json::parse(req.body);
      const bso::TrainingResult result{trial_of(body), body.at("time").get<double>(), body.at("energy").get<double>(),
                                       body.at("metric").get<double>(), body.at("current_epoch").get<int>()};
      const auto r = bso::report(find(result.trial.job_id), result);
      return {200, {{"stop_train", r.stop_train}, {"converged", r.converged}, {"message", r.message}}};
    });
  });
  server_.Patch("/trials", [this, find](const httplib::Request& req, httplib::Response& res) {
    answer(res, [&]() -> std::pair<int, nlohmann::json> {
      const auto trial = trial_of(nlohmann::json::parse(req.body));
      bso::end_trial(find(trial.job_id), trial);
      return {200, nlohmann::json::object()};
    });
  });
  server_.Delete("/jobs", [this](const httplib::Request& req, httplib::Response& res) {
    answer(res, [&]() -> std::pair<int, nlohmann::json> {
      if (jobs_.erase(req.get_param_value("job_id")) == 0) throw bso::Refusal(bso::RefusalKind::not_found, "unknown job");
      return {200, nlohmann::json::object()};
    });
  });
}

}  // namespace gpucap::test
