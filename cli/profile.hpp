#pragma once
// The profiling front end: `meganeura profile` (cli/cmd_profile.cpp) and the profile_session example
// (examples/profile_session.cpp) are both this function.

namespace meganeura::cli {

struct ProfileFrontEnd {
  // profile_session's contract (docs/debugging.md): OUT is required and MEGANEURA_GPU_TIMING=1 must be set;
  // `meganeura profile` turns timing on itself and OUT is optional.
  bool require_timing_env = false;
};

// argv[0] is the program's name as usage and errors show it.
int profile_main(int argc, char** argv, const ProfileFrontEnd& front = {});

}  // namespace meganeura::cli
