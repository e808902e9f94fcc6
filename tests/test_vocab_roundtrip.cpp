// A GGUF vocabulary written as HF tokenizer files (src/tokenizer/hf_json_writer.cpp) tokenises as the
// vocabulary it came from, read back by kvparity's own tokenizer.json loader and converted to GGUF
// again: SentencePiece-style ("llama") and byte-level ("gpt2") vocabularies, through the library and
// through `kvparity convert` (issue 16, item 4).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "model/checkpoint_export.h"
#include "model/synthetic.h"
#include "test_util.h"
#include "tokenizer/hf_json_writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int>;
using test::CliRun;

using test::q;

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

const std::vector<std::string>& fixed_texts() {
  static const std::vector<std::string> v = {
      "",
      " ",
      "Once upon a time, there was a little girl named Lily.",
      "  leading spaces",
      "trailing spaces   ",
      "multiple   spaces   inside",
      "tab\tseparated\tvalues",
      "new\nline",
      "\n\nparagraphs\n\nhere\n",
      "windows\r\nline\r\nends",
      "digits 0123456789 and 3.14159, 1,000,000 and 2024-01-31",
      "x=42; y = x*7 - 13 // 99%",
      "café naïve résumé Ångström",
      "日本語のテキスト and 中文",
      "emoji 😀🎉👍🏽 and ❤️",
      "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم",
      "combining e\xCC\x81 and zero\xE2\x80\x8Bwidth",
      "\x01\x02 control chars \x7F",
      "quotes \"double\" 'single' `back`",
      "It's they're we've I'd you'll HE'S",
      "CamelCaseIdentifier snake_case_identifier",
      "(parentheses) [brackets] {braces} <angle>",
      "...!!!??" "?---===+++",
      "a\xE2\x96\x81" "b and \xE2\x96\x81leading metaspace",
      "<0x41> looks like a byte token",
      "supercalifragilisticexpialidocious antidisestablishmentarianism",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "the the the the the",
  };
  return v;
}

// Seeded mixtures of words, digits, spaces, newlines and multi-byte characters.
std::vector<std::string> random_texts(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> parts = {"the", "cat", "sat", "on", "mat", "Once", "upon", "time", "Lily", "happy",
                                          "a",   "I",   "café", "日本", "😀",   "1234", "x",    "’",    "—",     "ß"};
  std::vector<std::string> out;
  for (int k = 0; k < n; ++k) {
    std::string s;
    for (int m = int(rng() % 14); m > 0; --m) {
      uint32_t r = rng() % 10;
      if (r < 5) s += parts[rng() % parts.size()];
      else if (r < 8) s += " ,.!?\n\t  0123"[rng() % 13];
      else s += char(32 + rng() % 95);
      if (rng() % 3 == 0) s += ' ';
    }
    out.push_back(s);
  }
  return out;
}

// `got` must encode and decode every text as `want` does, and agree on every id.
void expect_same_tokenizer(const Tokenizer& want, const Tokenizer& got, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.vocab_size(), want.vocab_size());
  EXPECT_EQ(got.bos_id(), want.bos_id());
  EXPECT_EQ(got.eos_id(), want.eos_id());
  EXPECT_EQ(got.default_add_bos(), want.default_add_bos());
  for (int id = 0; id < want.vocab_size(); ++id) {
    if (got.piece(id) != want.piece(id) || got.is_control(id) != want.is_control(id) ||
        got.token_bytes(-1, id) != want.token_bytes(-1, id) || got.token_bytes(id, id) != want.token_bytes(id, id)) {
      ADD_FAILURE() << "token " << id << " (\"" << want.piece(id) << "\") differs";
      break;
    }
  }
  std::vector<std::string> texts = fixed_texts();
  const size_t n_fixed = texts.size();
  for (auto& s : random_texts(400, 16)) texts.push_back(s);
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& s = texts[i];
    for (bool bos : {false, true}) {
      const Ids a = want.encode(s, bos), b = got.encode(s, bos);
      if (a != b && ++mismatches <= 5) ADD_FAILURE() << "encode differs on \"" << s << "\" (bos " << bos << ")";
      EXPECT_EQ(got.decode(b), want.decode(a)) << "\"" << s << "\"";
    }
    // A literal "▁" in the text decodes as a space in the SentencePiece style, by design.
    if (i < n_fixed && s.find(tok::kMetaspace) == std::string::npos) {
      EXPECT_EQ(got.decode(got.encode(s, false)), s);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// spec -> tokenizer.json -> kvparity's loader, and from there back to a GGUF vocabulary.
void expect_hf_round_trip(const VocabSpec& spec, const std::string& what) {
  auto gguf = tokenizer_from_vocab(spec);
  const std::string text = hf_tokenizer_json(spec, what);
  auto hf = tokenizer_from_json(text, what + " tokenizer.json");
  expect_same_tokenizer(*gguf, *hf, what + ": GGUF vocabulary vs written tokenizer.json");
  const VocabSpec back = hf->to_vocab_spec();
  EXPECT_EQ(back.model, spec.model);
  EXPECT_EQ(back.tokens, spec.tokens);
  EXPECT_EQ(back.add_bos, spec.add_bos);
  EXPECT_EQ(back.add_space_prefix, spec.add_space_prefix);
  expect_same_tokenizer(*gguf, *tokenizer_from_vocab(back), what + ": GGUF -> tokenizer.json -> GGUF");
}

// ---- library -----------------------------------------------------------------------------------

TEST(VocabToHfJson, SyntheticVocabularies) {
  for (int n : {300, 512, 32000}) {
    const VocabSpec spec = make_synthetic_vocab(n);
    expect_hf_round_trip(spec, "synthetic " + std::to_string(n));
    // The project's own tokenizer.json for the same vocabulary agrees as well, but only at small
    // sizes: its merge list (one chain per word) misses splits that the score order takes once the
    // vocabulary holds word endings, e.g. "▁ti" + "me" at 32000. That gap between synth's hf and gguf
    // outputs is a separate matter; this test neither pins nor hides more of it.
    if (n > 512) continue;
    auto own = tokenizer_from_json(make_synthetic_tokenizer_json(n), "synthetic tokenizer.json");
    auto written = tokenizer_from_json(hf_tokenizer_json(spec, "synthetic"), "written tokenizer.json");
    expect_same_tokenizer(*own, *written, "synthetic " + std::to_string(n) + ": own vs written tokenizer.json");
  }
}

TEST(VocabToHfJson, Llama2Tokenizer) {
  KVP_REQUIRE_SHARED(bin, "models/llama2-tokenizer/tokenizer.bin");
  const VocabSpec spec = load_tokenizer(bin)->to_vocab_spec();
  ASSERT_EQ(spec.tokens.size(), 32000u);
  expect_hf_round_trip(spec, "Llama-2 vocabulary");
}

TEST(VocabToHfJson, NoSpacePrefixAndNoBos) {
  VocabSpec spec = make_synthetic_vocab(512);
  spec.add_space_prefix = false;
  spec.add_bos = false;
  expect_hf_round_trip(spec, "synthetic, no prefix, no BOS");
  const json cfg = json::parse(hf_tokenizer_config_json(spec, "synthetic"));
  EXPECT_EQ(cfg["add_bos_token"], false);
}

// A GPT-2 style byte-level vocabulary: the 256 byte characters, merges building some words, and
// end-of-text as a control token.
VocabSpec byte_level_vocab(const std::string& pre, const std::vector<std::string>& more_words = {}) {
  const auto& b2u = tok::byte_to_unicode();
  auto mapped = [&](const std::string& s) {
    std::string out;
    for (char c : s) tok::append_utf8(out, b2u[uint8_t(c)]);
    return out;
  };
  VocabSpec v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(mapped(std::string(1, char(b))));
  std::set<std::string> have(v.tokens.begin(), v.tokens.end());
  std::vector<std::string> words = {" the", " cat", " sat",  "the", "Once", " upon", " time", "ing",
                                    " happy", "12",  "123",  " a",  "\n\n", "  ",    "日本",  "café"};
  words.insert(words.end(), more_words.begin(), more_words.end());
  for (const std::string& w : words) {
    // Every prefix of the word is made from the one before plus one byte.
    std::string prefix = mapped(w.substr(0, 1));
    for (size_t k = 1; k < w.size(); ++k) {
      const std::string next = mapped(w.substr(k, 1));
      if (have.insert(prefix + next).second) {
        v.tokens.push_back(prefix + next);
        v.merges.push_back(prefix + " " + next);
      }
      prefix += next;
    }
  }
  v.tokens.push_back("<|endoftext|>");
  v.token_types.assign(v.tokens.size(), int32_t(TokenType::Normal));
  v.token_types.back() = int32_t(TokenType::Control);
  v.eos_id = int(v.tokens.size()) - 1;
  v.add_bos = false;
  v.add_space_prefix = false;
  return v;
}

TEST(VocabToHfJson, ByteLevelVocabularies) {
  for (const char* pre : {"default", "gpt-2", "qwen2", "llama-bpe", "gpt-4o", "smollm"}) {
    const VocabSpec spec = byte_level_vocab(pre);
    expect_hf_round_trip(spec, std::string("byte-level, pre ") + pre);
    EXPECT_EQ(tokenizer_from_json(hf_tokenizer_json(spec, "bl"), "bl.json")->to_vocab_spec().pre, pre);
  }
  // BOS added in front, as Llama-3 does.
  VocabSpec spec = byte_level_vocab("llama-bpe");
  spec.tokens.push_back("<|begin_of_text|>");
  spec.token_types.push_back(int32_t(TokenType::Control));
  spec.bos_id = int(spec.tokens.size()) - 1;
  spec.add_bos = true;
  auto hf = tokenizer_from_json(hf_tokenizer_json(spec, "bl"), "bl.json");
  expect_same_tokenizer(*tokenizer_from_vocab(spec), *hf, "byte-level with BOS");
  EXPECT_EQ(hf->encode("the", true).front(), spec.bos_id);
}

// Each GGUF pre-tokenizer name splits as its family's tokenizer.json regex does: the vocabulary
// holds whole "2024", " camelCase" and "Case", so a token boundary inside them is the split's.
// Qwen2 takes digits one at a time, Llama-3 three at a time, o200k also parts camelCase, Tekken
// parts camelCase, digits one at a time and leaves contractions apart.
TEST(VocabPreTokenizers, EachNameSplitsAsItsFamily) {
  VocabSpec v = byte_level_vocab("default", {"2024", " camelCase", "Case", " it's", "'s"});
  auto pieces = [&](const Tokenizer& t, const std::string& text) {
    std::vector<std::string> out;
    for (int id : t.encode(text, false)) out.push_back(t.token_bytes(-1, id));
    return out;
  };
  using P = std::vector<std::string>;
  const std::string text = "2024 camelCase it's";
  const std::vector<std::pair<const char*, P>> want = {
      {"qwen2", {"2", "0", "2", "4", " camelCase", " it", "'s"}},
      {"deepseek-r1-qwen", {"2", "0", "2", "4", " camelCase", " it", "'s"}},
      {"llama-bpe", {"202", "4", " camelCase", " it", "'s"}},
      {"llama3", {"202", "4", " camelCase", " it", "'s"}},
      {"falcon3", {"202", "4", " camelCase", " it", "'s"}},
      {"smaug-bpe", {"202", "4", " camelCase", " it", "'s"}},
      {"gpt-4o", {"202", "4", " camel", "Case", " it's"}},
      {"llama4", {"202", "4", " camel", "Case", " it's"}},
      {"tekken", {"2", "0", "2", "4", " camel", "Case", " it", "'s"}},
  };
  for (const auto& [pre, expected] : want) {
    v.pre = pre;
    const auto gguf = tokenizer_from_vocab(v);
    EXPECT_EQ(pieces(*gguf, text), expected) << pre;
    // The same vocabulary as tokenizer.json (its Split regex) splits alike and names itself back.
    const auto hf = tokenizer_from_json(hf_tokenizer_json(v, "bl"), "bl.json");
    EXPECT_EQ(pieces(*hf, text), expected) << pre << " via tokenizer.json";
    // Read back under the family's first name (the names of one split are one regex to tokenizer.json).
    const std::string back = hf->to_vocab_spec().pre, p = pre;
    const std::string family = p == "deepseek-r1-qwen" ? "qwen2"
                               : p == "llama3" || p == "falcon3" ? "llama-bpe"
                               : p == "llama4" ? "gpt-4o" : p;
    EXPECT_EQ(back, family) << pre;
  }
}

// GGUF "default" (and no pre at all) is llama.cpp's DEFAULT split, not GPT-2's regex: punctuation
// runs leave the text first, so " !!" and " $" lose their space, and digit runs go in threes from
// the left. The vocabulary holds every piece of both splits whole, so tokens show the split.
const std::vector<std::string> kSplitWords = {"Hi", " there", " !!", "!!", " 56789", "567", "89", " $"};
const std::string kSplitText = "Hi,  there !! 56789 $x";
const std::vector<std::string> kDefaultPieces = {"Hi", ",", " ", " there", " ", "!!", " ", "567", "89", " ", "$", "x"};
const std::vector<std::string> kGpt2Pieces = {"Hi", ",", " ", " there", " !!", " 56789", " $", "x"};

std::vector<std::string> token_pieces(const Tokenizer& t, const std::string& text) {
  std::vector<std::string> out;
  for (int id : t.encode(text, false)) out.push_back(t.token_bytes(-1, id));
  return out;
}

TEST(VocabPreTokenizers, DefaultIsLlamaCppsDefaultNotGpt2) {
  VocabSpec v = byte_level_vocab("default", kSplitWords);
  const Ids by_default = tokenizer_from_vocab(v)->encode(kSplitText, false);
  for (const char* pre : {"default", ""}) {
    v.pre = pre;
    EXPECT_EQ(token_pieces(*tokenizer_from_vocab(v), kSplitText), kDefaultPieces) << "pre \"" << pre << "\"";
  }
  for (const char* pre : {"gpt-2", "exaone4", "gpt2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de",
                          "jina-v2-code", "gigachat", "roberta-bpe", "olmo", "mpt", "jais", "trillion",
                          "granite-docling"}) {
    v.pre = pre;
    const auto t = tokenizer_from_vocab(v);
    EXPECT_EQ(token_pieces(*t, kSplitText), kGpt2Pieces) << pre;
    EXPECT_NE(t->encode(kSplitText, false), by_default) << pre << " must not split as \"default\"";
  }
  v.pre = "phi-3";
  try {
    tokenizer_from_vocab(v);
    ADD_FAILURE() << "pre phi-3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exaone4"), std::string::npos) << e.what();
  }
}

// GPT-2's regex alone names itself "gpt-2" in a tokenizer.json, so a conversion to GGUF splits in
// llama.cpp as here; "default" is written as its four Splits, in order, and reads back as "default".
TEST(VocabPreTokenizers, TokenizerJsonNamesGpt2AndDefaultApart) {
  VocabSpec v = byte_level_vocab("exaone4", kSplitWords);
  auto hf = tokenizer_from_json(hf_tokenizer_json(v, "bl"), "bl.json");
  EXPECT_EQ(token_pieces(*hf, kSplitText), kGpt2Pieces);
  EXPECT_EQ(hf->to_vocab_spec().pre, "gpt-2");

  v.pre = "";
  const json j = json::parse(hf_tokenizer_json(v, "bl"));
  const json& list = j["pre_tokenizer"]["pretokenizers"];
  ASSERT_EQ(list.size(), 5u) << j["pre_tokenizer"].dump();
  const std::vector<std::string> want = {R"([\p{P}\$\+<=>\^~\|]+)", tok::kGpt2Pattern, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(list[i]["type"], "Split") << i;
    EXPECT_EQ(list[i]["pattern"]["Regex"], want[i]) << i;
    EXPECT_EQ(list[i]["behavior"], "Isolated") << i;
  }
  EXPECT_EQ(list[4]["type"], "ByteLevel");
  EXPECT_EQ(list[4]["use_regex"], false);
  hf = tokenizer_from_json(j.dump(), "bl.json");
  EXPECT_EQ(token_pieces(*hf, kSplitText), kDefaultPieces);
  const VocabSpec back = hf->to_vocab_spec();
  EXPECT_EQ(back.pre, "default");
  EXPECT_EQ(token_pieces(*tokenizer_from_vocab(back), kSplitText), kDefaultPieces);
  expect_same_tokenizer(*tokenizer_from_vocab(v), *tokenizer_from_vocab(back), "absent pre -> tokenizer.json -> GGUF");

  // The same four splits in another order are another split (GPT-2's first: "a'the" is "a" "'t"
  // "he", then "a" "'" "t" "he", not "a" "'" "the"), which GGUF has no name for.
  json swapped = j;
  std::swap(swapped["pre_tokenizer"]["pretokenizers"][0], swapped["pre_tokenizer"]["pretokenizers"][1]);
  const auto other = tokenizer_from_json(swapped.dump(), "swapped.json");
  EXPECT_EQ(token_pieces(*hf, "a'the"), (std::vector<std::string>{"a", "'", "the"}));
  EXPECT_EQ(token_pieces(*other, "a'the"), (std::vector<std::string>{"a", "'", "t", "h", "e"}));
  try {
    other->to_vocab_spec();
    ADD_FAILURE() << "the swapped split was given a GGUF name";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no GGUF 'pre' name"), std::string::npos) << e.what();
  }
}

// Llama-3's pre-tokenizer names (llama-bpe, llama3) take a piece that is a token whole, whatever
// the merges would make of it (llama.cpp's ignore_merges, Llama-3's tokenizer.json's); the others
// merge. "zqx" is a token no merge builds.
TEST(VocabPreTokenizers, Llama3TakesAPieceThatIsATokenWhole) {
  VocabSpec v = byte_level_vocab("llama-bpe");
  const auto& b2u = tok::byte_to_unicode();
  std::string zqx;
  for (char ch : std::string("zqx")) tok::append_utf8(zqx, b2u[uint8_t(ch)]);
  v.tokens.insert(v.tokens.end() - 1, zqx);  // before <|endoftext|>, which stays last
  v.token_types.insert(v.token_types.end() - 1, int32_t(TokenType::Normal));
  v.eos_id = int(v.tokens.size()) - 1;
  const int id = int(v.tokens.size()) - 2;
  EXPECT_EQ(tokenizer_from_vocab(v)->encode("zqx", false), std::vector<int>{id});
  const auto hf = tokenizer_from_json(hf_tokenizer_json(v, "bl"), "bl.json");
  EXPECT_EQ(hf->encode("zqx", false), std::vector<int>{id}) << "via tokenizer.json";
  v.pre = "qwen2";
  EXPECT_EQ(tokenizer_from_vocab(v)->encode("zqx", false).size(), 3u);
}

TEST(VocabToHfJson, TokenizerConfigCarriesSpecialTokens) {
  json cfg = json::parse(hf_tokenizer_config_json(make_synthetic_vocab(512), "synthetic"));
  EXPECT_EQ(cfg["bos_token"], "<s>");
  EXPECT_EQ(cfg["eos_token"], "</s>");
  EXPECT_EQ(cfg["unk_token"], "<unk>");
  EXPECT_TRUE(cfg["pad_token"].is_null());
  EXPECT_EQ(cfg["add_bos_token"], true);
  EXPECT_EQ(cfg["add_eos_token"], false);
  EXPECT_EQ(cfg["added_tokens_decoder"]["1"]["content"], "<s>");
  EXPECT_EQ(cfg["added_tokens_decoder"]["2"]["special"], true);
  EXPECT_EQ(cfg["tokenizer_class"], "PreTrainedTokenizerFast");

  cfg = json::parse(hf_tokenizer_config_json(byte_level_vocab("default"), "bl"));
  EXPECT_TRUE(cfg["bos_token"].is_null());
  EXPECT_EQ(cfg["eos_token"], "<|endoftext|>");
  EXPECT_EQ(cfg["add_bos_token"], false);
}

// Text after a literal control token gets the SentencePiece "▁" on both routes: llama.cpp prefixes
// every stretch that follows a special token, and HF normalisers run again after each added token.
TEST(VocabToHfJson, BothRoutesPrefixTheTextAfterALiteralControlToken) {
  const VocabSpec spec = make_synthetic_vocab(512);
  auto gguf = tokenizer_from_vocab(spec);
  auto hf = tokenizer_from_json(hf_tokenizer_json(spec, "synthetic"), "written tokenizer.json");
  const Ids g = gguf->encode("x</s>(", false), h = hf->encode("x</s>(", false);
  EXPECT_EQ(g, h);
  ASSERT_GE(g.size(), 3u);
  EXPECT_EQ(g[g.size() - 2], gguf->encode(" ", false).back()) << "\"▁\" before the text after </s>";
  EXPECT_EQ(gguf->decode(g), "x (");
  EXPECT_EQ(hf->decode(h), "x (");
  EXPECT_EQ(gguf->encode("</s>(", false), hf->encode("</s>(", false));
  const VocabSpec bl = byte_level_vocab("default");
  EXPECT_EQ(tokenizer_from_json(hf_tokenizer_json(bl, "bl"), "bl.json")->encode("x<|endoftext|>y", false),
            tokenizer_from_vocab(bl)->encode("x<|endoftext|>y", false));
}

template <typename F>
void expect_refusal(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected kvp::Error";
  } catch (const Error& e) {
    for (const auto& frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos) << e.what() << " lacks " << frag;
  }
}

TEST(VocabToHfJson, RefusesWhatTokenizerJsonCannotHold) {
  VocabSpec v = make_synthetic_vocab(512);
  v.tokens[400] = v.tokens[300];
  expect_refusal([&] { hf_tokenizer_json(v, "dup.gguf"); }, {"dup.gguf", "300", "400", "once"});
  v = make_synthetic_vocab(512);
  v.tokens[511] = "\xFF\xFE";
  expect_refusal([&] { hf_tokenizer_json(v, "bad.gguf"); }, {"bad.gguf", "tokenizer.json"});
  v.model = "bert";
  expect_refusal([&] { hf_tokenizer_json(v, "bert.gguf"); }, {"bert.gguf", "bert"});
}

// ---- `kvparity convert` --------------------------------------------------------------------------

std::unique_ptr<Tokenizer> gguf_tokenizer(const std::string& path) {
  const Checkpoint ck = open_checkpoint(path);
  if (!ck.vocab) {
    ADD_FAILURE() << path << " carries no vocabulary";
    return nullptr;
  }
  return tokenizer_from_vocab(*ck.vocab);
}

// GGUF -> HF directory -> GGUF with `kvparity convert`: the HF directory's tokenizer and the final
// GGUF's vocabulary tokenise as the first GGUF's.
void expect_convert_round_trip(const std::string& gguf, const test::TempDir& tmp) {
  CliRun r = test::run_kvparity("convert --model " + q(gguf) + " --to hf --out " + q(tmp.file("hf")));
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(tmp.file("hf/tokenizer.json"))) << r.err;
  ASSERT_TRUE(std::filesystem::exists(tmp.file("hf/tokenizer_config.json")));
  const json cfg = json::parse(read_text(tmp.file("hf/tokenizer_config.json")));
  EXPECT_EQ(cfg["bos_token"], "<s>");
  EXPECT_EQ(cfg["eos_token"], "</s>");
  EXPECT_EQ(cfg["add_bos_token"], true);
  r = test::run_kvparity("convert --model " + q(tmp.file("hf")) + " --to gguf --out " + q(tmp.file("back.gguf")));
  ASSERT_EQ(r.status, 0) << r.err;

  auto orig = gguf_tokenizer(gguf);
  auto back = gguf_tokenizer(tmp.file("back.gguf"));
  ASSERT_TRUE(orig && back);
  expect_same_tokenizer(*orig, *load_tokenizer(tmp.file("hf")), "GGUF vs converted HF directory");
  expect_same_tokenizer(*orig, *back, "GGUF vs GGUF -> HF -> GGUF");
}

TEST(CliVocab, SynthGgufConvertsToHfThatGenerates) {
  test::TempDir tmp;
  const std::string gguf = tmp.file("t.gguf");
  CliRun r = test::run_kvparity("synth --preset tiny --dtype fp32 --format gguf --out " + q(gguf));
  ASSERT_EQ(r.status, 0) << r.err;
  expect_convert_round_trip(gguf, tmp);

  // A new user's path from issue 16: the converted directory generates on its own, as the GGUF does.
  const std::string gen = " --prompt 'Once upon a time, 42 cats' --max-new-tokens 8 --json";
  const CliRun a = test::run_kvparity("generate --model " + q(gguf) + gen);
  const CliRun b = test::run_kvparity("generate --model " + q(tmp.file("hf")) + gen);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(json::parse(a.out)["prompt_ids"], json::parse(b.out)["prompt_ids"]);
  EXPECT_EQ(json::parse(a.out)["output_ids"], json::parse(b.out)["output_ids"]);
}

TEST(CliVocab, Llama2TokenizerGgufRoundTrip) {
  KVP_REQUIRE_SHARED(bin, "models/llama2-tokenizer/tokenizer.bin");
  test::TempDir tmp;
  // The tiny shapes with Llama-2's 32000-token vocabulary embedded, as a Llama-2 GGUF carries it.
  ModelConfig cfg = synthetic_config("llama", "tiny");
  cfg.vocab_size = 32000;
  const VocabSpec spec = load_tokenizer(bin)->to_vocab_spec();
  ExportOptions eo;
  eo.vocab = &spec;
  const std::string gguf = tmp.file("llama2.gguf");
  export_checkpoint(synthesize_checkpoint(cfg, DType::F32), "gguf", gguf, eo);
  expect_convert_round_trip(gguf, tmp);

  const std::string gen = " --prompt 'The café served 12 crêpes.' --max-new-tokens 6 --json";
  const CliRun a = test::run_kvparity("generate --model " + q(gguf) + gen);
  const CliRun b = test::run_kvparity("generate --model " + q(tmp.file("hf")) + gen);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(json::parse(a.out)["prompt_ids"], json::parse(b.out)["prompt_ids"]);
  EXPECT_EQ(json::parse(a.out)["output_ids"], json::parse(b.out)["output_ids"]);
}

// A llama2.c checkpoint given its tokenizer.bin: the HF directory gets a tokenizer.json and generates
// the reference story.
TEST(CliVocab, Llama2cTokenizerBinBecomesTokenizerJson) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  test::TempDir tmp;
  CliRun r = test::run_kvparity("convert --model " + q(model) + " --tokenizer " + q(tok) + " --to hf --out " +
                                q(tmp.file("hf")));
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(tmp.file("hf/tokenizer.json")));
  r = test::run_kvparity("generate --model " + q(tmp.file("hf")) + " --prompt 'Once upon a time' --max-new-tokens 12");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind(", there was a little girl", 0), 0u) << r.out;
}

}  // namespace
}  // namespace kvp
