#include "meganeura/hub/http.hpp"

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <dlfcn.h>

#include <exception>
#include <mutex>

#include "meganeura/core/error.hpp"

namespace meganeura::hf {
namespace {

// The few entry points we use, resolved from libcurl.so.4 (Debian's libcurl4; the -dev package is needed
// only for the header).
struct CurlApi {
  CURLcode (*global_init)(long);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

const CurlApi& curl() {
  static CurlApi api{};
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      failure = std::string("[hf::download] expected libcurl (libcurl.so.4) for downloads, got: ") +
                (why ? why : "dlopen failed") + ". Install it: apt-get install libcurl4";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(lib, name);
      if (p == nullptr && failure.empty())
        failure =
            std::string("[hf::download] expected libcurl.so.4 to export ") + name + ", got none (too old?)";
      return p;
    };
    api.global_init = reinterpret_cast<decltype(api.global_init)>(sym("curl_global_init"));
    api.easy_init = reinterpret_cast<decltype(api.easy_init)>(sym("curl_easy_init"));
    api.easy_setopt = reinterpret_cast<decltype(api.easy_setopt)>(sym("curl_easy_setopt"));
    api.easy_perform = reinterpret_cast<decltype(api.easy_perform)>(sym("curl_easy_perform"));
    api.easy_getinfo = reinterpret_cast<decltype(api.easy_getinfo)>(sym("curl_easy_getinfo"));
    api.easy_cleanup = reinterpret_cast<decltype(api.easy_cleanup)>(sym("curl_easy_cleanup"));
    api.easy_strerror = reinterpret_cast<decltype(api.easy_strerror)>(sym("curl_easy_strerror"));
    api.slist_append = reinterpret_cast<decltype(api.slist_append)>(sym("curl_slist_append"));
    api.slist_free_all = reinterpret_cast<decltype(api.slist_free_all)>(sym("curl_slist_free_all"));
    if (failure.empty() && api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      failure = "[hf::download] expected curl_global_init to succeed, got a failure";
  });
  if (!failure.empty()) throw HubError(HubError::Kind::NoLibrary, failure);
  return api;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r' || s[e - 1] == '\n')) --e;
  return s.substr(b, e - b);
}

struct Transfer {
  const HttpRequest* request;
  HttpResponse response;
  bool aborted = false;
  std::exception_ptr failure;  // thrown by on_body: rethrown once curl has returned
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response.headers.clear();  // a new response (after a redirect or a 100 Continue)
    const size_t sp = line.find(' ');
    t->response.status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
  } else if (const size_t colon = line.find(':'); colon != std::string::npos) {
    t->response.headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  }
  return size * count;
}

size_t on_data(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  // Error bodies (and redirect bodies) are not content.
  if (t->response.status < 200 || t->response.status >= 300 || !t->request->on_body) return n;
  bool keep_going = false;
  try {
    keep_going = t->request->on_body(t->response.status, data, n);
  } catch (...) {
    t->failure = std::current_exception();  // exceptions must not cross curl's C frames
  }
  if (!keep_going) {
    t->aborted = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  return n;
}

}  // namespace

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

HttpResponse http_request(const HttpRequest& request) {
  const CurlApi& c = curl();
  CURL* h = c.easy_init();
  if (h == nullptr)
    throw HubError(HubError::Kind::Network, "[hf::download] expected a curl handle, got none");
  Transfer t{&request, {}, false, nullptr};
  curl_slist* headers = nullptr;
  for (const std::string& line : request.headers) headers = c.slist_append(headers, line.c_str());
  char error[CURL_ERROR_SIZE] = {0};
  c.easy_setopt(h, CURLOPT_URL, request.url.c_str());
  c.easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  c.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  c.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");  // older libcurl: ignored (CURLE_UNKNOWN_OPTION)
  c.easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  c.easy_setopt(h, CURLOPT_NOBODY, request.head ? 1L : 0L);
  c.easy_setopt(h, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  c.easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  c.easy_setopt(h, CURLOPT_CONNECTTIMEOUT, request.connect_timeout_s);
  c.easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  c.easy_setopt(h, CURLOPT_LOW_SPEED_TIME, request.stall_timeout_s);
  c.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  c.easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
  c.easy_setopt(h, CURLOPT_HEADERDATA, &t);
  c.easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_data);
  c.easy_setopt(h, CURLOPT_WRITEDATA, &t);
  const CURLcode rc = c.easy_perform(h);
  long status = 0;
  c.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  c.easy_cleanup(h);
  c.slist_free_all(headers);
  if (t.failure) std::rethrow_exception(t.failure);
  if (rc != CURLE_OK) {
    const std::string reason = error[0] ? error : c.easy_strerror(rc);
    throw HubError(HubError::Kind::Network, "[hf::download] expected a response from " + request.url +
                                                ", got: " + reason +
                                                (t.aborted ? " (transfer stopped by the client)" : ""));
  }
  if (status != 0) t.response.status = status;
  return t.response;
}

}  // namespace meganeura::hf
