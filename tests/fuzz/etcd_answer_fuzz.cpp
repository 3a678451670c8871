// etcd's answers as the cluster's etcd client reads them (cluster/etcd_store, etcd_wire): the
// JSON gateway's bodies of /v3/kv/range, /v3/lease/grant, /v3/lease/keepalive, /v3/kv/txn and
// /v3/kv/put, its error answers, and the lines of a /v3/watch stream, with base64 keys and values
// and int64s as strings. Whatever answers in etcd's place (a proxy, a broken member) may send
// anything. Input: byte 0 picks the route (and, for an error answer, the status), the rest is
// the body (for a watch, its lines).
// Oracle: a body that is not an answer is a StoreError (gpucap::Error); a watch line never throws
// (it is decoded on the stream's own thread, where an exception would end the process).

#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "gpucap/cluster/etcd_store.hpp"

using gpucap::fuzz::check;
using gpucap::fuzz::finding;
using gpucap::fuzz::refusals_only;
namespace wire = gpucap::cluster::etcd_wire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gpucap::fuzz::Input input(data, size);
  const std::uint8_t choice = input.byte();
  const auto body = input.rest();
  const unsigned route = choice % 7U;
  if (route == 5) {
    const int status = 400 + (choice >> 3U) * 7;  // 400 .. 617
    const auto failure = wire::failure_of(status, std::string(body));
    check(failure.try_next == (failure.kind == gpucap::cluster::StoreErrorKind::unavailable), "a failure to retry that is not unavailable");
    return 0;
  }
  if (route == 6) {
    std::string_view rest = body;
    for (int line = 0; line < 64 && !rest.empty(); ++line) {
      const auto end = rest.find('\n');
      const auto text = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      try {
        const auto decoded = wire::watch_line(text);
        if (decoded.end) break;
      } catch (const std::exception& e) {
        finding(std::string("a watch line threw (on the stream's thread: the process would end): ") + e.what());
      }
    }
    return 0;
  }
  const auto answer = wire::parse_answer(body);
  if (!answer) return 0;  // EtcdStore: StoreError(invalid) "answered ... with a body that is not JSON"
  refusals_only([&] {
    switch (route) {
      case 0: {
        const auto range = wire::range_result(*answer);
        (void)range.revision;
        break;
      }
      case 1: check(wire::granted_lease(*answer) != 0, "a granted lease 0"); break;
      case 2: (void)wire::lease_alive(*answer); break;
      case 3: (void)wire::txn_result(*answer); break;
      default: (void)wire::header_revision(*answer); break;
    }
  });
  return 0;
}
