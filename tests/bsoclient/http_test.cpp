#include "gpucap/bsoclient/http.hpp"

#include <gtest/gtest.h>

namespace gpucap::bsoclient {
namespace {

TEST(ServerUrl, SplitsHostAndPrefix) {
  const auto plain = parse_server_url("http://127.0.0.1:8000");
  EXPECT_EQ(plain.scheme_host_port, "http://127.0.0.1:8000");
  EXPECT_EQ(plain.path_prefix, "");
  const auto proxied = parse_server_url("https://bso.example.org/zeus/");
  EXPECT_EQ(proxied.scheme_host_port, "https://bso.example.org");
  EXPECT_EQ(proxied.path_prefix, "/zeus");
}

TEST(ServerUrl, RefusesWhatIsNotAnHttpUrl) {
  for (const char* bad : {"127.0.0.1:8000", "ftp://host", "http://", "http://host/a?b=1"}) {
    EXPECT_THROW((void)parse_server_url(bad), Error) << bad;
  }
}

TEST(ServerError, FourHundredsAreUsageTheRestIo) {
  EXPECT_EQ(BsoServerError(409, "m", "w").code(), ErrorCode::usage);
  EXPECT_EQ(BsoServerError(500, "m", "w").code(), ErrorCode::io);
  EXPECT_EQ(BsoServerError(0, "m", "w").code(), ErrorCode::io);
}

}  // namespace
}  // namespace gpucap::bsoclient
