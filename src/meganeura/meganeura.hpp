#pragma once
// The public API in one include.
#include "meganeura/core/error.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/session/session.hpp"
