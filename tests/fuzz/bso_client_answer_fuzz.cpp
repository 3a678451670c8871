// The BSO client's side (bsoclient, linked into a training program): the optimizer server's
// answers as the client reads them — a 2xx body parsed as JsonHttp does, then the registered job
// (POST /jobs: bso::job_spec_from_json), the next trial (GET /jobs/batch_size:
// trial_id_from_json) and a report's answer (POST /report: report_response_from_json); the server
// may be any Zeus-compatible one, or something else at that address. Input: byte 0 picks the
// route, the rest is the body.

#include <cstdint>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "gpucap/bso/job_spec.hpp"
#include "gpucap/bsoclient/client.hpp"

using gpucap::fuzz::refusals_only;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  const unsigned route = input.choice(3);
  const auto text = input.rest();
  // bsoclient/http.cpp (to_answer): a body that is not JSON is refused there, a BsoServerError.
  const auto body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  refusals_only([&] {
    switch (route) {
      case 0: {
        const auto job = gpucap::bso::job_spec_from_json(body);
        (void)gpucap::bsoclient::job_request_json(job).dump();
        break;
      }
      case 1: {
        const auto trial = gpucap::bsoclient::trial_id_from_json(body);
        // The numbers the server sent, not others (no silent truncation to int).
        gpucap::fuzz::check(body.at("batch_size") == trial.batch_size && body.at("trial_number") == trial.trial_number,
                            "a trial read with other numbers than the server sent: " + body.dump());
        (void)gpucap::bsoclient::to_json(trial).dump();
        break;
      }
      default: (void)gpucap::bsoclient::report_response_from_json(body); break;
    }
  });
  return 0;
}
