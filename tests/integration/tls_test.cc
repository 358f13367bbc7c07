// chronoqd serving TLS (--tls-cert, --tls-key), end to end: a throwaway CA
// and server certificate made for each test (tests/support/make-test-certs.sh),
// the real chronoqd, and clients that trust the CA, trust another one, offer
// only TLS 1.1, speak plain HTTP to it, or connect and never say anything;
// the start-up errors of bad TLS files; and the chronoq CLI with --ca-file.
// Real waits only for the real process, each with a deadline.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "support/chronoqd_fixture.h"
#include "support/eventually.h"
#include "support/raw_connection.h"
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>

namespace chronoq {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// --header-timeout-ms: also the TLS handshake's deadline.
constexpr const char* kHandshakeTimeout = "1000";

// The handshake of an OpenSSL client that offers TLS 1.0 up to `max_version`
// and trusts `ca_file`: "" when it succeeded, else OpenSSL's reason ("tlsv1
// alert protocol version"). Each read waits at most 30 s.
std::string HandshakeUpTo(int port, int max_version, const std::string& ca_file) {
  test::RawConnection c(port);
  if (!c.connected()) return "cannot connect";
  const timeval limit{.tv_sec = 30, .tv_usec = 0};
  setsockopt(c.fd(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  const std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                              SSL_CTX_free);
  // OpenSSL 3 offers TLS 1.0 and 1.1 (whose handshake signs with SHA-1) only
  // at security level 0: at the default, this client would not really ask
  // for them, and the test would prove nothing about the server.
  SSL_CTX_set_security_level(ctx.get(), 0);
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), max_version);
  SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  const std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  SSL_set_fd(ssl.get(), c.fd());
  ERR_clear_error();
  if (SSL_connect(ssl.get()) == 1) return "";
  const char* reason = ERR_reason_error_string(ERR_peek_last_error());
  ERR_clear_error();
  return reason != nullptr ? reason : "the handshake failed without a reason";
}

class TlsTest : public test::ChronoqdFixture {
 protected:
  void SetUp() override {
    SpawnOptions o;
    o.argv = {"bash", CHRONOQ_SOURCE_DIR "/tests/support/make-test-certs.sh", dir_.File("")};
    o.search_path = true;
    Result<Subprocess::Completed> made = Subprocess::Run(o, Deadline(60s));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    ASSERT_EQ(made->code, 0) << "make-test-certs.sh: " << made->err;
    tls_.ca_file = File("ca.pem");
  }

  std::string File(const std::string& name) const { return dir_.File(name); }

  std::vector<std::string> TlsArgs() const {
    return {"--tls-cert",       File("server.pem"),    "--tls-key",
            File("server.key"), "--header-timeout-ms", kHandshakeTimeout};
  }

  // An https client of the running chronoqd trusting `tls`.
  std::unique_ptr<cli::HttpClient> ClientTrusting(const cli::TlsOptions& tls) const {
    auto c = cli::HttpClient::Create(server_->url(), 30s, tls);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // Runs chronoqd with `args` (and `env`), which must stop it at start-up:
  // what it left.
  Subprocess::Completed StartFails(std::vector<std::string> args,
                                   std::vector<std::string> env = {}) {
    SpawnOptions o;
    o.argv = {CHRONOQD_PATH, "--listen", "127.0.0.1:0", "--data", File("refused")};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = std::move(env);
    Result<Subprocess::Completed> done = Subprocess::Run(o, Deadline(60s));
    EXPECT_TRUE(done.ok()) << done.status().ToString();
    return done.ok() ? *done : Subprocess::Completed{};
  }

  // The chronoq CLI against the running chronoqd: what it left.
  Subprocess::Completed Cli(std::vector<std::string> args, std::vector<std::string> env = {}) {
    SpawnOptions o;
    o.argv = {CHRONOQ_CLI_PATH, "--url", server_->url()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = std::move(env);
    Result<Subprocess::Completed> done = Subprocess::Run(o, Deadline(60s));
    EXPECT_TRUE(done.ok()) << done.status().ToString();
    return done.ok() ? *done : Subprocess::Completed{};
  }
};

TEST_F(TlsTest, AClientTrustingTheCaIsAnswered) {
  Launch(TlsArgs());
  EXPECT_THAT(server_->url(), StartsWith("https://127.0.0.1:"));
  EXPECT_EQ(Send("GET", "/healthz").status, 200);
  // Keep-alive over TLS, and a write whose Origin is the server's own.
  const std::string host = "127.0.0.1:" + std::to_string(server_->port());
  EXPECT_EQ(Send("POST", "/v1/tasks", R"({"queue":"q","id":"a"})",
                 {{"Content-Type", "application/json"}, {"Origin", "https://" + host}})
                .status,
            201);
  EXPECT_EQ(Json(Send("GET", "/v1/tasks/a"))["state"], "scheduled");
  // A plain-http page's origin is not a TLS server's own (CrossSiteWrite).
  EXPECT_EQ(Send("POST", "/v1/tasks", R"({"queue":"q","id":"b"})",
                 {{"Content-Type", "application/json"}, {"Origin", "http://" + host}})
                .status,
            403);
}

TEST_F(TlsTest, AClientThatDoesNotTrustTheCaIsRefused) {
  Launch(TlsArgs());
  for (const cli::TlsOptions& tls :
       {cli::TlsOptions{.ca_file = File("other-ca.pem")}, cli::TlsOptions{}}) {  // the system's CAs
    SCOPED_TRACE(tls.ca_file.empty() ? "the system's CAs" : tls.ca_file);
    std::unique_ptr<cli::HttpClient> c = ClientTrusting(tls);
    ASSERT_NE(c, nullptr);
    Result<cli::HttpResponse> r = c->Send("GET", "/healthz", "", {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_THAT(r.status().message(),
                HasSubstr("failed: certificate verify failed (unable to get local issuer "
                          "certificate)"));
  }
  EXPECT_EQ(Send("GET", "/healthz").status, 200);  // trusting the CA
}

TEST_F(TlsTest, OnlyTls12AndLaterAreServed) {
  Launch(TlsArgs());
  EXPECT_THAT(HandshakeUpTo(server_->port(), TLS1_1_VERSION, File("ca.pem")),
              HasSubstr("protocol version"));
  // The same client, allowed TLS 1.2, gets through.
  EXPECT_EQ(HandshakeUpTo(server_->port(), TLS1_2_VERSION, File("ca.pem")), "");
}

TEST_F(TlsTest, PlainHttpToTheTlsPortIsClosedAndTheServerGoesOn) {
  // From the environment this time.
  Launch({"--header-timeout-ms", kHandshakeTimeout},
         {"CHRONOQ_TLS_CERT=" + File("server.pem"), "CHRONOQ_TLS_KEY=" + File("server.key")});
  ASSERT_THAT(server_->url(), StartsWith("https://"));
  test::RawConnection plain(server_->port());
  ASSERT_TRUE(plain.connected());
  ASSERT_TRUE(plain.Write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  EXPECT_THAT(plain.ReadToClose(), Not(HasSubstr("HTTP/1.1")));
  auto http = cli::HttpClient::Create("http://127.0.0.1:" + std::to_string(server_->port()), 30s);
  ASSERT_TRUE(http.ok());
  EXPECT_FALSE((*http)->Send("GET", "/healthz", "", {}).ok());
  EXPECT_EQ(Send("GET", "/healthz").status, 200);
}

// chronoqd at 64 connections at once (its open-file limit 128): 100 that
// connect and never start the handshake fill every slot, and the next TLS
// client waits in the backlog, until the handshake deadline closes them.
TEST_F(TlsTest, ConnectionsThatNeverHandshakeAreClosedAtTheDeadline) {
  server_ = std::make_unique<test::ChronoqdProcess>(test::ChronoqdOptions{
      .binary = CHRONOQD_PATH,
      .data_dir = File("data"),
      .args = TlsArgs(),
      .env = {},
      .log = File("chronoqd.log"),
      .wrapper = {"prlimit", "--nofile=128:128", "--"},
  });
  ASSERT_THAT(server_->Start(), test::IsOk());
  std::vector<std::unique_ptr<test::RawConnection>> silent;
  for (int i = 0; i < 100; ++i) {
    silent.push_back(std::make_unique<test::RawConnection>(server_->port()));
  }
  EXPECT_TRUE(test::Eventually(
      [&] { return server_->LogTail(100'000).find("at the limit of 64") != std::string::npos; },
      "chronoqd to log that it reached its connection limit"));
  const auto c = ClientTrusting(tls_);  // 30 s, where the deadline is 1 s
  ASSERT_NE(c, nullptr);
  Result<cli::HttpResponse> r = c->Send("GET", "/healthz", "", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  // Closed by chronoqd, having been sent nothing.
  EXPECT_THAT(silent.front()->ReadToClose(), IsEmpty());
}

TEST_F(TlsTest, BadTlsFilesStopTheStartNamingTheFlag) {
  const std::string cert = File("server.pem");
  const std::string key = File("server.key");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {{"--tls-cert", cert}, {}, "tls-key: --tls-cert and --tls-key go together"},
           {{"--tls-key", key}, {}, "tls-cert: --tls-cert and --tls-key go together"},
           {{}, {"CHRONOQ_TLS_CERT=" + cert}, "tls-key: --tls-cert and --tls-key go together"},
           {{"--tls-cert", File("missing.pem"), "--tls-key", key},
            {},
            "tls-cert: cannot read " + File("missing.pem") + ": No such file or directory"},
           {{"--tls-cert", key, "--tls-key", key},
            {},
            "tls-cert: " + key + " is not a PEM certificate"},
           {{"--tls-cert", cert, "--tls-key", cert},
            {},
            "tls-key: " + cert + " is not an unencrypted PEM private key"},
           {{"--tls-cert", cert, "--tls-key", File("other.key")},
            {},
            "tls-key: " + File("other.key") + " is not the key of the certificate in " + cert +
                ": key values mismatch"},
           {{"--tls-cert", cert, "--tls-key", key, "--cluster"},
            {},
            "tls-cert: --tls-cert cannot be used with --cluster"},
       }) {
    SCOPED_TRACE(c.error);
    const Subprocess::Completed done = StartFails(c.args, c.env);
    EXPECT_EQ(done.code, 2);
    EXPECT_THAT(done.err, HasSubstr("chronoqd: invalid_argument: " + c.error));
    EXPECT_THAT(done.out, IsEmpty());  // no "listening on" line
  }
}

TEST_F(TlsTest, TheCliTrustsItsCaFile) {
  Launch(TlsArgs());
  Subprocess::Completed done = Cli({"--ca-file", File("ca.pem"), "health"});
  EXPECT_EQ(done.code, 0) << done.err;
  done = Cli({"health"}, {"CHRONOQ_CA_FILE=" + File("ca.pem")});
  EXPECT_EQ(done.code, 0) << done.err;
  done = Cli({"health"});  // the system's CAs
  EXPECT_EQ(done.code, 3);
  EXPECT_THAT(done.err,
              HasSubstr("TLS handshake with 127.0.0.1:" + std::to_string(server_->port()) +
                        " failed: certificate verify failed (unable to get local "
                        "issuer certificate)"));
  done = Cli({"--ca-file", File("missing.pem"), "health"});
  EXPECT_EQ(done.code, 2);
  EXPECT_THAT(done.err, HasSubstr("--ca-file: cannot read " + File("missing.pem")));
}

}  // namespace
}  // namespace chronoq
