// Tokenizer tests: llama2.c references, handmade tokenizer.json files (both styles), streaming
// UTF-8, the synthetic vocabulary and malformed inputs.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "../fuzz/fuzz_targets.h"
#include "core/error.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int>;
const std::string kMeta = "\xE2\x96\x81";

void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Concatenated raw token bytes: the byte-exact inverse of encode (decode() also sanitises UTF-8).
std::string raw_bytes(const Tokenizer& t, const Ids& ids) {
  std::string s;
  int prev = -1;
  for (int id : ids) {
    s += t.token_bytes(prev, id);
    prev = id;
  }
  return s;
}

// Expects kvp::Error whose message contains every fragment.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected kvp::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    for (const auto& frag : fragments) EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
        << "message \"" << e.what() << "\" lacks \"" << frag << "\"";
  }
}

// ---- llama2.c tokenizer.bin ---------------------------------------------------------------------

struct RefCase {
  std::string prompt;
  Ids prompt_ids, output_ids;
  std::string text;
};

std::vector<RefCase> load_reference(const std::string& path) {
  json j = json::parse(read_file(path));
  std::vector<RefCase> out;
  for (const auto& c : j["cases"])
    out.push_back({c["prompt"].get<std::string>(), c["prompt_ids"].get<Ids>(), c["output_ids"].get<Ids>(),
                   c["text"].get<std::string>()});
  return out;
}

TEST(TokenizerLlama2c, Stories260KReference) {
  KVP_REQUIRE_SHARED(tokp, "models/stories260K/tok512.bin");
  KVP_REQUIRE_SHARED(refp, "models/stories260K/reference_greedy.json");
  auto tok = load_tokenizer(tokp);
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->encode("Once upon a time", true), (Ids{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->encode("", true), (Ids{1}));
  EXPECT_EQ(tok->encode("", false), (Ids{}));
  auto cases = load_reference(refp);
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) {
    EXPECT_EQ(tok->encode(c.prompt, true), c.prompt_ids) << c.prompt;
    std::string text = tok->decode(c.output_ids);
    EXPECT_EQ(text, c.text);
  }
  EXPECT_EQ(tok->decode(cases[0].output_ids).rfind("Once upon a time", 0), 0u);
}

TEST(TokenizerLlama2c, AiDreams260KReference) {
  KVP_REQUIRE_SHARED(tokp, "models/aidreams260K/tok512.bin");
  KVP_REQUIRE_SHARED(refp, "models/aidreams260K/reference_greedy.json");
  auto tok = load_tokenizer(tokp);
  EXPECT_EQ(tok->encode("I dream", true), (Ids{1, 303, 281, 269, 435, 447}));
  for (const auto& c : load_reference(refp)) {
    EXPECT_EQ(tok->encode(c.prompt, true), c.prompt_ids) << c.prompt;
    EXPECT_EQ(tok->decode(c.output_ids), c.text);
  }
}

TEST(TokenizerLlama2c, Llama2Tokenizer) {
  KVP_REQUIRE_SHARED(tokp, "models/llama2-tokenizer/tokenizer.bin");
  auto tok = load_tokenizer(tokp);
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->encode("Once upon a time", false), (Ids{9038, 2501, 263, 931}));
  EXPECT_EQ(tok->encode("Once upon a time", true), (Ids{1, 9038, 2501, 263, 931}));
  EXPECT_EQ(tok->decode({1, 9038, 2501, 263, 931, 2}), "Once upon a time");
  EXPECT_EQ(tok->piece(1), "\n<s>\n");
  // run.c's rule: the leading space of a token right after BOS is dropped, elsewhere kept.
  EXPECT_EQ(tok->token_bytes(1, 9038), "Once");
  EXPECT_EQ(tok->token_bytes(9038, 2501), " upon");
  // Byte tokens decode to the raw byte.
  EXPECT_EQ(tok->token_bytes(5, 3 + 0x41), "A");
  for (std::string s : {"héllo wörld", "日本語のテキスト", "emoji 😀 and 🇯🇵", "tabs\tand\nnewlines\r\n", "  x  "}) {
    Ids ids = tok->encode(s, true);
    EXPECT_EQ(tok->decode(ids), s);
  }
}

TEST(TokenizerLlama2c, SpecialIdsOverride) {
  KVP_REQUIRE_SHARED(tokp, "models/stories260K/tok512.bin");
  auto tok = load_tokenizer(tokp);
  tok->set_special_ids(2, 1);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->encode("", true), (Ids{2}));
  expect_error([&] { tok->set_special_ids(512, 1); }, {"outside the vocabulary"});
  expect_error([&] { tok->token_bytes(-1, 9999); }, {"9999"});
}

// ---- malformed inputs ---------------------------------------------------------------------------

std::string bin_entry(float score, std::string_view piece) {
  std::string s(8, '\0');
  int32_t len = int32_t(piece.size());
  std::memcpy(s.data(), &score, 4);
  std::memcpy(s.data() + 4, &len, 4);
  return s + std::string(piece);
}

std::string bin_header(int32_t max_len) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &max_len, 4);
  return s;
}

TEST(TokenizerMalformed, Llama2cBin) {
  test::TempDir dir;
  expect_error([&] { load_tokenizer(dir.file("nope.bin")); }, {"nope.bin", "not found"});
  write_file(dir.file("empty.bin"), "");
  expect_error([&] { load_tokenizer(dir.file("empty.bin")); }, {"empty.bin", "empty"});
  write_file(dir.file("short.bin"), "ab");
  expect_error([&] { load_tokenizer(dir.file("short.bin")); }, {"short.bin"});
  write_file(dir.file("neg.bin"), bin_header(-5) + bin_entry(0, "a"));
  expect_error([&] { load_tokenizer(dir.file("neg.bin")); }, {"neg.bin", "max_token_length"});
  std::string good = bin_header(8) + bin_entry(0, "<unk>") + bin_entry(0, "\n<s>\n") + bin_entry(0, "\n</s>\n");
  write_file(dir.file("good.bin"), good);
  EXPECT_EQ(load_tokenizer(dir.file("good.bin"))->vocab_size(), 3);
  // Piece length far beyond the file / beyond max_token_length.
  std::string absurd = good + bin_entry(0, "x");
  int32_t huge = 1 << 30;
  std::memcpy(absurd.data() + good.size() + 4, &huge, 4);
  write_file(dir.file("absurd.bin"), absurd);
  expect_error([&] { load_tokenizer(dir.file("absurd.bin")); }, {"absurd.bin", "piece length"});
  std::string too_long = bin_header(200) + bin_entry(0, "abc");
  std::memcpy(too_long.data() + 8, &huge, 4);
  write_file(dir.file("long.bin"), too_long.substr(0, 20));
  expect_error([&] { load_tokenizer(dir.file("long.bin")); }, {"long.bin"});
  // Truncated in the middle of an entry header and of a piece.
  write_file(dir.file("trunc1.bin"), good + std::string(5, '\0'));
  expect_error([&] { load_tokenizer(dir.file("trunc1.bin")); }, {"trunc1.bin", "truncated"});
  std::string e = bin_entry(0, "hello");
  write_file(dir.file("trunc2.bin"), good + e.substr(0, e.size() - 2));
  expect_error([&] { load_tokenizer(dir.file("trunc2.bin")); }, {"trunc2.bin", "truncated"});
  write_file(dir.file("model.gguf"), std::string("GGUF\x03\0\0\0", 8));
  expect_error([&] { load_tokenizer(dir.file("model.gguf")); }, {"GGUF"});
  expect_error([&] { load_tokenizer(dir.path()); }, {"no tokenizer.json, tokenizer.bin or tokenizer.model"});
}

TEST(TokenizerMalformed, TruncatedRealFile) {
  KVP_REQUIRE_SHARED(tokp, "models/stories260K/tok512.bin");
  std::string all = read_file(tokp);
  test::TempDir dir;
  // Every cut that does not land on an entry boundary must be refused, never crash.
  int refused = 0;
  for (size_t cut : {size_t(5), size_t(9), size_t(100), all.size() / 2, all.size() - 1}) {
    write_file(dir.file("t.bin"), all.substr(0, cut));
    try {
      load_tokenizer(dir.file("t.bin"));
    } catch (const Error& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find("t.bin"), std::string::npos);
    }
  }
  EXPECT_GE(refused, 4);
}

json sp_json(bool byte_fallback);

TEST(TokenizerMalformed, Json) {
  test::TempDir dir;
  auto load_text = [&](const std::string& name, const std::string& text) {
    write_file(dir.file(name), text);
    return load_tokenizer(dir.file(name));
  };
  expect_error([&] { load_text("a.json", "{ this is not json"); }, {"a.json", "invalid JSON"});
  expect_error([&] { load_text("b.json", "{}"); }, {"b.json", "model"});
  expect_error([&] { load_text("c.json", R"({"model": {"type": "BPE", "merges": []}})"); }, {"c.json", "vocab"});
  expect_error([&] { load_text("d.json", R"({"model": {"type": "Unigram", "vocab": []}})"); }, {"d.json", "Unigram"});
  expect_error([&] { load_text("e.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}})"); }, {"e.json", "merges"});
  expect_error([&] { load_text("f.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a c"]}})"); },
               {"f.json", "unknown token", "\"c\""});
  expect_error([&] { load_text("g.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]}})"); },
               {"g.json", "not in the vocabulary"});
  expect_error([&] { load_text("h.json", R"({"model": {"type": "BPE", "vocab": {"a": -3}, "merges": []}})"); },
               {"h.json", "out of range"});
  expect_error([&] { load_text("i.json", R"({"model": {"type": "BPE", "vocab": {"a": 99999999999}, "merges": []}})"); },
               {"i.json", "out of range"});
  expect_error([&] { load_text("j.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})"); },
               {"j.json", "id 0"});
  expect_error([&] { load_text("k.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}})"); },
               {"k.json", "unk_token"});
  expect_error([&] { load_text("l.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "Lowercase"}})"); },
               {"l.json", "Lowercase"});
  expect_error([&] {
    load_text("m.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                           "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})");
  }, {"m.json", "regex"});
  expect_error([&] { load_text("n.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}})"); },
               {"n.json", "merge #0"});
  expect_error([&] { load_text("o.json", "[1, 2, 3]"); }, {"o.json"});
  expect_error([&] { load_text("p.json", R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})"); }, {"p.json", "empty"});
  mkdir(dir.file("hf").c_str(), 0755);
  write_file(dir.file("hf/tokenizer.json"), sp_json(true).dump());
  EXPECT_EQ(load_tokenizer(dir.file("hf"))->encode("hello", false), (Ids{271}));
}

TEST(TokenizerMalformed, VocabSpec) {
  VocabSpec v;
  expect_error([&] { tokenizer_from_vocab(v); }, {"GGUF", "empty"});
  v.tokens = {"a", "b", "ab"};
  v.model = "bert";
  expect_error([&] { tokenizer_from_vocab(v); }, {"bert"});
  v.model = "llama";
  expect_error([&] { tokenizer_from_vocab(v); }, {"scores"});
  v.scores = {0, 0};
  expect_error([&] { tokenizer_from_vocab(v); }, {"2 scores for 3 tokens"});
  v.model = "gpt2";
  v.scores = {};
  v.merges = {"a c"};
  expect_error([&] { tokenizer_from_vocab(v); }, {"unknown token", "\"c\""});
  v.merges = {"abc"};
  expect_error([&] { tokenizer_from_vocab(v); }, {"merge #0"});
  v.merges = {"a b"};
  v.pre = "klingon";
  expect_error([&] { tokenizer_from_vocab(v); }, {"klingon"});
  v.pre = "";
  v.token_types = {1, 1, 9};
  expect_error([&] { tokenizer_from_vocab(v); }, {"token type 9"});
  v.token_types = {};
  v.bos_id = 7;
  expect_error([&] { tokenizer_from_vocab(v); }, {"outside the vocabulary"});
}

// ---- handmade tokenizer.json: SentencePiece style -------------------------------------------------

// <unk> <s> </s>, bytes at 3..258, then: ▁ h e l l o w r d ▁h ll ▁he llo ▁hello ▁w or ▁wor, <sep>.
json sp_json(bool byte_fallback) {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  for (int b = 0; b < 256; ++b) vocab[tok::byte_piece(uint8_t(b))] = 3 + b;
  int id = 259;
  for (std::string p : {kMeta, std::string("h"), std::string("e"), std::string("l"), std::string("o"),
                        std::string("w"), std::string("r"), std::string("d"), kMeta + "h", std::string("ll"),
                        kMeta + "he", std::string("llo"), kMeta + "hello", kMeta + "w", std::string("or"),
                        kMeta + "wor"})
    vocab[p] = id++;
  EXPECT_EQ(id, 275);
  json merges = json::array({"l l", kMeta + " h", kMeta + "h e", "ll o", kMeta + "he llo"});
  // The newer pair form for the rest.
  merges.push_back({kMeta, "w"});
  merges.push_back({"o", "r"});
  merges.push_back({kMeta + "w", "or"});
  json j;
  j["added_tokens"] = json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                   {{"id", 1}, {"content", "<s>"}, {"special", true}},
                                   {{"id", 2}, {"content", "</s>"}, {"special", true}},
                                   {{"id", 275}, {"content", "<sep>"}, {"special", false}}});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "Prepend"}, {"prepend", kMeta}},
                                      {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}}}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                                {{"type", "ByteFallback"}},
                                {{"type", "Fuse"}},
                                {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  j["model"] = {{"type", "BPE"},  {"unk_token", "<unk>"}, {"byte_fallback", byte_fallback}, {"fuse_unk", true},
                {"vocab", vocab}, {"merges", merges}};
  return j;
}

TEST(TokenizerJson, SentencePieceStyle) {
  auto tok = tokenizer_from_json(sp_json(true).dump(), "sp.json");
  EXPECT_EQ(tok->vocab_size(), 276);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->default_add_bos());
  // ▁hello▁world: ll, ▁h, ▁he, llo, ▁hello, ▁w, or, ▁wor, then l and d stay.
  EXPECT_EQ(tok->encode("hello world", false), (Ids{271, 274, 262, 266}));
  EXPECT_EQ(tok->encode("hello world", true), (Ids{1, 271, 274, 262, 266}));
  EXPECT_EQ(tok->decode({1, 271, 274, 262, 266, 2}), "hello world");
  // Literal special token, then a stretch that gets its own "▁" (Prepend runs per stretch).
  EXPECT_EQ(tok->encode("<s>hello", false), (Ids{1, 271}));
  // Non-special added token, then é by byte fallback (C3 A9 -> 3+0xC3, 3+0xA9).
  EXPECT_EQ(tok->encode("hello<sep>é", false), (Ids{271, 275, 259, 198, 172}));
  EXPECT_EQ(tok->decode({271, 275, 259, 198, 172}), "hello<sep> é");
  EXPECT_EQ(tok->encode("", false), (Ids{}));
  // Arbitrary UTF-8 (and invalid bytes) survives the round trip through byte fallback.
  for (std::string s : {"héllo wörld", "日本語 😀", "\xFF\xFE bad", "a\nb\tc"}) {
    Ids ids = tok->encode(s, true);
    EXPECT_EQ(raw_bytes(*tok, ids), s);
  }
}

TEST(TokenizerJson, WithoutByteFallbackUsesUnk) {
  auto tok = tokenizer_from_json(sp_json(false).dump(), "sp.json");
  EXPECT_EQ(tok->encode("hé", false), (Ids{267, 0}));
  EXPECT_EQ(tok->encode("héé", false), (Ids{267, 0}));  // fuse_unk
}

TEST(TokenizerJson, MetaspacePreTokenizer) {
  json j = sp_json(true);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "first"}, {"split", false}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", {{{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "first"}},
                                {{"type", "ByteFallback"}}}}};
  auto tok = tokenizer_from_json(j.dump(), "meta.json");
  EXPECT_EQ(tok->encode("hello world", false), (Ids{271, 274, 262, 266}));
  // "first": only the stretch at the start of the input gets the prefix.
  EXPECT_EQ(tok->encode("hello<sep>é", false), (Ids{271, 275, 198, 172}));
  EXPECT_EQ(tok->decode({271, 274, 262, 266}), "hello world");
  j["pre_tokenizer"]["prepend_scheme"] = "always";
  EXPECT_EQ(tokenizer_from_json(j.dump(), "m.json")->encode("hello<sep>é", false), (Ids{271, 275, 259, 198, 172}));
  j["pre_tokenizer"]["prepend_scheme"] = "never";
  EXPECT_EQ(tokenizer_from_json(j.dump(), "m.json")->encode("hello", false), (Ids{260, 261, 270}));  // h e llo
  // split: words split before each ▁, so "▁wor" can still form but never across words.
  j["pre_tokenizer"]["prepend_scheme"] = "first";
  j["pre_tokenizer"]["split"] = true;
  EXPECT_EQ(tokenizer_from_json(j.dump(), "m.json")->encode("hello world", false), (Ids{271, 274, 262, 266}));
}

// ---- handmade tokenizer.json: byte level ----------------------------------------------------------

// Ids 0..255 are the GPT-2 characters of bytes 0..255, then Ġt he Ġthe in ca cat, <|endoftext|>
// (262), 12 (263). The fuzz_tokenize target's tokenizer, so that what these tests pin down is what
// the fuzzer runs.
json byte_json() {
  json j = json::parse(fuzz::detail_tokenize::byte_level_json());
  EXPECT_EQ(j["model"]["vocab"]["\xC4\xA0t"], 256);  // the space byte is "Ġ" (U+0120)
  return j;
}

TEST(TokenizerJson, ByteLevel) {
  auto tok = tokenizer_from_json(byte_json().dump(), "bl.json");
  EXPECT_EQ(tok->eos_id(), 262);
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_FALSE(tok->default_add_bos());
  // "the" | " cat": t+he (no "the" merge without Ġ), Ġ | ca+t.
  EXPECT_EQ(tok->encode("the cat<|endoftext|>", false), (Ids{116, 257, 32, 261, 262}));
  EXPECT_EQ(tok->encode(" the", false), (Ids{258}));
  // GPT-2 regex keeps " 123" together, so the 1-2 merge applies.
  EXPECT_EQ(tok->encode(" 123", false), (Ids{32, 263, 51}));
  EXPECT_EQ(tok->decode({116, 257, 32, 261, 262}), "the cat");
  EXPECT_EQ(tok->piece(258), "\xC4\xA0the");

  // Arbitrary bytes, including invalid UTF-8, round-trip exactly.
  std::mt19937 rng(7);
  for (int n = 0; n < 200; ++n) {
    std::string s(size_t(rng() % 40), '\0');
    for (char& c : s) c = char(rng() % 256);
    EXPECT_EQ(raw_bytes(*tok, tok->encode(s, false)), s);
  }
  // A 4-byte emoji: one byte token per byte; streaming holds the text back until it is complete.
  Ids ids = tok->encode("\xF0\x9F\x98\x80", false);
  ASSERT_EQ(ids.size(), 4u);
  Utf8StreamDecoder dec;
  std::string got;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string part = dec.push(tok->token_bytes(i ? ids[i - 1] : -1, ids[i]));
    if (i < 3) {
      EXPECT_EQ(part, "");
    }
    got += part;
  }
  got += dec.flush();
  EXPECT_EQ(got, "\xF0\x9F\x98\x80");
}

TEST(TokenizerJson, Qwen2StyleSplit) {
  json j = byte_json();
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", tok::kQwen2Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  auto tok = tokenizer_from_json(j.dump(), "qwen.json");
  // \p{N} one digit at a time: the "12" merge can no longer apply.
  EXPECT_EQ(tok->encode(" 123", false), (Ids{32, 49, 50, 51}));
  EXPECT_EQ(tok->encode("the cat", false), (Ids{116, 257, 32, 261}));
  // (?i:'s) and letters: "IN" stays as bytes, "in" merges.
  EXPECT_EQ(tok->encode("in", false), (Ids{259}));
  VocabSpec v = tok->to_vocab_spec();
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "qwen2");
  auto tok2 = tokenizer_from_vocab(v);
  for (std::string s : {" 123", "the cat", "in the cat's hat\n\n", "日本 😀"})
    EXPECT_EQ(tok2->encode(s, false), tok->encode(s, false)) << s;
}

TEST(TokenizerJson, IgnoreMergesAndPrefixSpace) {
  json j = byte_json();
  j["model"]["vocab"]["hello"] = 264;
  j["model"]["ignore_merges"] = true;
  auto tok = tokenizer_from_json(j.dump(), "im.json");
  EXPECT_EQ(tok->encode("hello", false), (Ids{264}));
  j["model"]["ignore_merges"] = false;
  EXPECT_EQ(tokenizer_from_json(j.dump(), "im.json")->encode("hello", false), (Ids{257, 'l', 'l', 'o'}));
  j["pre_tokenizer"]["add_prefix_space"] = true;
  EXPECT_EQ(tokenizer_from_json(j.dump(), "im.json")->encode("the", false), (Ids{258}));
}

TEST(TokenizerJson, GgufByteLevelRoundTrip) {
  auto tok = tokenizer_from_json(byte_json().dump(), "bl.json");
  VocabSpec v = tok->to_vocab_spec();
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "gpt-2");  // llama.cpp's "default" is another split
  ASSERT_EQ(v.merges.size(), 7u);
  auto tok2 = tokenizer_from_vocab(v);
  for (std::string s : {"the cat<|endoftext|>", " 123", "x\xFFy", "  spaces  "}) {
    EXPECT_EQ(tok2->encode(s, false), tok->encode(s, false)) << s;
    EXPECT_EQ(tok2->decode(tok2->encode(s, false)), tok->decode(tok->encode(s, false)));
  }
}

// ---- UTF-8 streaming --------------------------------------------------------------------------------

TEST(Utf8Stream, Behaviour) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.push("ab"), "ab");
  EXPECT_EQ(d.push("\xE2"), "");
  EXPECT_EQ(d.push("\x82"), "");
  EXPECT_EQ(d.push("\xAC!"), "\xE2\x82\xAC!");
  EXPECT_EQ(d.push("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(d.push("\x80x"), "\xEF\xBF\xBDx");  // stray continuation byte
  EXPECT_EQ(d.push("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong form
  EXPECT_EQ(d.push("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(d.push("\xF0\x9F"), "");
  EXPECT_EQ(d.push("a"), "\xEF\xBF\xBD" "a");  // broken sequence, then the next char
  EXPECT_EQ(d.push("\xF0\x9F\x98"), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(d.flush(), "");
}

TEST(Utf8Stream, EmojiSplitAcrossByteTokens) {
  KVP_REQUIRE_SHARED(tokp, "models/llama2-tokenizer/tokenizer.bin");
  auto tok = load_tokenizer(tokp);
  Ids ids = tok->encode("😀", false);  // ▁ then four byte tokens
  ASSERT_EQ(ids.size(), 5u);
  Utf8StreamDecoder d;
  std::string out;
  int prev = tok->bos_id();
  for (int id : ids) {
    out += d.push(tok->token_bytes(prev, id));
    if (id != ids.back()) {
      EXPECT_TRUE(out.empty() || out == " ");
    }
    prev = id;
  }
  out += d.flush();
  EXPECT_EQ(out, "\xF0\x9F\x98\x80");
  // Decoding a truncated emoji yields a replacement character, never invalid UTF-8.
  EXPECT_EQ(tok->decode(Ids(ids.begin(), ids.end() - 1)), "\xEF\xBF\xBD");
}

// ---- synthetic tokenizer ------------------------------------------------------------------------------

TEST(TokenizerSynthetic, JsonAndVocab) {
  const std::string english = "Once upon a time, there was a little girl named Lily. She loved to play in the park "
                              "with her friends, and they were very happy together.";
  for (int n : {512, 32000}) {
    std::string js = make_synthetic_tokenizer_json(n);
    auto tok = tokenizer_from_json(js, "synthetic");
    EXPECT_EQ(tok->vocab_size(), n);
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    EXPECT_EQ(tok->piece(0), "<unk>");
    EXPECT_EQ(tok->piece(3), "<0x00>");
    EXPECT_EQ(tok->piece(258), "<0xFF>");
    Ids ids = tok->encode(english, true);
    EXPECT_EQ(ids[0], 1);
    // 512 ids leave room for ~180 merged pieces only; 32000 holds the whole word list.
    const size_t limit = n == 512 ? english.size() * 2 / 3 : english.size() / 2;
    EXPECT_LT(ids.size(), limit) << "English should encode to multi-character tokens (n=" << n << ")";
    EXPECT_EQ(tok->decode(ids), english);
    auto vt = tokenizer_from_vocab(make_synthetic_vocab(n));
    EXPECT_EQ(vt->vocab_size(), n);
    Ids vids = vt->encode(english, true);
    EXPECT_LT(vids.size(), limit);
    EXPECT_EQ(vt->decode(vids), english);
    std::mt19937 rng(n);
    for (int k = 0; k < 100; ++k) {
      std::string s;
      for (int m = int(rng() % 30); m > 0; --m) {
        uint32_t r = rng() % 10;
        uint32_t cp = r < 6 ? 32 + rng() % 95 : r < 8 ? 0xA0 + rng() % 0x700 : r < 9 ? 0x4E00 + rng() % 0x5000
                                                                                     : 0x1F300 + rng() % 0x300;
        tok::append_utf8(s, cp);
      }
      EXPECT_EQ(raw_bytes(*tok, tok->encode(s, false)), s);
      EXPECT_EQ(raw_bytes(*vt, vt->encode(s, false)), s);
      EXPECT_EQ(tok->decode(tok->encode(s, true)), s);
    }
  }
  VocabSpec big = make_synthetic_vocab(32000);
  EXPECT_EQ(big.token_types.back(), int32_t(TokenType::Unused));
  EXPECT_EQ(big.tokens.back().rfind("<extra_", 0), 0u);
  EXPECT_THROW(make_synthetic_tokenizer_json(100), Error);
}

TEST(TokenizerSynthetic, FileRoundTrip) {
  test::TempDir dir;
  write_file(dir.file("tokenizer.json"), make_synthetic_tokenizer_json(512));
  auto tok = load_tokenizer(dir.path());
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->decode(tok->encode("the end", true)), "the end");
}

}  // namespace
}  // namespace kvp
