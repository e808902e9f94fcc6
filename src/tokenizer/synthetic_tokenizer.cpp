// Vocabulary for models the project generates itself. Every multi-character piece is built by a
// chain of merges (prefix + next character), ordered shortest first, so any prefix of the list is
// a consistent BPE vocabulary and small sizes keep the most useful pieces.
#include <nlohmann/json.hpp>

#include <unordered_set>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp {

namespace {

constexpr int kMinSyntheticVocab = 300;

// Frequent English words (roughly by frequency), then common word endings.
const char* const kWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "with",
    "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "not", "word",
    "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your",
    "how", "said", "an", "each", "she", "which", "do", "their", "time", "if", "will", "way", "about", "many",
    "then", "them", "write", "would", "like", "so", "these", "her", "long", "make", "thing", "see", "him",
    "two", "has", "look", "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most",
    "people", "my", "over", "know", "water", "than", "call", "first", "who", "may", "down", "side", "been",
    "now", "find", "any", "new", "work", "part", "take", "get", "place", "made", "live", "where", "after",
    "back", "little", "only", "round", "man", "year", "came", "show", "every", "good", "me", "give", "our",
    "under", "name", "very", "through", "just", "form", "great", "think", "say", "help", "low", "line",
    "before", "turn", "cause", "same", "mean", "differ", "move", "right", "boy", "old", "too", "does",
    "tell", "sentence", "set", "three", "want", "air", "well", "also", "play", "small", "end", "put",
    "home", "read", "hand", "port", "large", "spell", "add", "even", "land", "here", "must", "big", "high",
    "such", "follow", "act", "why", "ask", "men", "change", "went", "light", "kind", "off", "need", "house",
    "picture", "try", "us", "again", "animal", "point", "mother", "world", "near", "build", "self", "earth",
    "father", "head", "stand", "own", "page", "should", "country", "found", "answer", "school", "grow",
    "study", "still", "learn", "plant", "cover", "food", "sun", "four", "thought", "let", "keep", "eye",
    "never", "last", "door", "between", "city", "tree", "cross", "since", "hard", "start", "might", "story",
    "saw", "far", "sea", "draw", "left", "late", "run", "while", "press", "close", "night", "real", "life",
    "few", "stop", "open", "seem", "together", "next", "white", "children", "begin", "got", "walk", "example",
    "ease", "paper", "often", "always", "music", "those", "both", "mark", "book", "letter", "until", "mile",
    "river", "car", "feet", "care", "second", "group", "carry", "took", "rain", "eat", "room", "friend",
    "began", "idea", "fish", "mountain", "north", "once", "base", "hear", "horse", "cut", "sure", "watch",
    "color", "face", "wood", "main", "enough", "plain", "girl", "usual", "young", "ready", "above", "ever",
    "red", "list", "though", "feel", "talk", "bird", "soon", "body", "dog", "family", "direct", "pose",
    "leave", "song", "measure", "state", "product", "black", "short", "numeral", "class", "wind", "question",
    "happen", "complete", "ship", "area", "half", "rock", "order", "fire", "south", "problem", "piece",
    "told", "knew", "pass", "farm", "top", "whole", "king", "size", "heard", "best", "hour", "better",
    "true", "during", "hundred", "am", "remember", "step", "early", "hold", "west", "ground", "interest",
    "reach", "fast", "five", "sing", "listen", "six", "table", "travel", "less", "morning", "ten", "simple",
    "several", "toward", "war", "lay", "against", "pattern", "slow", "center", "love", "person", "money",
    "serve", "appear", "road", "map", "science", "rule", "govern", "pull", "cold", "notice", "voice",
    "fall", "power", "town", "fine", "certain", "fly", "unit", "lead", "cry", "dark", "machine", "note",
    "wait", "plan", "figure", "star", "box", "noun", "field", "rest", "correct", "able", "pound", "done",
    "beauty", "drive", "stood", "contain", "front", "teach", "week", "final", "gave", "green", "oh", "quick",
    "develop", "sleep", "warm", "free", "minute", "strong", "special", "mind", "behind", "clear", "tail",
    "produce", "fact", "street", "inch", "lot", "nothing", "course", "stay", "wheel", "full", "force", "blue",
    "object", "decide", "surface", "deep", "moon", "island", "foot", "yet", "busy", "test", "record", "boat",
    "common", "gold", "possible", "plane", "age", "dry", "wonder", "laugh", "thousand", "ago", "ran", "check",
    "game", "shape", "yes", "hot", "miss", "brought", "heat", "snow", "bed", "bring", "sit", "perhaps",
    "fill", "east", "weight", "language", "among", "happy", "ball", "named", "loved", "park", "day", "mom",
    "dad", "friends", "wanted", "played", "looked", "toy", "tree", "sad", "smiled"};
const char* const kEndings[] = {"ing", "ed", "er", "ly", "es", "s", "ion", "ent", "est", "al", "'s", "'t", "ness",
                                "ment", "able", "ful", "ous", "ive", "ers", "ings"};
const char* const kCapitalised[] = {"The", "I", "He", "She", "It", "They", "We", "You", "Once", "One", "In",
                                    "A", "This", "There", "But", "And", "Lily", "Tom", "What", "When"};

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = tok::utf8_loose_len(s, i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

struct Synthetic {
  std::vector<std::string> pieces;
  std::vector<int32_t> types;
  std::vector<float> scores;
  std::vector<std::pair<std::string, std::string>> merges;
};

Synthetic build(int vocab_size) {
  if (vocab_size < kMinSyntheticVocab)
    fail("synthetic tokenizer: vocab_size {} is too small (need at least {})", vocab_size, kMinSyntheticVocab);
  if (vocab_size > (1 << 22)) fail("synthetic tokenizer: vocab_size {} is too large", vocab_size);
  Synthetic s;
  auto add = [&](std::string p, TokenType t, float score) {
    s.pieces.push_back(std::move(p));
    s.types.push_back(int32_t(t));
    s.scores.push_back(score);
  };
  add("<unk>", TokenType::Unknown, 0);
  add("<s>", TokenType::Control, 0);
  add("</s>", TokenType::Control, 0);
  for (int b = 0; b < 256; ++b) add(tok::byte_piece(uint8_t(b)), TokenType::Byte, 0);
  std::string base = tok::kMetaspace;
  for (char c = 'a'; c <= 'z'; ++c) base += c;
  for (char c = 'A'; c <= 'Z'; ++c) base += c;
  for (char c = '0'; c <= '9'; ++c) base += c;
  base += ".,!?'\"-:;()";
  std::unordered_set<std::string> have;
  for (const auto& ch : utf8_chars(base)) {
    add(ch, TokenType::Normal, 0);
    have.insert(ch);
  }

  // Every prefix (2+ characters) of every word is a piece made from the prefix one shorter.
  struct Cand {
    std::string piece, left, right;
    size_t nchars, order;
  };
  std::vector<Cand> cands;
  auto chain = [&](const std::string& w) {
    auto ch = utf8_chars(w);
    std::string prefix = ch[0];
    for (size_t k = 1; k < ch.size(); ++k) {
      std::string next = prefix + ch[k];
      if (have.insert(next).second) cands.push_back({next, prefix, ch[k], k + 1, cands.size()});
      prefix = next;
    }
  };
  for (const char* w : kWords) chain(tok::kMetaspace + w);
  for (const char* w : kCapitalised) chain(tok::kMetaspace + w);
  for (const char* w : kEndings) chain(w);
  std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.nchars < b.nchars; });
  for (const Cand& c : cands) {
    if (int(s.pieces.size()) >= vocab_size) break;
    // Score = minus rank: the merge order of the json form and the score order of the GGUF form agree.
    add(c.piece, TokenType::Normal, -float(s.merges.size() + 1));
    s.merges.emplace_back(c.left, c.right);
  }
  for (int n = 0; int(s.pieces.size()) < vocab_size; ++n)
    add(fmt::format("<extra_{}>", n), TokenType::Unused, -1e9f);
  return s;
}

}  // namespace

VocabSpec make_synthetic_vocab(int vocab_size) {
  Synthetic s = build(vocab_size);
  VocabSpec v;
  v.model = "llama";
  v.pre = "default";
  v.tokens = std::move(s.pieces);
  v.token_types = std::move(s.types);
  v.scores = std::move(s.scores);
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

std::string make_synthetic_tokenizer_json(int vocab_size) {
  // Plain json (sorted keys): ordered_json inserts in linear time, far too slow for 32000 entries.
  using json = nlohmann::json;
  Synthetic s = build(vocab_size);
  json vocab = json::object();
  for (size_t i = 0; i < s.pieces.size(); ++i) vocab[s.pieces[i]] = int(i);
  json merges = json::array();
  for (const auto& [l, r] : s.merges) merges.push_back(json::array({l, r}));
  json added = json::array();
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", i}, {"content", s.pieces[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  auto str_pat = [](const std::string& p) { return json{{"String", p}}; };
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({json{{"type", "Prepend"}, {"prepend", tok::kMetaspace}},
                                                  json{{"type", "Replace"}, {"pattern", str_pat(" ")},
                                                       {"content", tok::kMetaspace}}})}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"pair", json::array({json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                            json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                            json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}},
                            json{{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", json::array({1})}, {"tokens", json::array({"<s>"})}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({json{{"type", "Replace"}, {"pattern", str_pat(tok::kMetaspace)},
                                                 {"content", " "}},
                                            json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}},
                                            json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  j["model"] = {{"type", "BPE"},          {"dropout", nullptr},       {"unk_token", "<unk>"},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},       {"byte_fallback", true},    {"ignore_merges", false},
                {"vocab", vocab},         {"merges", merges}};
  return j.dump(1);
}

}  // namespace kvp
