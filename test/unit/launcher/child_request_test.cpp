// The agent.create request decoder, without a sandbox.
#include <catch2/catch.hpp>

#include "launcher/control/child_request.hpp"

using ctx::launcher::decode_child_request;
using nlohmann::json;

TEST_CASE("a child request decodes strictly", "[unit]") {
  auto ok = decode_child_request(
      json::parse(R"({"name":"rev","label":"rev_t","tools":["fs.read"],"model":"debug/echo","shared":{"p":["read"]},)"
                  R"("mount":[["/work","/work","ro","rbind,nosuid"],["/data","/data","rw"]],"handoff":"Task\n"})"));
  REQUIRE(ok);
  CHECK(ok->name == "rev");
  CHECK(ok->tools == std::vector<std::string>{"fs.read"});
  CHECK(ok->models == std::vector<std::string>{"debug/echo"});
  REQUIRE(ok->mounts.size() == 2);
  CHECK(ok->mounts[0].kind == ctx::mountspec::Kind::rbind);
  CHECK(ok->mounts[0].attrs.nosuid);
  CHECK_FALSE(ok->mounts[1].kind);  // as the parent's
  CHECK(ok->handoff == "Task\n");
  auto msg = [](const char* text) {
    auto r = decode_child_request(json::parse(text));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().reason == "invalid_request");
    return r.error().msg;
  };
  CHECK(msg(R"([1])") == "EINVAL: the request must be a JSON object");
  CHECK(msg(R"({"name":"rev","colour":"red"})").find("unknown key 'colour'") != std::string::npos);
  CHECK(msg(R"({"name":"rev","tools":[1]})") == "EINVAL: tools must be a string or an array of strings");
  // Mount options follow the mount file's rules.
  CHECK(msg(R"({"name":"r","mount":[["/a","/a","ro","bind,rbind"]]})") ==
        "EINVAL: mount[0]: bind and rbind are mutually exclusive");
  CHECK(msg(R"({"name":"r","mount":[["/a","/a","ro","-,nosuid"]]})") ==
        "EINVAL: mount[0]: '-' must stand alone (it means no option)");
  CHECK(msg(R"({"name":"r","mount":[["/a","/a","ro","noexec,noexec"]]})") ==
        "EINVAL: mount[0]: option 'noexec' repeated");
  CHECK(msg(R"({"name":"r","mount":[["/a","/a","rx"]]})") == "EINVAL: mount[0]: mode must be ro or rw, not 'rx'");
}
