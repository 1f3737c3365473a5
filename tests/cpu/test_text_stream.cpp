// models::TextStream, the Generator's incremental detokenisation: pieces never split a UTF-8 character, and
// their concatenation is the decoded text. A byte-level BPE vocabulary whose tokens are single bytes of "€"
// (E2 82 AC, in GPT-2's byte-to-character alphabet: "â", "Ĥ", "¬").
#include <gtest/gtest.h>

#include "meganeura/models/generate.hpp"

using namespace meganeura;

TEST(TextStream, PiecesWaitForTheBytesThatFinishACharacter) {
  TokenizerData d;
  d.tokens = {"\xC3\xA2", "\xC4\xA4", "\xC2\xAC", "a",
              "\xC4\xA0"
              "b"};  // â Ĥ ¬ a Ġb
  const Tokenizer tok = Tokenizer::from_data(d);
  models::TextStream s(tok);
  EXPECT_EQ(s.push(3), "a");
  EXPECT_EQ(s.push(0), "");
  EXPECT_EQ(s.push(1), "");
  EXPECT_EQ(s.push(2), "\xE2\x82\xAC");
  EXPECT_EQ(s.push(4), " b");
  EXPECT_EQ(s.push(0), "");
  EXPECT_EQ(s.text().substr(0, 6), "a\xE2\x82\xAC b");
  EXPECT_EQ(s.push(1), "");
  EXPECT_EQ(s.push(2), "\xE2\x82\xAC");
  EXPECT_EQ(s.text(), "a\xE2\x82\xAC b\xE2\x82\xAC");
  EXPECT_EQ(s.tokens().size(), 8u);
}
