// llama2.c tokenizer.bin, encoded exactly as run.c does (including its quirks: no normalisation,
// per-code-point lookup over the whole vocabulary, greedy highest-score merges).
#include <cstring>
#include <queue>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer_impl.h"

namespace kvp::tok {

namespace {
// Far above any real vocabulary (Llama-3 is 128K); rejects garbage before it drives allocation.
constexpr size_t kMaxVocab = 1u << 22;
constexpr int32_t kMaxPieceLen = 1 << 16;
}  // namespace

std::unique_ptr<Llama2cTokenizer> Llama2cTokenizer::load(const std::string& path) {
  auto mf = MappedFile::open(path);
  return from_bytes(mf->data(), mf->size(), path);
}

std::unique_ptr<Llama2cTokenizer> Llama2cTokenizer::from_bytes(const uint8_t* data, size_t size,
                                                               const std::string& path) {
  if (size >= 4 && std::memcmp(data, "GGUF", 4) == 0)
    fail("{}: this is a GGUF file, not a tokenizer; its vocabulary is read with the model", path);
  if (size < 4) fail("{}: too short for a llama2.c tokenizer.bin ({} bytes, need at least 4)", path, size);
  auto t = std::unique_ptr<Llama2cTokenizer>(new Llama2cTokenizer());
  int32_t max_len;
  std::memcpy(&max_len, data, 4);
  if (max_len <= 0 || max_len > kMaxPieceLen)
    fail("{}: not a llama2.c tokenizer.bin: max_token_length {} is out of range (1..{})", path, max_len,
         kMaxPieceLen);
  t->max_token_length_ = max_len;
  size_t off = 4;
  while (off < size) {
    size_t idx = t->pieces_.size();
    if (idx >= kMaxVocab) fail("{}: more than {} vocabulary entries; not a tokenizer.bin?", path, kMaxVocab);
    if (size - off < 8)
      fail("{}: truncated at byte {}: entry {} needs an 8-byte header (score, length) but only {} bytes remain",
           path, off, idx, size - off);
    float score;
    int32_t len;
    std::memcpy(&score, data + off, 4);
    std::memcpy(&len, data + off + 4, 4);
    if (len < 0 || len > max_len)
      fail("{}: entry {} at byte {} has piece length {}, outside 0..max_token_length ({})", path, idx, off, len,
           max_len);
    if (size_t(len) > size - off - 8)
      fail("{}: truncated: entry {} at byte {} declares a {}-byte piece but only {} bytes remain", path, idx, off,
           len, size - off - 8);
    t->pieces_.emplace_back(reinterpret_cast<const char*>(data + off + 8), size_t(len));
    t->scores_.push_back(score);
    off += 8 + size_t(len);
  }
  if (t->pieces_.size() < 3) fail("{}: only {} vocabulary entries; expected <unk>, <s>, </s> and more", path,
                                  t->pieces_.size());
  t->byte_of_.assign(t->pieces_.size(), -1);
  t->ids_.reserve(t->pieces_.size() * 2);
  for (size_t i = 0; i < t->pieces_.size(); ++i) {
    t->ids_.emplace(t->pieces_[i], int(i));  // duplicates: the first id wins
    t->byte_of_[i] = int16_t(parse_byte_piece(t->pieces_[i]));
  }
  return t;
}

std::vector<int> Llama2cTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> out;
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  if (text.empty()) return out;

  // Symbols over the buffer " " + text (run.c's dummy prefix). A symbol's piece is its text,
  // except for byte-fallback symbols whose piece is "<0xXX>".
  std::string buf = " " + std::string(text);
  struct Sym {
    uint32_t start, len;
    int id;
    int prev, next;
  };
  std::vector<Sym> sy;
  sy.reserve(buf.size());
  auto push = [&](uint32_t s, uint32_t l, int id) {
    int i = int(sy.size());
    sy.push_back({s, l, id, i - 1, i + 1});
  };
  int space_id = find_piece(ids_, " ");
  size_t i = 0;
  if (space_id >= 0) push(0, 1, space_id);
  i = 1;
  while (i < buf.size()) {
    size_t n = utf8_loose_len(buf, i);
    int id = find_piece(ids_, std::string_view(buf).substr(i, n));
    if (id >= 0) {
      push(uint32_t(i), uint32_t(n), id);
    } else {
      for (size_t k = 0; k < n; ++k) push(uint32_t(i + k), 1, uint8_t(buf[i + k]) + 3);
    }
    i += n;
  }
  if (sy.empty()) return out;
  sy.back().next = -1;
  for (auto& s : sy)
    if (s.id >= int(pieces_.size())) s.id = 0;  // tiny vocabularies without byte tokens

  // run.c concatenates the vocabulary pieces of the two symbols. For symbols whose piece is
  // exactly their span of buf (everything but byte fallbacks) that is a substring, so no copy.
  std::vector<uint8_t> exact(sy.size());
  for (size_t k = 0; k < sy.size(); ++k) exact[k] = std::string_view(pieces_[sy[k].id]) ==
                                                  std::string_view(buf).substr(sy[k].start, sy[k].len);
  std::string scratch;
  auto lookup_pair = [&](int a) -> int {
    const Sym& L = sy[a];
    const Sym& R = sy[L.next];
    if (exact[a] && exact[L.next]) return find_piece(ids_, std::string_view(buf).substr(L.start, L.len + R.len));
    scratch.assign(pieces_[L.id]);
    scratch.append(pieces_[R.id]);
    return find_piece(ids_, scratch);
  };

  // Max-heap on score; ties go to the leftmost pair, as run.c's strict '>' scan does.
  struct Cand {
    float score;
    int left;
    uint32_t llen, rlen;
    int result;
  };
  auto cmp = [](const Cand& a, const Cand& b) {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  };
  std::priority_queue<Cand, std::vector<Cand>, decltype(cmp)> pq(cmp);
  // Positions are original symbol indices; a merged symbol keeps its left index, so index order
  // is text order.
  auto consider = [&](int a) {
    if (a < 0 || sy[a].next < 0) return;
    int r = lookup_pair(a);
    if (r >= 0 && scores_[r] > -1e10f) pq.push({scores_[r], a, sy[a].len, sy[sy[a].next].len, r});
  };
  for (int a = 0; a < int(sy.size()); ++a) consider(a);
  while (!pq.empty()) {
    Cand c = pq.top();
    pq.pop();
    Sym& L = sy[c.left];
    if (L.len == 0 || L.next < 0 || L.len != c.llen) continue;  // stale
    Sym& R = sy[L.next];
    if (R.len != c.rlen) continue;
    // Byte symbols sharing a start offset can't be told apart by length alone; recheck the result.
    if (lookup_pair(c.left) != c.result) continue;
    exact[c.left] = exact[c.left] && exact[L.next];
    L.len += R.len;
    L.id = c.result;
    int rn = R.next;
    R.len = 0;
    L.next = rn;
    if (rn >= 0) sy[rn].prev = c.left;
    consider(L.prev);
    consider(c.left);
  }
  for (int a = 0; a >= 0; a = sy[a].next) out.push_back(sy[a].id);
  return out;
}

std::string Llama2cTokenizer::token_bytes(int prev, int id) const {
  if (id < 0 || id >= int(pieces_.size())) fail("token id {} is outside the vocabulary (size {})", id, pieces_.size());
  if (id == bos_ || id == eos_) return {};
  if (byte_of_[id] >= 0) return std::string(1, char(byte_of_[id]));
  const std::string& p = pieces_[id];
  if ((prev < 0 || prev == bos_) && !p.empty() && p[0] == ' ') return p.substr(1);
  return p;
}

std::string Llama2cTokenizer::piece(int id) const {
  if (id < 0 || id >= int(pieces_.size())) fail("token id {} is outside the vocabulary (size {})", id, pieces_.size());
  return pieces_[id];
}

void Llama2cTokenizer::set_special_ids(int bos, int eos) {
  if (bos >= int(pieces_.size()) || eos >= int(pieces_.size()) || bos < -1 || eos < -1)
    fail("BOS/EOS override ({}, {}) is outside the vocabulary (size {})", bos, eos, pieces_.size());
  bos_ = bos;
  eos_ = eos;
}

VocabSpec Llama2cTokenizer::to_vocab_spec() const {
  VocabSpec v;
  v.model = "llama";
  v.pre = "default";
  v.tokens.reserve(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const std::string& p = pieces_[i];
    int32_t type = int32_t(TokenType::Normal);
    std::string sp;
    if (int(i) == 0 && p == "<unk>") {
      type = int32_t(TokenType::Unknown);
      sp = p;
    } else if (int(i) == bos_ || int(i) == eos_) {
      type = int32_t(TokenType::Control);
      // llama2.c wraps the control pieces in newlines; SentencePiece names them plainly.
      sp = p;
      if (sp.size() >= 2 && sp.front() == '\n' && sp.back() == '\n') sp = sp.substr(1, sp.size() - 2);
    } else if (byte_of_[i] >= 0) {
      type = int32_t(TokenType::Byte);
      sp = p;
    } else {
      for (char c : p) {
        if (c == ' ') sp += kMetaspace;
        else sp += c;
      }
    }
    v.tokens.push_back(std::move(sp));
    v.token_types.push_back(type);
  }
  v.scores = scores_;
  v.bos_id = bos_;
  v.eos_id = eos_;
  v.unk_id = pieces_[0] == "<unk>" ? 0 : -1;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

}  // namespace kvp::tok
