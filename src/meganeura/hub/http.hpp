#pragma once
// HTTP through libcurl, loaded with dlopen at the first request: binaries keep no link-time dependency on
// it, and a machine without it gets a HubError naming the Debian package. Private to hub/.
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace meganeura::hf {

struct HttpRequest {
  std::string url;
  bool head = false;                 // HEAD instead of GET
  bool follow_redirects = false;     // at most 10, http(s) only
  std::vector<std::string> headers;  // "Name: value"
  long connect_timeout_s = 10;
  long stall_timeout_s = 30;  // abort when under 1 byte/s for this long
  // Called with each piece of the body of the final response, with its status, when that is 2xx; returning
  // false aborts the transfer (a network HubError).
  std::function<bool(long status, const char* data, size_t n)> on_body;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;               // of the final response, names lowercased
  std::string header(const std::string& lower_name) const;  // "" when absent
};

// A failed transfer (no connection, connection dropped, timeout, aborted by on_body) throws a HubError of
// kind Network naming the URL and curl's reason; an HTTP error status is returned, not thrown.
HttpResponse http_request(const HttpRequest& request);

}  // namespace meganeura::hf
