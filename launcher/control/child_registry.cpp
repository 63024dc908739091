#include "launcher/control/child_registry.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ctx::launcher {

OwnedChild* ChildRegistry::find(const std::string& name) {
  auto it = children_.find(name);
  return it == children_.end() ? nullptr : &it->second;
}

bool ChildRegistry::running(const std::string& name) const {
  auto it = children_.find(name);
  return it != children_.end() && !it->second.exit_status;
}

std::size_t ChildRegistry::running() const {
  std::size_t n = 0;
  for (const auto& [name, c] : children_) n += c.exit_status ? 0 : 1;
  return n;
}

std::vector<std::string> ChildRegistry::running_names() const {
  std::vector<std::string> out;
  for (const auto& [name, c] : children_)
    if (!c.exit_status) out.push_back(name);
  return out;
}

void ChildRegistry::add(const std::string& name, OwnedChild c) { children_.insert_or_assign(name, std::move(c)); }

void ChildRegistry::forget_ended(const std::string& name) {
  if (auto it = children_.find(name); it != children_.end() && it->second.exit_status) children_.erase(it);
}

void ChildRegistry::add_poll_fds(std::vector<struct pollfd>& fds) const {
  for (const auto& [name, c] : children_) {
    if (c.exit_status) continue;
    fds.push_back({c.pidfd.get(), POLLIN, 0});
    if (c.status.valid()) fds.push_back({c.status.get(), POLLIN, 0});
  }
}

void ChildRegistry::forget_waiter(int conn) {
  for (auto& [n, c] : children_) {
    std::erase(c.start_waiters, conn);
    std::erase_if(c.exit_waiters, [conn](const auto& w) { return w.first == conn; });
  }
}

bool ChildRegistry::waits(int conn) const {
  for (const auto& [n, c] : children_) {
    if (std::find(c.start_waiters.begin(), c.start_waiters.end(), conn) != c.start_waiters.end()) return true;
    for (const auto& w : c.exit_waiters)
      if (w.first == conn) return true;
  }
  return false;
}

std::vector<int> ChildRegistry::feed_status(OwnedChild& c, std::string_view bytes) {
  std::vector<int> started;
  c.status_buf += bytes;
  for (auto nl = c.status_buf.find('\n'); nl != std::string::npos; nl = c.status_buf.find('\n')) {
    auto j = nlohmann::json::parse(c.status_buf.substr(0, nl), nullptr, false);
    c.status_buf.erase(0, nl + 1);
    if (j.is_object() && j.value("event", "") == "started") {
      c.runtime_pid = j.value("pid", 0);
      started.insert(started.end(), c.start_waiters.begin(), c.start_waiters.end());
      c.start_waiters.clear();
    }
  }
  return started;
}

ChildWaiters ChildRegistry::mark_exited(const std::string& name, int exit_status) {
  OwnedChild* c = find(name);
  if (c == nullptr) return {};
  c->exit_status = exit_status;
  // Its record stays (wait answers with the status); its descriptors go, or
  // a parent would hold one per child it ever ran.
  c->status.reset();
  c->pidfd.reset();
  ChildWaiters w{std::move(c->start_waiters), std::move(c->exit_waiters)};
  c->start_waiters.clear();
  c->exit_waiters.clear();
  return w;
}

std::vector<std::pair<std::string, ChildWaiters>> ChildRegistry::take_all_waiters() {
  std::vector<std::pair<std::string, ChildWaiters>> out;
  for (auto& [name, c] : children_) {
    out.emplace_back(name, ChildWaiters{std::move(c.start_waiters), std::move(c.exit_waiters)});
    c.start_waiters.clear();
    c.exit_waiters.clear();
  }
  return out;
}

}  // namespace ctx::launcher
