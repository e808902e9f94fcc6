// Generic BPE used for tokenizer.json and GGUF vocabularies. Two merge disciplines:
//  - by rank (HF merges list / GGUF "gpt2"): lowest-rank adjacent pair first, leftmost on ties;
//  - by score (SentencePiece / GGUF "llama"): the adjacent pair whose concatenation is a token with
//    the highest score first, leftmost on ties.
// Both use a linked list of symbols plus a lazily invalidated heap: O(n log n) per word.
#include <algorithm>
#include <iterator>
#include <queue>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp::tok {

namespace {

uint64_t pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

// The GGUF pre names llama.cpp splits with GPT-2's regex alone; "gpt2" is none of llama.cpp's, but
// kvparity has always read it so, and a file naming it may exist.
bool is_gpt2_split_name(const std::string& pre) {
  static const char* const names[] = {"gpt-2", "gpt2", "phi-2", "jina-es", "jina-de",
                                      "jina-v2-es", "jina-v2-de", "jina-v2-code", "exaone4", "gigachat",
                                      "roberta-bpe", "olmo", "mpt", "jais", "trillion", "granite-docling"};
  return std::find(std::begin(names), std::end(names), pre) != std::end(names);
}

// Length of one character at s[i] for splitting purposes: a valid UTF-8 sequence, or one byte.
size_t char_len(std::string_view s, size_t i) {
  int n = utf8_valid_len(s, i);
  return n > 0 ? size_t(n) : 1;
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeConfig cfg) : cfg_(std::move(cfg)) {
  const std::string& o = cfg_.origin;
  const int n = int(cfg_.pieces.size());
  if (n == 0) fail("{}: the vocabulary is empty", o);
  if (cfg_.types.empty()) cfg_.types.assign(size_t(n), int32_t(TokenType::Normal));
  if (int(cfg_.types.size()) != n) fail("{}: {} token types for {} tokens", o, cfg_.types.size(), n);
  if (cfg_.merge_by_score && int(cfg_.scores.size()) != n)
    fail("{}: {} scores for {} tokens; score-ordered BPE needs one per token", o, cfg_.scores.size(), n);
  for (int* id : {&cfg_.unk_id, &cfg_.bos_id, &cfg_.eos_id})
    if (*id < -1 || *id >= n) fail("{}: special token id {} is outside the vocabulary (size {})", o, *id, n);

  ids_.reserve(size_t(n) * 2);
  for (int i = 0; i < n; ++i)
    if (!cfg_.pieces[i].empty()) ids_.emplace(cfg_.pieces[i], i);

  merge_rank_.reserve(cfg_.merges.size() * 2);
  std::string cat;
  for (size_t r = 0; r < cfg_.merges.size(); ++r) {
    auto [a, b] = cfg_.merges[r];
    if (a < 0 || a >= n || b < 0 || b >= n) fail("{}: merge #{} refers to token ids outside the vocabulary", o, r);
    cat = cfg_.pieces[a] + cfg_.pieces[b];
    int res = find_piece(ids_, cat);
    if (res < 0)
      fail("{}: merge #{} (\"{}\" + \"{}\") produces \"{}\", which is not in the vocabulary", o, r, cfg_.pieces[a],
           cfg_.pieces[b], cat);
    merge_rank_.emplace(pair_key(a, b), std::make_pair(int(r), res));  // a repeated pair keeps its first rank
  }

  for (int b = 0; b < 256; ++b) {
    int id = find_piece(ids_, byte_piece(uint8_t(b)));
    byte_ids_[b] = id;
  }
  for (const auto& p : cfg_.split_patterns) splits_.push_back(std::make_unique<Regex>(p, o));

  added_by_byte_.assign(256, {});
  std::vector<int> order(cfg_.added.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return cfg_.added[x].content.size() > cfg_.added[y].content.size();
  });
  for (int i : order) {
    const AddedToken& t = cfg_.added[i];
    if (t.id < 0 || t.id >= n) fail("{}: added token \"{}\" has id {} outside the vocabulary (size {})", o, t.content, t.id, n);
    if (t.content.empty()) continue;
    added_by_byte_[uint8_t(t.content[0])].push_back(i);
  }
}

bool BpeTokenizer::mergeable(int id) const {
  auto t = TokenType(cfg_.types[id]);
  return t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused;
}

std::vector<int> BpeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> out;
  out.reserve(text.size() / 3 + 4);
  if (add_bos && cfg_.bos_id >= 0) out.push_back(cfg_.bos_id);
  size_t seg = 0, pos = 0;
  while (pos < text.size()) {
    const AddedToken* hit = nullptr;
    for (int i : added_by_byte_[uint8_t(text[pos])]) {
      const std::string& c = cfg_.added[i].content;
      if (text.compare(pos, c.size(), c) == 0) {
        hit = &cfg_.added[i];
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (pos > seg) encode_text(text.substr(seg, pos - seg), seg == 0, out);
    out.push_back(hit->id);
    pos += hit->content.size();
    seg = pos;
  }
  if (seg < text.size()) encode_text(text.substr(seg), seg == 0, out);
  return out;
}

void BpeTokenizer::encode_text(std::string_view text, bool at_start, std::vector<int>& out) const {
  std::string t(text);
  for (const auto& [from, to] : cfg_.replacements) replace_all(t, from, to);
  if (!t.empty() && cfg_.prepend != Prepend::Never && (cfg_.prepend == Prepend::Always || at_start) &&
      !(cfg_.prepend_unless_present && t.compare(0, cfg_.prepend_str.size(), cfg_.prepend_str) == 0))
    t = cfg_.prepend_str + t;
  if (cfg_.byte_level && cfg_.byte_level_prefix_space && !t.empty() && t[0] != ' ') t = " " + t;

  // Pre-tokenisation as [begin, end) ranges of t; each split step refines every current range.
  std::vector<std::pair<size_t, size_t>> words{{0, t.size()}};
  if (t.empty()) return;
  if (cfg_.metaspace_split) {
    std::vector<std::pair<size_t, size_t>> next;
    size_t b = 0;
    for (size_t p = t.find(kMetaspace, 1); p != std::string::npos; p = t.find(kMetaspace, p + 1)) {
      next.emplace_back(b, p);
      b = p;
    }
    next.emplace_back(b, t.size());
    words = std::move(next);
  }
  for (const auto& re : splits_) {
    std::vector<std::pair<size_t, size_t>> next;
    for (auto [wb, we] : words) {
      std::string_view w(t.data() + wb, we - wb);
      size_t cur = 0;
      // "Isolated": matches become pieces, and so does any text between them.
      for (auto [mb, me] : re->find_all(w)) {
        if (mb > cur) next.emplace_back(wb + cur, wb + mb);
        next.emplace_back(wb + mb, wb + me);
        cur = me;
      }
      if (cur < w.size()) next.emplace_back(wb + cur, we);
    }
    words = std::move(next);
  }

  std::string mapped;
  const auto& b2u = byte_to_unicode();
  for (auto [wb, we] : words) {
    std::string_view w(t.data() + wb, we - wb);
    if (w.empty()) continue;
    if (cfg_.byte_level) {
      mapped.clear();
      for (char c : w) append_utf8(mapped, b2u[uint8_t(c)]);
      encode_word(mapped, out);
    } else {
      encode_word(w, out);
    }
  }
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int>& out) const {
  if (cfg_.ignore_merges) {
    int id = find_piece(ids_, word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (cfg_.merge_by_score) encode_word_by_score(word, out);
  else encode_word_by_rank(word, out);
}

void BpeTokenizer::emit_unknown_char(std::string_view ch, std::vector<int>& out) const {
  if (cfg_.byte_fallback) {
    bool all = true;
    for (char c : ch) all = all && byte_ids_[uint8_t(c)] >= 0;
    if (all) {
      for (char c : ch) out.push_back(byte_ids_[uint8_t(c)]);
      return;
    }
  }
  if (cfg_.unk_id < 0) return;  // no <unk> and no byte tokens: the character cannot be represented
  if (cfg_.fuse_unk && !out.empty() && out.back() == cfg_.unk_id) return;
  out.push_back(cfg_.unk_id);
}

namespace {
struct Sym {
  int id;
  int prev, next;
  uint32_t start, len;
};
}  // namespace

void BpeTokenizer::encode_word_by_rank(std::string_view word, std::vector<int>& out) const {
  std::vector<Sym> sy;
  sy.reserve(word.size());
  std::vector<int> tmp;
  for (size_t i = 0; i < word.size();) {
    size_t n = char_len(word, i);
    int id = find_piece(ids_, word.substr(i, n));
    if (id >= 0) {
      sy.push_back({id, 0, 0, uint32_t(i), uint32_t(n)});
    } else {
      tmp.clear();
      emit_unknown_char(word.substr(i, n), tmp);
      for (int t : tmp) {
        if (cfg_.fuse_unk && t == cfg_.unk_id && !sy.empty() && sy.back().id == t) continue;
        sy.push_back({t, 0, 0, uint32_t(i), uint32_t(n)});
      }
    }
    i += n;
  }
  const int m = int(sy.size());
  if (m == 0) return;
  for (int i = 0; i < m; ++i) {
    sy[i].prev = i - 1;
    sy[i].next = i + 1 < m ? i + 1 : -1;
  }
  if (m > 1 && !merge_rank_.empty()) {
    struct Cand {
      int rank, left, lid, rid, result;
    };
    auto cmp = [](const Cand& a, const Cand& b) { return a.rank != b.rank ? a.rank > b.rank : a.left > b.left; };
    std::priority_queue<Cand, std::vector<Cand>, decltype(cmp)> pq(cmp);
    auto consider = [&](int a) {
      if (a < 0 || sy[a].next < 0) return;
      auto it = merge_rank_.find(pair_key(sy[a].id, sy[sy[a].next].id));
      if (it != merge_rank_.end()) pq.push({it->second.first, a, sy[a].id, sy[sy[a].next].id, it->second.second});
    };
    for (int a = 0; a + 1 < m; ++a) consider(a);
    while (!pq.empty()) {
      Cand c = pq.top();
      pq.pop();
      Sym& L = sy[c.left];
      if (L.id != c.lid || L.next < 0 || sy[L.next].id != c.rid) continue;  // stale
      Sym& R = sy[L.next];
      L.id = c.result;
      L.len += R.len;
      L.next = R.next;
      if (R.next >= 0) sy[R.next].prev = c.left;
      R.id = -1;
      consider(L.prev);
      consider(c.left);
    }
  }
  for (int a = 0; a >= 0; a = sy[a].next) out.push_back(sy[a].id);
}

void BpeTokenizer::encode_word_by_score(std::string_view word, std::vector<int>& out) const {
  // Symbols are spans of `word`; an adjacent pair's concatenation is simply the joined span.
  std::vector<Sym> sy;
  sy.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t n = char_len(word, i);
    int id = find_piece(ids_, word.substr(i, n));
    if (id >= 0 && !mergeable(id)) id = -1;
    sy.push_back({id, 0, 0, uint32_t(i), uint32_t(n)});
    i += n;
  }
  const int m = int(sy.size());
  for (int i = 0; i < m; ++i) {
    sy[i].prev = i - 1;
    sy[i].next = i + 1 < m ? i + 1 : -1;
  }
  struct Cand {
    float score;
    int left;
    uint32_t llen, rlen;
    int result;
  };
  auto cmp = [](const Cand& a, const Cand& b) { return a.score != b.score ? a.score < b.score : a.left > b.left; };
  std::priority_queue<Cand, std::vector<Cand>, decltype(cmp)> pq(cmp);
  auto consider = [&](int a) {
    if (a < 0 || sy[a].next < 0) return;
    const Sym& L = sy[a];
    const Sym& R = sy[L.next];
    if (L.id < 0 || R.id < 0) return;  // unknown characters never merge
    int r = find_piece(ids_, word.substr(L.start, L.len + R.len));
    if (r >= 0 && mergeable(r)) pq.push({cfg_.scores[r], a, L.len, R.len, r});
  };
  for (int a = 0; a + 1 < m; ++a) consider(a);
  while (!pq.empty()) {
    Cand c = pq.top();
    pq.pop();
    Sym& L = sy[c.left];
    // Spans only grow, so unchanged lengths on both sides mean the same pair.
    if (L.len != c.llen || L.next < 0 || sy[L.next].len != c.rlen) continue;
    Sym& R = sy[L.next];
    L.id = c.result;
    L.len += R.len;
    L.next = R.next;
    if (R.next >= 0) sy[R.next].prev = c.left;
    R.len = 0;
    consider(L.prev);
    consider(c.left);
  }
  for (int a = 0; a >= 0 && a < m; a = sy[a].next) {
    if (sy[a].id >= 0) out.push_back(sy[a].id);
    else emit_unknown_char(word.substr(sy[a].start, sy[a].len), out);
  }
}

bool BpeTokenizer::is_control(int id) const {
  if (id < 0 || id >= int(cfg_.pieces.size())) return false;
  return id == cfg_.bos_id || id == cfg_.eos_id || TokenType(cfg_.types[id]) == TokenType::Control;
}

std::string BpeTokenizer::token_bytes(int prev, int id) const {
  const int n = int(cfg_.pieces.size());
  if (id < 0 || id >= n) fail("token id {} is outside the vocabulary (size {})", id, n);
  if (is_control(id)) return {};
  const std::string& p = cfg_.pieces[id];
  auto type = TokenType(cfg_.types[id]);
  if (type == TokenType::Byte || cfg_.decode_byte_fallback) {
    int b = parse_byte_piece(p);
    if (b >= 0) return std::string(1, char(b));
  }
  if (type == TokenType::UserDefined) return p;  // added tokens are stored as plain text
  std::string s;
  if (cfg_.decode_byte_level) {
    for (size_t i = 0; i < p.size();) {
      int len = utf8_valid_len(p, i);
      if (len <= 0) {
        s += p[i++];
        continue;
      }
      uint32_t cp = uint8_t(p[i]);
      if (len > 1) {
        cp &= 0x7Fu >> len;
        for (int k = 1; k < len; ++k) cp = (cp << 6) | (uint8_t(p[i + k]) & 0x3F);
      }
      int b = unicode_to_byte(cp);
      if (b >= 0) s += char(b);
      else s.append(p, i, size_t(len));
      i += size_t(len);
    }
  } else {
    s = p;
  }
  if (cfg_.decode_metaspace) replace_all(s, kMetaspace, " ");
  if (cfg_.strip_first_space && (prev < 0 || prev == cfg_.bos_id) && !s.empty() && s[0] == ' ') s.erase(0, 1);
  return s;
}

std::string BpeTokenizer::piece(int id) const {
  const int n = int(cfg_.pieces.size());
  if (id < 0 || id >= n) fail("token id {} is outside the vocabulary (size {})", id, n);
  return cfg_.pieces[id];
}

void BpeTokenizer::set_special_ids(int bos, int eos) {
  const int n = int(cfg_.pieces.size());
  if (bos < -1 || bos >= n || eos < -1 || eos >= n)
    fail("BOS/EOS override ({}, {}) is outside the vocabulary (size {})", bos, eos, n);
  cfg_.bos_id = bos;
  cfg_.eos_id = eos;
}

VocabSpec BpeTokenizer::to_vocab_spec() const {
  VocabSpec v;
  v.tokens = cfg_.pieces;
  v.token_types = cfg_.types;
  v.bos_id = cfg_.bos_id;
  v.eos_id = cfg_.eos_id;
  v.unk_id = cfg_.unk_id;
  v.add_bos = cfg_.add_bos;
  v.add_space_prefix = cfg_.prepend != Prepend::Never;
  for (auto [a, b] : cfg_.merges) v.merges.push_back(cfg_.pieces[a] + " " + cfg_.pieces[b]);
  if (cfg_.byte_level) {
    if (cfg_.pre.empty())
      fail("{}: this byte-level pre-tokenizer has no GGUF 'pre' name; cannot convert", cfg_.origin);
    v.model = "gpt2";
    v.pre = cfg_.pre;
    v.add_space_prefix = false;
    return v;
  }
  v.model = "llama";
  v.pre = "default";
  if (cfg_.prepend == Prepend::First || cfg_.prepend_unless_present)
    v.not_carried =
        "\"▁\" prefix rule (Metaspace prepend_scheme \"first\": none before text that follows a special token "
        "or already starts with a space); a GGUF \"llama\" vocabulary is read, by llama.cpp and kvparity alike, "
        "with the prefix before every stretch of text, so prompts spelling special tokens may tokenise differently";
  if (cfg_.merge_by_score) {
    v.scores = cfg_.scores;
  } else {
    // GGUF "llama" orders merges by score: give each token made by a merge the negated rank of the
    // first merge that makes it (SentencePiece-trained vocabularies are ordered that way).
    v.scores.assign(cfg_.pieces.size(), 0.0f);
    std::vector<uint8_t> seen(cfg_.pieces.size(), 0);
    for (size_t r = 0; r < cfg_.merges.size(); ++r) {
      auto [a, b] = cfg_.merges[r];
      int res = find_piece(ids_, cfg_.pieces[a] + cfg_.pieces[b]);
      if (res >= 0 && !seen[res]) {
        seen[res] = 1;
        v.scores[res] = -float(r) - 1.0f;
      }
    }
  }
  return v;
}

}  // namespace kvp::tok

namespace kvp {

std::unique_ptr<Tokenizer> tokenizer_from_vocab(const VocabSpec& spec, const std::string& origin) {
  using namespace tok;
  const size_t n = spec.tokens.size();
  if (n == 0) fail("{}: tokenizer.ggml.tokens is empty", origin);
  if (n > (1u << 22)) fail("{}: {} tokens is beyond any supported vocabulary", origin, n);
  if (!spec.token_types.empty() && spec.token_types.size() != n)
    fail("{}: {} token types for {} tokens", origin, spec.token_types.size(), n);
  if (!spec.scores.empty() && spec.scores.size() != n)
    fail("{}: {} scores for {} tokens", origin, spec.scores.size(), n);
  BpeConfig c;
  c.origin = origin;
  c.pieces = spec.tokens;
  c.types = spec.token_types.empty() ? std::vector<int32_t>(n, int32_t(TokenType::Normal)) : spec.token_types;
  for (int32_t t : c.types)
    if (t < 1 || t > 6) fail("{}: token type {} is not one of 1..6", origin, t);
  c.bos_id = spec.bos_id;
  c.eos_id = spec.eos_id;
  c.unk_id = spec.unk_id;
  c.add_bos = spec.add_bos;
  c.pre = spec.pre;
  for (size_t i = 0; i < n; ++i) {
    auto t = TokenType(c.types[i]);
    if ((t == TokenType::Control || t == TokenType::UserDefined) && !c.pieces[i].empty())
      c.added.push_back({c.pieces[i], int(i), t == TokenType::Control});
  }
  if (spec.model == "llama") {
    if (spec.scores.empty()) fail("{}: model \"llama\" needs tokenizer.ggml.scores (merge priorities)", origin);
    c.model_name = "llama";
    c.scores = spec.scores;
    c.merge_by_score = true;
    c.byte_fallback = true;
    c.replacements = {{" ", kMetaspace}};
    c.prepend_str = kMetaspace;
    // llama.cpp prefixes every stretch of text that follows a special token, as SentencePiece-based
    // HF tokenizers (legacy Llama/Mistral) do: "<s>[INST]" reads "<s>" "▁[" ...
    c.prepend = spec.add_space_prefix ? Prepend::Always : Prepend::Never;
    c.decode_metaspace = true;
    c.decode_byte_fallback = true;
    c.strip_first_space = spec.add_space_prefix;
  } else if (spec.model == "gpt2") {
    c.model_name = "gpt2";
    c.byte_level = true;
    c.decode_byte_level = true;
    const std::string& pre = spec.pre;
    if (pre.empty() || pre == "default") {  // llama.cpp's DEFAULT, not GPT-2's regex
      c.split_patterns = default_split_patterns();
      c.pre = "default";  // absent reads as llama.cpp reads it, so a conversion can name it
    } else if (is_gpt2_split_name(pre)) {
      c.split_patterns = {kGpt2Pattern};
    } else if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "megrez") {  // llama.cpp's QWEN2 names
      c.split_patterns = {kQwen2Pattern};
    } else if (pre == "smaug-bpe" || pre == "dbrx") {  // Llama-3's split, its merges applied
      c.split_patterns = {kLlama3Pattern};
    } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "falcon3") {
      c.split_patterns = {kLlama3Pattern};
      // A piece that is a token is that token, merges or not (llama.cpp's ignore_merges for these
      // names; Llama-3's tokenizer.json says "ignore_merges": true).
      c.ignore_merges = true;
    } else if (pre == "gpt-4o" || pre == "llama4") {  // llama.cpp's names for o200k's split
      c.split_patterns = {kO200kPattern};
    } else if (pre == "tekken") {
      c.split_patterns = {kTekkenPattern};
      c.ignore_merges = true;  // as llama.cpp's TEKKEN and Mistral's tokenizer.json
    } else if (pre == "smollm") {
      c.split_patterns = {R"(\p{N})", kGpt2Pattern};
    } else {
      fail(
          "{}: pre-tokenizer \"{}\" is not supported (known: default, gpt-2, gpt2, phi-2, jina-es, jina-de, "
          "jina-v2-es, jina-v2-de, jina-v2-code, exaone4, gigachat, roberta-bpe, olmo, mpt, jais, trillion, "
          "granite-docling, qwen2, deepseek-r1-qwen, megrez, llama-bpe, llama3, llama-v3, falcon3, smaug-bpe, dbrx, "
          "gpt-4o, llama4, tekken, smollm)",
          origin, pre);
    }
    PieceMap ids;
    ids.reserve(n * 2);
    for (size_t i = 0; i < n; ++i) ids.emplace(spec.tokens[i], int(i));
    c.merges.reserve(spec.merges.size());
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      const std::string& m = spec.merges[r];
      size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size())
        fail("{}: merge #{} \"{}\" is not of the form \"left right\"", origin, r, m);
      std::string_view l = std::string_view(m).substr(0, sp), rr = std::string_view(m).substr(sp + 1);
      int a = find_piece(ids, l), b = find_piece(ids, rr);
      if (a < 0 || b < 0)
        fail("{}: merge #{} \"{}\" refers to unknown token \"{}\"", origin, r, m, a < 0 ? l : rr);
      c.merges.emplace_back(a, b);
    }
  } else {
    fail("{}: tokenizer model \"{}\" is not supported (known: llama, gpt2)", origin, spec.model);
  }
  return std::make_unique<BpeTokenizer>(std::move(c));
}

}  // namespace kvp
