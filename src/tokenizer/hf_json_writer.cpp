// VocabSpec -> tokenizer.json / tokenizer_config.json. The vocabulary is first turned into the
// BpeTokenizer the GGUF route would use, so the files describe exactly that tokenizer's settings
// (pre-tokenizer patterns, prefix and decoding rules) rather than re-deriving them from names.
#include "tokenizer/hf_json_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp {

namespace {

using json = nlohmann::json;
using tok::BpeConfig;
using tok::BpeTokenizer;

struct Built {
  std::unique_ptr<Tokenizer> holder;
  const BpeConfig* cfg = nullptr;
};

Built build(const VocabSpec& spec, const std::string& origin) {
  Built b;
  try {
    b.holder = tokenizer_from_vocab(spec);
  } catch (const Error& e) {
    fail("{}: {}", origin, e.what());
  }
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(b.holder.get());
  if (bpe == nullptr) fail("{}: vocabulary model \"{}\" has no tokenizer.json form", origin, spec.model);
  b.cfg = &bpe->config();
  return b;
}

bool is_mergeable(int32_t type) {
  auto t = TokenType(type);
  return t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused;
}

// Added tokens are the ones the GGUF route matches literally in the text; <unk> is deliberately not
// one of them (HF's Llama files list it, which would make a literal "<unk>" in the text encode to it).
json added_tokens(const BpeConfig& c) {
  json a = json::array();
  for (const auto& t : c.added)
    a.push_back({{"id", t.id}, {"content", t.content}, {"single_word", false}, {"lstrip", false},
                 {"rstrip", false}, {"normalized", false}, {"special", t.special}});
  return a;
}

json str_pattern(const std::string& s) { return json{{"String", s}}; }

// The GGUF route merges the adjacent pair whose joined piece scores highest. HF BPE merges by list
// position, so list every split of every mergeable piece into two mergeable pieces, best joined score
// first; the pair id order then makes the list deterministic.
json merges_from_scores(const BpeConfig& c) {
  tok::PieceMap ids;
  ids.reserve(c.pieces.size() * 2);
  for (size_t i = 0; i < c.pieces.size(); ++i)
    if (!c.pieces[i].empty()) ids.emplace(c.pieces[i], int(i));  // first id wins, as in BpeTokenizer
  struct M {
    float score;
    int left, right;
  };
  std::vector<M> ms;
  for (size_t r = 0; r < c.pieces.size(); ++r) {
    const std::string& p = c.pieces[r];
    if (!is_mergeable(c.types[r]) || tok::find_piece(ids, p) != int(r)) continue;
    // NaN would break the sort's ordering; such a piece is treated as the least preferred.
    const float score = std::isnan(c.scores[r]) ? -std::numeric_limits<float>::infinity() : c.scores[r];
    for (size_t k = 0; k < p.size();) {
      int n = tok::utf8_valid_len(p, k);
      k += n > 0 ? size_t(n) : 1;
      if (k >= p.size()) break;
      const int l = tok::find_piece(ids, std::string_view(p).substr(0, k));
      const int rr = tok::find_piece(ids, std::string_view(p).substr(k));
      if (l >= 0 && rr >= 0 && is_mergeable(c.types[l]) && is_mergeable(c.types[rr])) ms.push_back({score, l, rr});
    }
  }
  std::sort(ms.begin(), ms.end(), [](const M& a, const M& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.left != b.left ? a.left < b.left : a.right < b.right;
  });
  json out = json::array();
  for (const M& m : ms) out.push_back(json::array({c.pieces[m.left], c.pieces[m.right]}));
  return out;
}

json merges_from_ranks(const BpeConfig& c) {
  json out = json::array();
  for (auto [a, b] : c.merges) out.push_back(json::array({c.pieces[a], c.pieces[b]}));
  return out;
}

// The pre-tokenizer the GGUF route settled on, in HF components the reader maps back to the same
// split patterns.
json byte_level_pre_tokenizer(const BpeConfig& c, const std::string& origin) {
  const std::vector<std::string>& sp = c.split_patterns;
  auto byte_level = [](bool use_regex) {
    return json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
  };
  auto split = [](const std::string& pattern) {
    return json{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  };
  if (sp == std::vector<std::string>{tok::kGpt2Pattern}) return byte_level(true);
  for (const tok::SplitRegex& k : tok::known_split_regexes())
    if (sp == std::vector<std::string>{k.pattern})
      return {{"type", "Sequence"}, {"pretokenizers", json::array({split(k.pattern), byte_level(false)})}};
  if (sp == tok::default_split_patterns()) {
    // GPT-2's regex as a Split too, not as ByteLevel's: HF's ByteLevel maps the bytes to its
    // printable characters there and then, so a Split after it would see "Â²" where the GGUF
    // route sees "²". One ByteLevel without a regex goes last.
    json list = json::array();
    for (const std::string& p : sp) list.push_back(split(p));
    list.push_back(byte_level(false));
    return {{"type", "Sequence"}, {"pretokenizers", std::move(list)}};
  }
  if (sp == std::vector<std::string>{R"(\p{N})", tok::kGpt2Pattern})
    return {{"type", "Sequence"},
            {"pretokenizers",
             json::array({json{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
  fail("{}: the pre-tokenizer of vocabulary pre \"{}\" has no tokenizer.json form here", origin, c.pre);
}

json bos_template(const BpeConfig& c) {
  const std::string& bos = c.pieces[c.bos_id];
  auto special = [&](int type_id) { return json{{"SpecialToken", {{"id", bos}, {"type_id", type_id}}}}; };
  auto seq = [](const char* id, int type_id) { return json{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
  return {{"type", "TemplateProcessing"},
          {"single", json::array({special(0), seq("A", 0)})},
          {"pair", json::array({special(0), seq("A", 0), special(1), seq("B", 1)})},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", json::array({c.bos_id})}, {"tokens", json::array({bos})}}}}}};
}

// A JSON object cannot hold a key twice, so a piece shared by two ids cannot be written.
void check_unique_pieces(const BpeConfig& c, const std::string& origin) {
  tok::PieceMap seen;
  seen.reserve(c.pieces.size() * 2);
  for (size_t i = 0; i < c.pieces.size(); ++i) {
    auto [it, fresh] = seen.emplace(c.pieces[i], int(i));
    if (!fresh)
      fail("{}: tokens {} and {} are both \"{}\"; a tokenizer.json vocabulary holds each piece once", origin,
           it->second, i, c.pieces[i]);
  }
}

std::string dump(const json& j, const std::string& origin, const char* what) {
  try {
    return j.dump(1) + "\n";
  } catch (const json::exception& e) {
    // Pieces that are not valid UTF-8 cannot be JSON strings.
    fail("{}: cannot write {}: {}", origin, what, e.what());
  }
}

json piece_or_null(const BpeConfig& c, int id) {
  return id >= 0 && id < int(c.pieces.size()) ? json(c.pieces[id]) : json(nullptr);
}

}  // namespace

std::string hf_tokenizer_json(const VocabSpec& spec, const std::string& origin) {
  const Built b = build(spec, origin);
  const BpeConfig& c = *b.cfg;
  check_unique_pieces(c, origin);
  const bool spm = c.merge_by_score;
  if (!spm && !c.byte_level) fail("{}: vocabulary model \"{}\" has no tokenizer.json form", origin, spec.model);

  // Plain json (sorted keys): ordered_json inserts in linear time, far too slow for large vocabularies.
  json vocab = json::object();
  for (size_t i = 0; i < c.pieces.size(); ++i) vocab[c.pieces[i]] = int(i);

  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added_tokens(c);
  if (spm) {
    const bool prefix = c.prepend != tok::Prepend::Never;
    json norms = json::array();
    if (prefix) norms.push_back({{"type", "Prepend"}, {"prepend", c.prepend_str}});
    norms.push_back({{"type", "Replace"}, {"pattern", str_pattern(" ")}, {"content", tok::kMetaspace}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", norms}};
    j["pre_tokenizer"] = nullptr;
    json decs = json::array({json{{"type", "Replace"}, {"pattern", str_pattern(tok::kMetaspace)}, {"content", " "}},
                             json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}}});
    if (c.strip_first_space) decs.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    j["decoder"] = {{"type", "Sequence"}, {"decoders", decs}};
  } else {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = byte_level_pre_tokenizer(c, origin);
    j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  }
  if (c.add_bos && c.bos_id >= 0) j["post_processor"] = bos_template(c);
  else if (!spm)
    j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  else j["post_processor"] = nullptr;
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", piece_or_null(c, c.unk_id)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                // The GGUF route never fuses unknowns; with byte fallback none arise anyway.
                {"fuse_unk", false},
                {"byte_fallback", spm},
                {"ignore_merges", c.ignore_merges},
                {"vocab", std::move(vocab)},
                {"merges", spm ? merges_from_scores(c) : merges_from_ranks(c)}};
  return dump(j, origin, "tokenizer.json");
}

std::string hf_tokenizer_config_json(const VocabSpec& spec, const std::string& origin) {
  const Built b = build(spec, origin);
  const BpeConfig& c = *b.cfg;
  json dec = json::object();
  for (const auto& t : c.added)
    dec[std::to_string(t.id)] = {{"content", t.content}, {"lstrip", false}, {"normalized", false},
                                 {"rstrip", false},      {"single_word", false}, {"special", t.special}};
  json j;
  j["add_bos_token"] = c.add_bos && c.bos_id >= 0;
  j["add_eos_token"] = false;
  j["added_tokens_decoder"] = std::move(dec);
  j["bos_token"] = piece_or_null(c, c.bos_id);
  j["eos_token"] = piece_or_null(c, c.eos_id);
  j["unk_token"] = piece_or_null(c, c.unk_id);
  j["pad_token"] = piece_or_null(c, spec.pad_id);
  // Decoding must give back the text as the tokenizer.json decodes it, without transformers'
  // space clean-up.
  j["clean_up_tokenization_spaces"] = false;
  // The generic fast class reads tokenizer.json as written; LlamaTokenizerFast would rebuild the
  // post-processor and, with some settings, want the SentencePiece model file this directory lacks.
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  return dump(j, origin, "tokenizer_config.json");
}

}  // namespace kvp
