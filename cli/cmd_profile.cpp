// meganeura profile: a per-dispatch GPU timing profile of one training step (cli/profile.cpp, shared with
// examples/profile_session.cpp).
#include "command.hpp"
#include "profile.hpp"

namespace meganeura::cli {
namespace {

int profile_command(int argc, char** argv) { return profile_main(argc, argv); }

const bool registered = register_command(
    {"profile", "per-dispatch GPU timing profile of a training step (JSON)", profile_command});

}  // namespace
}  // namespace meganeura::cli
