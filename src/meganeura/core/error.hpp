#pragma once
// The project's error hierarchy. Every error the library throws at its boundary derives from
// meganeura::Error; messages start with "[where]" and say what was expected and what was found.
#include <source_location>
#include <stdexcept>
#include <string>

namespace meganeura {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A tensor shape does not fit an op. The message names the op, expected and actual shapes, the node's
// name and the file:line of the user's builder call.
class ShapeError : public Error {
  using Error::Error;
};
// A graph is malformed as a whole (no outputs, unknown node, output independent of inputs, ...).
class GraphError : public Error {
  using Error::Error;
};
// Vulkan (or any backend) failed: no loader, no device, out of memory, a bad device id.
class DeviceError : public Error {
  using Error::Error;
};
// GLSL did not compile or SPIR-V did not validate; carries the numbered source and the kernel label.
class ShaderError : public Error {
 public:
  ShaderError(const std::string& message, std::string label, std::string numbered_source)
      : Error(message), label_(std::move(label)), source_(std::move(numbered_source)) {}
  const std::string& label() const { return label_; }
  const std::string& numbered_source() const { return source_; }

 private:
  std::string label_;
  std::string source_;
};
// An environment variable or SessionConfig field holds a value we cannot accept.
class ConfigError : public Error {
  using Error::Error;
};
// A session was used wrongly: unknown input name, wrong parameter size, value fused away, ...
class SessionError : public Error {
  using Error::Error;
};
// A checkpoint file is truncated, corrupt or does not match the session.
class CheckpointError : public Error {
  using Error::Error;
};
// A data file (IDX, safetensors, ...) is missing or malformed.
class DataError : public Error {
  using Error::Error;
};
// A model or tensor file (safetensors, GGUF, an index, a hub download) is malformed or unreadable; the
// message names the file and the tensor or field at fault.
class FormatError : public Error {
  using Error::Error;
};
// A distributed (MPI) run failed: no libmpi, a collective that did not complete within its timeout (a rank
// died or hangs), ranks that disagree about the model. The message names the rank and the operation.
class DistributedError : public Error {
  using Error::Error;
};
// A model hub download failed. kind() says how: an HTTP status (status() holds it: 401, 403, 404, ...), the
// network (no connection, a dropped transfer: what was fetched is kept for a resume), offline mode with the
// file absent from the cache, a checksum that does not match, a cache folder that cannot be written, or no
// libcurl on the machine.
class HubError : public Error {
 public:
  enum class Kind { Http, Network, Offline, Checksum, Cache, NoLibrary };
  HubError(Kind kind, const std::string& message, int status = 0)
      : Error(message), kind_(kind), status_(status) {}
  Kind kind() const { return kind_; }
  int status() const { return status_; }

 private:
  Kind kind_;
  int status_;
};

// "file.cpp:42" for error messages.
std::string where(const std::source_location& loc);

}  // namespace meganeura
