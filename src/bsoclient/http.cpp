#include "gpucap/bsoclient/http.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <cmath>
#include <memory>

namespace gpucap::bsoclient {
namespace {

ErrorCode code_for_status(int status) { return status >= 400 && status < 500 ? ErrorCode::usage : ErrorCode::io; }

// The server's words: Zeus's servers answer {"message": ...} (FastAPI's {"detail": ...} too).
std::string server_message_of(const std::string& body) {
  const auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    for (const char* key : {"message", "detail"}) {
      if (parsed.contains(key)) {
        return parsed.at(key).is_string() ? parsed.at(key).get<std::string>() : parsed.at(key).dump();
      }
    }
  }
  return body;
}

void set_timeout(httplib::Client& client, double seconds, bool connect) {
  const auto whole = static_cast<time_t>(std::floor(seconds));
  const auto micro = static_cast<time_t>((seconds - static_cast<double>(whole)) * 1e6);
  if (connect) {
    client.set_connection_timeout(whole, micro);
  } else {
    client.set_read_timeout(whole, micro);
    client.set_write_timeout(whole, micro);
  }
}

std::unique_ptr<httplib::Client> make_client(const HttpOptions& options, const ServerAddress& address) {
  auto client = std::make_unique<httplib::Client>(address.scheme_host_port);
  set_timeout(*client, options.connect_timeout_s, true);
  set_timeout(*client, options.read_timeout_s, false);
  if (!options.token.empty()) client->set_bearer_token_auth(options.token);
  return client;
}

HttpAnswer to_answer(const httplib::Result& result, std::string_view method, const std::string& url) {
  if (!result) {
    const auto why = httplib::to_string(result.error());
    throw BsoServerError(0, why, fmt::format("{} {} got no answer from the BSO server ({})", method, url, why));
  }
  const int status = result->status;
  if (status < 200 || status >= 300) {
    const auto message = server_message_of(result->body);
    throw BsoServerError(status, message,
                         fmt::format("BSO server answered {} {} with status {}: {}", method, url, status, message));
  }
  HttpAnswer answer;
  answer.status = status;
  if (!result->body.empty()) {
    answer.body = nlohmann::json::parse(result->body, nullptr, /*allow_exceptions=*/false);
    if (answer.body.is_discarded()) {
      throw BsoServerError(status, result->body,
                           fmt::format("BSO server answered {} {} with a body that is not JSON: {}", method, url,
                                       result->body.substr(0, 200)));
    }
  }
  return answer;
}

httplib::Params to_params(const QueryParams& query) {
  httplib::Params params;
  for (const auto& [key, value] : query) params.emplace(key, value);
  return params;
}

}  // namespace

BsoServerError::BsoServerError(int status, std::string server_message, const std::string& what)
    : Error(code_for_status(status), what), status_(status), server_message_(std::move(server_message)) {}

JsonHttp::JsonHttp(HttpOptions options) : options_(std::move(options)), address_(parse_server_url(options_.server_url)) {}

HttpAnswer JsonHttp::get(std::string_view path, const QueryParams& query) const {
  const auto target = httplib::append_query_params(address_.path_prefix + std::string(path), to_params(query));
  return to_answer(make_client(options_, address_)->Get(target), "GET", options_.server_url + target);
}

HttpAnswer JsonHttp::post(std::string_view path, const nlohmann::json& body) const {
  const auto target = address_.path_prefix + std::string(path);
  return to_answer(make_client(options_, address_)->Post(target, body.dump(), "application/json"), "POST",
                   options_.server_url + target);
}

HttpAnswer JsonHttp::patch(std::string_view path, const nlohmann::json& body) const {
  const auto target = address_.path_prefix + std::string(path);
  return to_answer(make_client(options_, address_)->Patch(target, body.dump(), "application/json"), "PATCH",
                   options_.server_url + target);
}

HttpAnswer JsonHttp::del(std::string_view path, const QueryParams& query) const {
  const auto target = httplib::append_query_params(address_.path_prefix + std::string(path), to_params(query));
  return to_answer(make_client(options_, address_)->Delete(target), "DELETE", options_.server_url + target);
}

}  // namespace gpucap::bsoclient
