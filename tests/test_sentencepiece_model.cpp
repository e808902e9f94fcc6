// SentencePiece's tokenizer.model read directly: the Llama-2 file against its llama2.c export, the
// writer's files back through the reader, and what the reader must refuse. (Encodings against
// SentencePiece itself: test_tokenizer_spm.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "runtime/tokenizer_for_model.h"
#include "sentencepiece_writer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace kvp {
namespace {

VocabSpec read_model_file(const std::string& path) {
  auto mf = MappedFile::open(path);
  return vocab_from_sentencepiece_model(mf->data(), mf->size(), path);
}

VocabSpec read_model_bytes(const std::string& bytes) {
  return vocab_from_sentencepiece_model(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.model");
}

void expect_refused(const std::string& bytes, const std::string& fragment) {
  try {
    read_model_bytes(bytes);
    ADD_FAILURE() << "expected kvp::Error mentioning \"" << fragment << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("t.model"), std::string::npos) << e.what();
  }
}

TEST(SentencePieceModel, TheLlama2FileIsItsLlama2cExport) {
  KVP_REQUIRE_SHARED(model, "models/llama2-tokenizer/tokenizer.model");
  KVP_REQUIRE_SHARED(bin, "models/llama2-tokenizer/tokenizer.bin");
  const VocabSpec v = read_model_file(model);
  const VocabSpec b = vocab_from_tokenizer(*load_tokenizer(bin));
  ASSERT_EQ(v.tokens.size(), 32000u);
  // PROVENANCE.md: the .bin's pieces are the .model's with U+2581 written as a space.
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    ASSERT_EQ(v.tokens[i], b.tokens[i]) << "piece " << i;
    ASSERT_EQ(v.scores[i], b.scores[i]) << "piece " << i;
  }
  EXPECT_EQ(v.token_types[0], int32_t(TokenType::Unknown));
  EXPECT_EQ(v.token_types[1], int32_t(TokenType::Control));
  EXPECT_EQ(v.token_types[2], int32_t(TokenType::Control));
  for (int i = 3; i < 259; ++i) EXPECT_EQ(v.token_types[size_t(i)], int32_t(TokenType::Byte)) << i;
  EXPECT_EQ(v.token_types[259], int32_t(TokenType::Normal));
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.pad_id, -1);  // written as a ten-byte negative varint
  EXPECT_TRUE(v.add_space_prefix);

  auto tok = load_tokenizer(model);
  EXPECT_EQ(tok->encode("Once upon a time", false), (std::vector<int>{9038, 2501, 263, 931}));
  auto l2c = load_tokenizer(bin);
  for (const std::string s : {"Lily's mom said, \"don't go!\"", "naïve café 日本 😀", "  two  spaces\n\tand tab", ""})
    EXPECT_EQ(tok->encode(s, true), l2c->encode(s, true)) << s;
  EXPECT_EQ(tok->decode(tok->encode("héllo wörld", true)), "héllo wörld");
}

TEST(SentencePieceModel, WhatTheWriterWritesReadsBack) {
  VocabSpec spec = make_synthetic_vocab(400);
  spec.bos_id = 2;  // Gemma's order: ids other than the defaults travel
  spec.eos_id = 1;
  spec.pad_id = 0;
  test::SpmOptions o;
  o.add_dummy_prefix = false;
  const VocabSpec v = read_model_bytes(test::sentencepiece_model_bytes(spec, o));
  EXPECT_EQ(v.tokens, spec.tokens);
  EXPECT_EQ(v.scores, spec.scores);
  EXPECT_EQ(v.token_types, spec.token_types);
  EXPECT_EQ(v.bos_id, 2);
  EXPECT_EQ(v.eos_id, 1);
  EXPECT_EQ(v.pad_id, 0);
  EXPECT_EQ(v.unk_id, spec.unk_id);
  EXPECT_FALSE(v.add_space_prefix);
  VocabSpec expected = spec;
  expected.add_space_prefix = false;
  auto a = tokenizer_from_vocab(v), e = tokenizer_from_vocab(expected);
  for (const std::string s : {"the cat sat", " leading", "Once upon a time, 42!"})
    EXPECT_EQ(a->encode(s, true), e->encode(s, true)) << s;
}

TEST(SentencePieceModel, RefusesWhatItCannotReproduceAndNamesIt) {
  const VocabSpec spec = make_synthetic_vocab(400);
  auto with = [&](auto change) {
    test::SpmOptions o;
    change(o);
    return test::sentencepiece_model_bytes(spec, o);
  };
  expect_refused(with([](test::SpmOptions& o) { o.model_type = 1; }), "a SentencePiece unigram model");
  expect_refused(with([](test::SpmOptions& o) { o.normalizer = "nmt_nfkc"; }), "normalizer 'nmt_nfkc'");
  expect_refused(with([](test::SpmOptions& o) { o.charsmap = "xyz"; }), "3 bytes of character map");
  // The proto's default folds whitespace: a file that leaves the field out does.
  expect_refused(with([](test::SpmOptions& o) { o.remove_extra_whitespaces.reset(); }), "remove_extra_whitespaces");
  expect_refused(with([](test::SpmOptions& o) { o.write_normalizer = false; }), "remove_extra_whitespaces");
  VocabSpec far = spec;
  far.bos_id = 400;
  expect_refused(test::sentencepiece_model_bytes(far), "bos_id 400 is outside the 400 pieces");
  expect_refused(test::pb_bytes(2, test::pb_uint(3, 2)), "it holds no pieces");
  expect_refused(test::pb_bytes(1, test::pb_bytes(1, "a") + test::pb_uint(3, 9)), "piece 0 has type 9");
  expect_refused(test::pb_bytes(1, test::pb_float(2, NAN) + test::pb_bytes(1, "a")), "piece 0 has score nan");
  expect_refused(test::pb_bytes(1, test::pb_uint(1, 5)), "the piece's text (field 1) has wire type 0");
  expect_refused(test::pb_key(1, 3), "wire type 3");
  expect_refused(std::string("\x0a\x05\x0a\x01", 4), "field 1 claims 5 bytes where 2 remain");
  expect_refused(std::string("\x0a\x02\x0a\xff", 4), "a number is cut short");
  expect_refused(std::string("\x08") + std::string(11, '\xff'), "a number runs past 10 bytes");
  // A file cut anywhere is an error naming it, never a crash or a smaller vocabulary read as whole.
  const std::string whole = test::sentencepiece_model_bytes(spec);
  for (size_t cut = 1; cut < whole.size(); cut += 97)
    EXPECT_THROW(read_model_bytes(whole.substr(0, cut)), Error) << "cut at " << cut;
}

TEST(SentencePieceModel, FoundByContentAndBesideTheModel) {
  const std::string bytes = test::sentencepiece_model_bytes(make_synthetic_vocab(400));
  auto u8 = [](const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); };
  EXPECT_TRUE(looks_like_sentencepiece_model(u8(bytes), bytes.size()));
  // A tokenizer.bin whose max_token_length is 10 also starts with 0x0A.
  const std::string bin("\x0a\x00\x00\x00", 4);
  EXPECT_FALSE(looks_like_sentencepiece_model(u8(bin), bin.size()));
  test::TempDir dir;
  const std::string path = dir.file("tokenizer.model");
  std::ofstream(path, std::ios::binary) << bytes;
  // Whatever its name, and as the tokenizer a directory holds when it has no other.
  std::filesystem::copy_file(path, dir.file("spm.bin"));
  EXPECT_EQ(load_tokenizer(dir.file("spm.bin"))->vocab_size(), 400);
  EXPECT_EQ(load_tokenizer(dir.path())->vocab_size(), 400);
  EXPECT_EQ(tokenizer_file_beside(dir.file("model.gguf"), "gguf", ""), path);
}

}  // namespace
}  // namespace kvp
