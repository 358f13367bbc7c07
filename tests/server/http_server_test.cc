// The HTTP layer's request checks that need no socket: the cross-site write
// check. (Tokens: tokens_test.cc; scopes: openapi_test.cc.)
#include "server/http_server.h"

#include <gtest/gtest.h>

namespace chronoq::server {
namespace {

TEST(CrossSiteWriteTest, ClientsThatAreNotBrowsersSendNeitherHeader) {
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    EXPECT_FALSE(CrossSiteWrite(method, "", "127.0.0.1:7070", "")) << method;
  }
}

TEST(CrossSiteWriteTest, ThePagesOwnOriginMayWrite) {
  EXPECT_FALSE(CrossSiteWrite("POST", "http://127.0.0.1:7070", "127.0.0.1:7070", ""));
  EXPECT_FALSE(CrossSiteWrite("POST", "https://chronoq.example", "chronoq.example", ""));
  EXPECT_FALSE(CrossSiteWrite("DELETE", "http://127.0.0.1:7070", "127.0.0.1:7070", "same-origin"));
  // A request the user typed or bookmarked.
  EXPECT_FALSE(CrossSiteWrite("POST", "", "127.0.0.1:7070", "none"));
}

TEST(CrossSiteWriteTest, AnotherOriginMayNotWrite) {
  EXPECT_TRUE(CrossSiteWrite("POST", "http://evil.example", "127.0.0.1:7070", ""));
  // Another port of the same host is another origin (and "same-site").
  EXPECT_TRUE(CrossSiteWrite("POST", "http://127.0.0.1:8080", "127.0.0.1:7070", ""));
  EXPECT_TRUE(CrossSiteWrite("PUT", "http://127.0.0.1:7070", "127.0.0.1:7070", "same-site"));
  EXPECT_TRUE(CrossSiteWrite("PATCH", "", "127.0.0.1:7070", "cross-site"));
  EXPECT_TRUE(CrossSiteWrite("DELETE", "null", "127.0.0.1:7070", ""));
  EXPECT_TRUE(CrossSiteWrite("POST", "http://127.0.0.1:7070", "", ""));  // no Host to match
  EXPECT_TRUE(CrossSiteWrite("POST", "http://127.0.0.1:70700", "127.0.0.1:7070", ""));
}

// Behind a proxy that ends TLS, the page is https:// while chronoqd is
// plain; when chronoqd serves TLS itself, only an https:// page is its own.
TEST(CrossSiteWriteTest, ATlsServersOwnOriginIsHttpsOnly) {
  EXPECT_FALSE(CrossSiteWrite("POST", "https://127.0.0.1:7070", "127.0.0.1:7070", "", true));
  EXPECT_TRUE(CrossSiteWrite("POST", "http://127.0.0.1:7070", "127.0.0.1:7070", "", true));
  EXPECT_FALSE(CrossSiteWrite("POST", "", "127.0.0.1:7070", "", true));
  EXPECT_TRUE(CrossSiteWrite("POST", "https://evil.example", "127.0.0.1:7070", "", true));
  EXPECT_FALSE(CrossSiteWrite("POST", "https://127.0.0.1:7070", "127.0.0.1:7070", "", false));
  EXPECT_FALSE(CrossSiteWrite("POST", "http://127.0.0.1:7070", "127.0.0.1:7070", "", false));
}

TEST(CrossSiteWriteTest, ReadsAreLeftToTheBrowsersSameOriginPolicy) {
  EXPECT_FALSE(CrossSiteWrite("GET", "http://evil.example", "127.0.0.1:7070", "cross-site"));
  EXPECT_FALSE(CrossSiteWrite("HEAD", "http://evil.example", "127.0.0.1:7070", "cross-site"));
  EXPECT_FALSE(CrossSiteWrite("OPTIONS", "http://evil.example", "127.0.0.1:7070", "cross-site"));
}

}  // namespace
}  // namespace chronoq::server
