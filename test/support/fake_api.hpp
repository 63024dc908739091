// The scripted fake LLM API (test/fake_api/fake_api.py, whose head
// documents the script and the request log) run for one test: started on
// 127.0.0.1 (or another loopback address) with a free port, killed and
// reaped at the end.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

namespace ctx::test {

/// A self-signed certificate for 127.0.0.1 and localhost, made with
/// openssl: it is its own CA (pass `cert` as CTX_UPSTREAM_CAINFO).
struct TestCert {
  std::string cert;  ///< PEM certificate path, readable by everyone
  std::string key;   ///< PEM private key path
};
/// Writes the pair into `dir`; throws std::runtime_error when openssl fails.
TestCert make_test_cert(const std::string& dir);

class FakeApi {
 public:
  /// Starts fake_api.py with `script` (the JSON list of turns), over https
  /// when `cert` is given, listening on `host`. Throws std::runtime_error
  /// when it does not listen within 10 s.
  explicit FakeApi(const std::string& script, const TestCert* cert = nullptr, const std::string& host = "127.0.0.1");
  FakeApi(const FakeApi&) = delete;
  FakeApi& operator=(const FakeApi&) = delete;
  ~FakeApi();

  /// "http://127.0.0.1:PORT" (https with a certificate).
  const std::string& url() const { return url_; }
  int port() const { return port_; }
  /// The requests it received so far, one JSON object each (method, path,
  /// headers, body_bytes, body_sha256, body).
  std::vector<nlohmann::json> requests() const;
  /// The request log as text.
  std::string log_text() const;

 private:
  TempDir dir_;
  Spawned proc_;
  int port_ = 0;
  std::string url_;
};

}  // namespace ctx::test
