// HF tokenizer.json -> BpeConfig. Only the components used by Llama/Mistral/Gemma (SentencePiece
// style) and GPT-2/Qwen2/SmolLM/Llama-3 (byte level) are accepted; anything else is refused by name
// rather than silently tokenised differently.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp::tok {

namespace {

using json = nlohmann::json;
constexpr int64_t kMaxId = 1 << 22;

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

struct Parser {
  const std::string& origin;
  BpeConfig& c;

  [[noreturn]] void bad(const std::string& what) { fail("{}: {}", origin, what); }

  const json& field(const json& obj, const char* key, const char* where) {
    if (!obj.is_object() || !obj.contains(key)) bad(fmt::format("{} has no \"{}\"", where, key));
    return obj[key];
  }
  std::string str(const json& obj, const char* key, const char* where) {
    const json& v = field(obj, key, where);
    if (!v.is_string()) bad(fmt::format("{}.{} must be a string", where, key));
    return v.get<std::string>();
  }
  bool flag(const json& obj, const char* key, bool dflt) {
    if (!obj.contains(key) || obj[key].is_null()) return dflt;
    if (!obj[key].is_boolean()) bad(fmt::format("\"{}\" must be true or false", key));
    return obj[key].get<bool>();
  }
  std::string pattern_of(const json& obj, const char* where, bool* is_regex) {
    const json& p = field(obj, "pattern", where);
    if (p.is_string()) {
      *is_regex = false;
      return p.get<std::string>();
    }
    if (p.is_object() && p.contains("String") && p["String"].is_string()) {
      *is_regex = false;
      return p["String"].get<std::string>();
    }
    if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
      *is_regex = true;
      return p["Regex"].get<std::string>();
    }
    bad(fmt::format("{}.pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}", where));
  }

  void normalizer(const json& n) {
    if (n.is_null()) return;
    std::string type = str(n, "type", "normalizer");
    if (type == "Sequence") {
      const json& list = field(n, "normalizers", "normalizer Sequence");
      if (!list.is_array()) bad("normalizer Sequence.normalizers must be an array");
      for (const auto& x : list) normalizer(x);
    } else if (type == "Prepend") {
      c.prepend_str = str(n, "prepend", "normalizer Prepend");
      c.prepend = Prepend::Always;  // normalizers run on every stretch of text between added tokens
    } else if (type == "Replace") {
      bool re = false;
      std::string pat = pattern_of(n, "normalizer Replace", &re);
      if (re) bad("normalizer Replace with a Regex pattern is not supported");
      c.replacements.emplace_back(pat, str(n, "content", "normalizer Replace"));
    } else if (type == "NFC") {
      // Accepted as identity: input that is already NFC (almost all text) tokenises the same.
    } else {
      bad(fmt::format("normalizer type \"{}\" is not supported", type));
    }
  }

  void metaspace(const json& p, bool is_pre) {
    std::string rep = p.contains("replacement") && p["replacement"].is_string() ? p["replacement"].get<std::string>()
                                                                                 : kMetaspace;
    Prepend scheme = Prepend::Always;
    if (p.contains("prepend_scheme") && p["prepend_scheme"].is_string()) {
      std::string s = p["prepend_scheme"].get<std::string>();
      if (s == "first") scheme = Prepend::First;
      else if (s == "always") scheme = Prepend::Always;
      else if (s == "never") scheme = Prepend::Never;
      else bad(fmt::format("Metaspace prepend_scheme \"{}\" is not one of first/always/never", s));
    } else if (!flag(p, "add_prefix_space", true)) {
      scheme = Prepend::Never;
    }
    if (is_pre) {
      c.replacements.emplace_back(" ", rep);
      c.prepend_str = rep;
      c.prepend = scheme;
      c.prepend_unless_present = true;
      c.metaspace_split = flag(p, "split", true);
    } else {
      if (rep != kMetaspace) bad("Metaspace decoder with a replacement other than U+2581 is not supported");
      c.decode_metaspace = true;
      if (scheme != Prepend::Never) c.strip_first_space = true;
    }
  }

  void pre_tokenizer(const json& p) {
    if (p.is_null()) return;
    std::string type = str(p, "type", "pre_tokenizer");
    if (type == "Sequence") {
      const json& list = field(p, "pretokenizers", "pre_tokenizer Sequence");
      if (!list.is_array()) bad("pre_tokenizer Sequence.pretokenizers must be an array");
      for (const auto& x : list) pre_tokenizer(x);
    } else if (type == "ByteLevel") {
      c.byte_level = true;
      c.byte_level_prefix_space = flag(p, "add_prefix_space", true);
      if (flag(p, "use_regex", true)) c.split_patterns.push_back(kGpt2Pattern);
    } else if (type == "Split") {
      bool re = false;
      std::string pat = pattern_of(p, "pre_tokenizer Split", &re);
      std::string behavior = p.contains("behavior") && p["behavior"].is_string() ? p["behavior"].get<std::string>()
                                                                                 : "Isolated";
      if (behavior != "Isolated") bad(fmt::format("Split behavior \"{}\" is not supported (only Isolated)", behavior));
      if (flag(p, "invert", false)) bad("Split with invert=true is not supported");
      c.split_patterns.push_back(re ? pat : regex_escape(pat));
    } else if (type == "Metaspace") {
      metaspace(p, true);
    } else if (type == "Digits") {
      c.split_patterns.push_back(flag(p, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    } else {
      bad(fmt::format("pre_tokenizer type \"{}\" is not supported", type));
    }
  }

  void decoder(const json& d) {
    if (d.is_null()) return;
    std::string type = str(d, "type", "decoder");
    if (type == "Sequence") {
      const json& list = field(d, "decoders", "decoder Sequence");
      if (!list.is_array()) bad("decoder Sequence.decoders must be an array");
      for (const auto& x : list) decoder(x);
    } else if (type == "ByteLevel") {
      c.decode_byte_level = true;
    } else if (type == "Replace") {
      bool re = false;
      std::string pat = pattern_of(d, "decoder Replace", &re);
      std::string content = str(d, "content", "decoder Replace");
      if (re || pat != kMetaspace || content != " ")
        bad("decoder Replace is only supported as \"▁\" -> \" \"");
      c.decode_metaspace = true;
    } else if (type == "ByteFallback") {
      c.decode_byte_fallback = true;
    } else if (type == "Fuse") {
      // Token strings are concatenated anyway.
    } else if (type == "Strip") {
      std::string content = str(d, "content", "decoder Strip");
      int start = d.contains("start") && d["start"].is_number_integer() ? d["start"].get<int>() : 0;
      int stop = d.contains("stop") && d["stop"].is_number_integer() ? d["stop"].get<int>() : 0;
      if (content != " " || start > 1 || stop != 0)
        bad("decoder Strip is only supported as stripping one leading space");
      if (start == 1) c.strip_first_space = true;
    } else if (type == "Metaspace") {
      metaspace(d, false);
    } else {
      bad(fmt::format("decoder type \"{}\" is not supported", type));
    }
  }

  // TemplateProcessing that starts with a special token means "prepend BOS".
  void post_processor(const json& p, const PieceMap& ids) {
    if (p.is_null() || !p.is_object()) return;
    std::string type = p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>() : "";
    if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
      for (const auto& x : p["processors"]) post_processor(x, ids);
      return;
    }
    if (type != "TemplateProcessing" || !p.contains("single") || !p["single"].is_array()) return;
    const json& single = p["single"];
    if (single.empty() || !single[0].is_object() || !single[0].contains("SpecialToken")) return;
    const json& st = single[0]["SpecialToken"];
    if (!st.contains("id") || !st["id"].is_string()) return;
    std::string name = st["id"].get<std::string>();
    int id = find_piece(ids, name);
    if (p.contains("special_tokens") && p["special_tokens"].is_object() && p["special_tokens"].contains(name)) {
      const json& e = p["special_tokens"][name];
      if (e.contains("ids") && e["ids"].is_array() && e["ids"].size() == 1 && e["ids"][0].is_number_integer())
        id = e["ids"][0].get<int>();
    }
    if (id < 0 || id >= int(c.pieces.size()))
      bad(fmt::format("post_processor template uses special token \"{}\" which is not in the vocabulary", name));
    c.bos_id = id;
    c.add_bos = true;
  }
};

int checked_id(const json& v, const std::string& origin, const std::string& what) {
  if (!v.is_number_integer()) fail("{}: id of {} is not an integer", origin, what);
  int64_t id = v.get<int64_t>();
  if (id < 0 || id >= kMaxId) fail("{}: id {} of {} is out of range (0..{})", origin, id, what, kMaxId - 1);
  return int(id);
}

}  // namespace

std::unique_ptr<BpeTokenizer> bpe_from_json_text(std::string_view text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", origin, e.what());
  }
  if (!j.is_object()) fail("{}: a tokenizer.json must be a JSON object", origin);
  if (!j.contains("model") || !j["model"].is_object()) fail("{}: missing \"model\" object", origin);
  const json& m = j["model"];
  std::string type = m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
  if (type.empty() && m.contains("merges")) type = "BPE";
  if (type != "BPE")
    fail("{}: tokenizer model type \"{}\" is not supported (only BPE)", origin, type.empty() ? "<none>" : type);
  if (!m.contains("vocab") || !m["vocab"].is_object()) fail("{}: model.vocab is missing or not an object", origin);
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty())
      fail("{}: model.{} is not supported", origin, k);

  BpeConfig c;
  c.origin = origin;
  Parser P{origin, c};

  // Vocabulary and added tokens together decide the size; ids may leave holes.
  const json& vocab = m["vocab"];
  int max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    max_id = std::max(max_id, checked_id(it.value(), origin, "vocab entry \"" + it.key() + "\""));
  std::vector<AddedToken> added;
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) fail("{}: added_tokens must be an array", origin);
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        fail("{}: every added_tokens entry needs \"id\" and \"content\"", origin);
      AddedToken t;
      t.content = a["content"].get<std::string>();
      t.id = checked_id(a["id"], origin, "added token \"" + t.content + "\"");
      t.special = a.contains("special") && a["special"].is_boolean() && a["special"].get<bool>();
      max_id = std::max(max_id, t.id);
      added.push_back(std::move(t));
    }
  }
  if (max_id < 0) fail("{}: the vocabulary is empty", origin);
  c.pieces.assign(size_t(max_id) + 1, std::string());
  c.types.assign(size_t(max_id) + 1, int32_t(TokenType::Unused));
  std::vector<uint8_t> filled(size_t(max_id) + 1, 0);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    int id = it.value().get<int>();
    if (filled[id]) fail("{}: id {} is used by both \"{}\" and \"{}\"", origin, id, c.pieces[id], it.key());
    filled[id] = 1;
    c.pieces[id] = it.key();
    c.types[id] = int32_t(TokenType::Normal);
  }
  c.byte_fallback = P.flag(m, "byte_fallback", false);
  c.ignore_merges = P.flag(m, "ignore_merges", false);
  c.fuse_unk = P.flag(m, "fuse_unk", false);
  if (c.byte_fallback)
    for (size_t i = 0; i < c.pieces.size(); ++i)
      if (parse_byte_piece(c.pieces[i]) >= 0) c.types[i] = int32_t(TokenType::Byte);
  for (auto& t : added) {
    if (filled[t.id] && c.pieces[t.id] != t.content)
      fail("{}: added token \"{}\" reuses id {} of vocab entry \"{}\"", origin, t.content, t.id, c.pieces[t.id]);
    c.pieces[t.id] = t.content;
    filled[t.id] = 1;
    c.types[t.id] = int32_t(t.special ? TokenType::Control : TokenType::UserDefined);
  }
  c.added = std::move(added);

  PieceMap ids;
  ids.reserve(c.pieces.size() * 2);
  for (size_t i = 0; i < c.pieces.size(); ++i)
    if (filled[i]) ids.emplace(c.pieces[i], int(i));

  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    std::string u = m["unk_token"].get<std::string>();
    c.unk_id = find_piece(ids, u);
    if (c.unk_id < 0) fail("{}: unk_token \"{}\" is not in the vocabulary", origin, u);
    c.types[c.unk_id] = int32_t(TokenType::Unknown);
  }

  if (!m.contains("merges") || !m["merges"].is_array()) fail("{}: model.merges is missing or not an array", origin);
  const json& merges = m["merges"];
  c.merges.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& e = merges[r];
    std::string l, rr;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail("{}: merge #{} \"{}\" is not of the form \"left right\"", origin, r, s);
      l = s.substr(0, sp);
      rr = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      l = e[0].get<std::string>();
      rr = e[1].get<std::string>();
    } else {
      fail("{}: merge #{} must be a \"left right\" string or a [left, right] pair", origin, r);
    }
    int a = find_piece(ids, l), b = find_piece(ids, rr);
    if (a < 0 || b < 0) fail("{}: merge #{} (\"{}\", \"{}\") refers to unknown token \"{}\"", origin, r, l, rr, a < 0 ? l : rr);
    if (find_piece(ids, l + rr) < 0)
      fail("{}: merge #{} (\"{}\", \"{}\") produces \"{}\", which is not in the vocabulary", origin, r, l, rr, l + rr);
    c.merges.emplace_back(a, b);
  }

  if (j.contains("normalizer")) P.normalizer(j["normalizer"]);
  if (j.contains("pre_tokenizer")) P.pre_tokenizer(j["pre_tokenizer"]);
  if (j.contains("decoder")) P.decoder(j["decoder"]);
  if (j.contains("post_processor")) P.post_processor(j["post_processor"], ids);
  if (c.byte_level && !c.decode_byte_level && (!j.contains("decoder") || j["decoder"].is_null()))
    c.decode_byte_level = true;

  // GGUF's "pre" name for the pre-tokenizer, when one GGUF knows splits as these patterns do, in
  // this order: the splits that come out of the components are compared, not the components, so
  // ByteLevel's own regex and a Split by the same regex are one thing, and a name is only ever
  // given to exactly the split the GGUF route builds for it.
  if (c.byte_level) {
    using Patterns = std::vector<std::string>;
    const Patterns& sp = c.split_patterns;
    // GPT-2's regex alone is llama.cpp's "gpt-2"; its "default" is a four-step split of its own.
    if (sp == default_split_patterns()) c.pre = "default";
    else if (sp == Patterns{kGpt2Pattern}) c.pre = "gpt-2";
    else if (sp == Patterns{R"(\p{N})", kGpt2Pattern}) c.pre = "smollm";
    for (const SplitRegex& k : known_split_regexes())
      if (sp == Patterns{k.pattern})
        // Llama-3's split without its ignore_merges is llama.cpp's smaug-bpe (merges always applied).
        c.pre = k.gguf_pre == std::string("llama-bpe") && !c.ignore_merges ? "smaug-bpe" : k.gguf_pre;
  }

  // BOS/EOS by common names when the files do not say.
  if (c.bos_id < 0)
    for (const char* name : {"<s>", "<bos>", "<|begin_of_text|>"})
      if (int id = find_piece(ids, name); id >= 0) {
        c.bos_id = id;
        break;
      }
  for (const char* name : {"</s>", "<eos>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>"})
    if (int id = find_piece(ids, name); id >= 0) {
      c.eos_id = id;
      break;
    }
  if (c.bos_id >= 0 && c.types[c.bos_id] == int32_t(TokenType::Normal)) c.types[c.bos_id] = int32_t(TokenType::Control);
  if (c.eos_id >= 0 && c.types[c.eos_id] == int32_t(TokenType::Normal)) c.types[c.eos_id] = int32_t(TokenType::Control);
  c.model_name = c.byte_level ? "gpt2" : "llama";
  return std::make_unique<BpeTokenizer>(std::move(c));
}

}  // namespace kvp::tok
