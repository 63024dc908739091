#include "test/support/fake_api.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>
#include <stdexcept>

namespace ctx::test {

namespace {

std::string source_root() {
  const char* s = std::getenv("CTX_SOURCE_ROOT");
  return s ? s : ".";
}

}  // namespace

TestCert make_test_cert(const std::string& dir) {
  TestCert c{dir + "/cert.pem", dir + "/key.pem"};
  RunResult r = run_command({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", c.key, "-out", c.cert},
                            std::nullopt, 60);
  if (r.exit_code != 0) throw std::runtime_error("openssl req failed: " + r.err);
  ::chmod(c.cert.c_str(), 0644);
  return c;
}

FakeApi::FakeApi(const std::string& script, const TestCert* cert, const std::string& host) {
  dir_.write("script.json", script);
  std::vector<std::string> argv{"/usr/bin/python3",
                                source_root() + "/test/fake_api/fake_api.py",
                                "--script",
                                dir_ / "script.json",
                                "--log",
                                dir_ / "requests.jsonl",
                                "--port-file",
                                dir_ / "port",
                                "--host",
                                host};
  if (cert) argv.insert(argv.end(), {"--tls-cert", cert->cert, "--tls-key", cert->key});
  dir_.write("requests.jsonl", "");
  proc_ = spawn_command(argv);
  for (int waited = 0; waited < 10000 && port_ == 0; waited += 20) {
    try {
      port_ = std::stoi(dir_.read("port"));
    } catch (const std::exception&) {
      ::usleep(20000);
    }
  }
  if (port_ == 0) {
    ::kill(-proc_.pid, SIGKILL);
    RunResult r = wait_command(proc_, 5);
    throw std::runtime_error("fake_api.py did not listen within 10 s: " + r.err);
  }
  url_ = std::string(cert ? "https" : "http") + "://" + host + ":" + std::to_string(port_);
}

FakeApi::~FakeApi() {
  ::kill(-proc_.pid, SIGKILL);
  (void)wait_command(proc_, 5);
}

std::string FakeApi::log_text() const { return dir_.read("requests.jsonl"); }

std::vector<nlohmann::json> FakeApi::requests() const {
  std::vector<nlohmann::json> out;
  std::istringstream in(log_text());
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace ctx::test
