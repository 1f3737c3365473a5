#pragma once
// The public API in one include.
#include "meganeura/core/error.hpp"
#include "meganeura/data/dataset.hpp"
#include "meganeura/data/loader.hpp"
#include "meganeura/ir/graph.hpp"
#include "meganeura/ir/init.hpp"
#include "meganeura/session/session.hpp"
#include "meganeura/tokenizer/tokenizer.hpp"
#include "meganeura/train/checkpoint.hpp"
#include "meganeura/train/session_target.hpp"
#include "meganeura/train/trainer.hpp"
