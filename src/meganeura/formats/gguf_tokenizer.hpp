#pragma once
// A GGUF file's embedded tokenizer (the `tokenizer.ggml.*` keys) as TokenizerData, read the way llama.cpp's
// vocabulary loader reads it: `gpt2` is byte-level BPE (tokens, merges, pre-tokenizer `tokenizer.ggml.pre`),
// `llama` is SentencePiece-style (tokens, scores, byte fallback; BOS 1, EOS 2, UNK 0 and add_bos unless the
// file says otherwise). The metadata is untrusted: every key of the wrong type, array of the wrong length or
// id outside the vocabulary is a FormatError naming the file and the key.
#include <cstdint>
#include <vector>

#include "meganeura/formats/gguf.hpp"
#include "meganeura/tokenizer/tokenizer.hpp"

namespace meganeura::gguf {

// The tokenizer models the adapter accepts ("gpt2", "llama").
std::vector<std::string> tokenizer_models();

TokenizerData tokenizer_data(const File& file);

// The ids that end a generation: EOS, `tokenizer.ggml.eot_token_id` / `eom_token_id` where present, and the
// control tokens llama.cpp also treats as end-of-generation by their text (<|im_end|>, <|endoftext|>,
// <|eot_id|>, <|end|>, <end_of_turn>), without duplicates, EOS first.
std::vector<int32_t> end_of_generation_ids(const File& file, const TokenizerData& data);

}  // namespace meganeura::gguf
