// Stopping rules (runtime/generator.h): EOS, BOS for llama2.c checkpoints, --ignore-eos, stop
// strings (text cut where the match begins; output_ids keep the tokens wholly before it), batched
// runs stopping exactly where their solo runs do, and stories260K ending a story at BOS the way
// llama2.c's run.c does.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_run.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_writer.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace kvp {
namespace {

// ---- a scripted model: the greedy next token is a fixed function of the current token ----------
//
// Every attention and MLP weight is zero, so the residual stream is the token's embedding; token t
// of the script embeds as the unit vector e_slot(t) and lm_head row next(t) has a 1 at slot(t), so
// the argmax after t is next(t) whatever came before. The tests then choose exactly which tokens a
// run samples, with real tokenizer pieces.
struct Scripted {
  std::shared_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::map<std::string, int> id;  // piece -> id, for the pieces the script uses
};

constexpr int kVocab = 4096;

Scripted scripted(const std::vector<std::pair<std::string, std::string>>& edges, bool bos_ends_generation,
                  int bos_id = 1, int eos_id = 2) {
  Scripted s;
  s.tok = tokenizer_from_json(make_synthetic_tokenizer_json(kVocab), "synthetic");
  for (int i = 0; i < kVocab; ++i) s.id[s.tok->piece(i)] = i;
  ModelConfig c = synthetic_config("llama", "tiny");
  c.vocab_size = kVocab;
  c.bos_id = bos_id;
  c.eos_id = eos_id;
  c.bos_ends_generation = bos_ends_generation;
  Checkpoint ck = synthesize_checkpoint(c, DType::F32);
  std::map<int, int> slot;
  auto buffer = [&](TensorView& t) {
    auto buf = std::make_shared<AlignedBuffer>(t.nbytes());
    float* p = static_cast<float*>(buf->data());
    std::fill_n(p, t.numel(), t.name.find("norm.weight") != std::string::npos ? 1.0f : 0.0f);
    t.data = p;
    ck.keepalive.push_back(buf);
    return p;
  };
  for (auto& [name, t] : ck.tensors) {
    EXPECT_EQ(t.dtype, DType::F32);
    float* p = buffer(t);
    const bool embed = name == "model.embed_tokens.weight", head = name == "lm_head.weight";
    if (!embed && !head) continue;
    for (const auto& [from, to] : edges) {
      const int f = s.id.at(from), n = s.id.at(to);
      const int k = slot.emplace(f, int(slot.size())).first->second;
      EXPECT_LT(k, c.dim);
      if (embed) p[size_t(f) * size_t(c.dim) + size_t(k)] = 1.0f;
      if (head) p[size_t(n) * size_t(c.dim) + size_t(k)] = 1.0f;
    }
  }
  s.model = Model::from_checkpoint(ck, DType::F32);
  return s;
}

// the -> dog -> was -> named -> Lily -> . -> EOS -> big -> red -> ball -> BOS -> sun -> sun ...
// hot -> <0xC3> -> <0xA9> -> ! -> sun (the two bytes are "é")
const std::vector<std::pair<std::string, std::string>> kScript = {
    {"▁the", "▁dog"},  {"▁dog", "▁was"},  {"▁was", "▁named"}, {"▁named", "▁Lily"}, {"▁Lily", "."},
    {".", "</s>"},     {"</s>", "▁big"},  {"▁big", "▁red"},   {"▁red", "▁ball"},   {"▁ball", "<s>"},
    {"<s>", "▁sun"},   {"▁sun", "▁sun"},  {"▁hot", "<0xC3>"}, {"<0xC3>", "<0xA9>"}, {"<0xA9>", "!"},
    {"!", "▁sun"}};

std::vector<int> ids(const Scripted& s, const std::vector<std::string>& pieces) {
  std::vector<int> out;
  for (const auto& p : pieces) out.push_back(s.id.at(p));
  return out;
}

GenerationResult run(const Scripted& s, const std::vector<std::string>& prompt, int max_new, bool stop_at_eos = true,
                     std::vector<std::string> stops = {}, CacheMode cache = CacheMode::On, int* steps = nullptr) {
  Engine e(s.model, EngineOptions{});
  GenerationConfig g;
  g.max_new_tokens = max_new;
  g.cache = cache;
  g.stop_at_eos = stop_at_eos;
  g.stop_strings = std::move(stops);
  int n = 0;
  auto r = e.generate(ids(s, prompt), g, s.tok.get(), [&](const StepInfo&) { ++n; });
  if (steps != nullptr) *steps = n;
  return r;
}

TEST(Stopping, ScriptedModelFollowsItsScript) {
  const Scripted s = scripted(kScript, false);
  const auto r = run(s, {"<s>", "▁the"}, 5, /*stop_at_eos=*/false);
  EXPECT_EQ(r.output_ids, ids(s, {"▁dog", "▁was", "▁named", "▁Lily", "."}));
  EXPECT_EQ(r.text, " dog was named Lily.");
  EXPECT_EQ(r.stop_reason, "max_new_tokens");
}

TEST(Stopping, EosEndsTheRunAndStaysInOutputIds) {
  for (bool llama2c : {false, true}) {
    const Scripted s = scripted(kScript, llama2c);
    for (CacheMode cache : {CacheMode::On, CacheMode::Off}) {
      const auto r = run(s, {"<s>", "▁the"}, 20, true, {}, cache);
      EXPECT_EQ(r.output_ids, ids(s, {"▁dog", "▁was", "▁named", "▁Lily", ".", "</s>"}));
      EXPECT_EQ(r.text, " dog was named Lily.");
      EXPECT_EQ(r.stop_reason, "eos");
      EXPECT_EQ(r.stop_string, "");
    }
  }
}

TEST(Stopping, BosEndsTheRunOnlyForLlama2cModels) {
  const Scripted l2c = scripted(kScript, /*bos_ends_generation=*/true);
  auto r = run(l2c, {"<s>", "▁big"}, 20);
  EXPECT_EQ(r.output_ids, ids(l2c, {"▁red", "▁ball", "<s>"}));
  EXPECT_EQ(r.text, " red ball");
  EXPECT_EQ(r.stop_reason, "bos");
  // An HF/GGUF model that samples its BOS goes on ...
  const Scripted hf = scripted(kScript, false);
  r = run(hf, {"<s>", "▁big"}, 6);
  EXPECT_EQ(r.output_ids, ids(hf, {"▁red", "▁ball", "<s>", "▁sun", "▁sun", "▁sun"}));
  EXPECT_EQ(r.stop_reason, "max_new_tokens");
  // ... unless its BOS is also its EOS; that is reported as "eos" for either kind of model.
  for (bool llama2c : {false, true}) {
    const Scripted same = scripted(kScript, llama2c, /*bos_id=*/1, /*eos_id=*/1);
    r = run(same, {"<s>", "▁big"}, 20);
    EXPECT_EQ(r.output_ids, ids(same, {"▁red", "▁ball", "<s>"}));
    EXPECT_EQ(r.stop_reason, "eos");
  }
}

TEST(Stopping, IgnoreEosRunsPastEosAndBos) {
  const Scripted s = scripted(kScript, true);
  const auto r = run(s, {"<s>", "▁the"}, 14, /*stop_at_eos=*/false);
  EXPECT_EQ(r.output_ids, ids(s, {"▁dog", "▁was", "▁named", "▁Lily", ".", "</s>", "▁big", "▁red", "▁ball", "<s>",
                                  "▁sun", "▁sun", "▁sun", "▁sun"}));
  EXPECT_EQ(r.stop_reason, "max_new_tokens");
  EXPECT_EQ(r.text, " dog was named Lily. big red ballsun sun sun sun");  // no space after BOS (SentencePiece)
}

TEST(Stopping, TurnEndIdsEndTheRunAsEosDoesSoloAndBatched) {
  const Scripted s = scripted(kScript, false);
  const std::vector<std::vector<int>> prompts = {ids(s, {"<s>", "▁the"}), ids(s, {"<s>", "▁big"})};
  for (CacheMode cache : {CacheMode::On, CacheMode::Off}) {
    GenerationConfig g;
    g.max_new_tokens = 9;
    g.cache = cache;
    g.turn_end_ids = {s.id.at("▁named"), s.id.at("▁ball")};
    Engine solo(s.model, EngineOptions{});
    const auto r = solo.generate(prompts[0], g, s.tok.get());
    EXPECT_EQ(r.output_ids, ids(s, {"▁dog", "▁was", "▁named"}));
    EXPECT_EQ(r.stop_reason, "end_of_turn");
    Engine batch(s.model, EngineOptions{});
    const auto rb = batch.generate_batch(prompts, g, s.tok.get());
    ASSERT_EQ(rb.size(), 2u);
    EXPECT_EQ(rb[0].output_ids, r.output_ids);
    EXPECT_EQ(rb[0].stop_reason, "end_of_turn");
    EXPECT_EQ(rb[1].output_ids, ids(s, {"▁red", "▁ball"}));
    EXPECT_EQ(rb[1].stop_reason, "end_of_turn");
    // --ignore-eos runs past them too.
    g.stop_at_eos = false;
    Engine on(s.model, EngineOptions{});
    EXPECT_EQ(on.generate(prompts[0], g, s.tok.get()).stop_reason, "max_new_tokens");
  }
}

TEST(Stopping, EveryEosIdOfTheModelEndsTheRun) {
  Scripted s = scripted(kScript, false);
  s.model->config.more_eos_ids = {s.id.at("▁was")};
  for (CacheMode cache : {CacheMode::On, CacheMode::Off}) {
    const auto r = run(s, {"<s>", "▁the"}, 9, true, {}, cache);
    EXPECT_EQ(r.output_ids, ids(s, {"▁dog", "▁was"}));
    EXPECT_EQ(r.stop_reason, "eos");
  }
  EXPECT_EQ(run(s, {"<s>", "▁the"}, 4, /*stop_at_eos=*/false).stop_reason, "max_new_tokens");
}

// config.json's eos_token_id list, generation_config.json's ids and a GGUF's EOT/EOM tokens all end
// a generation, as transformers' generate and llama.cpp end one.
TEST(Stopping, EosListsOfConfigGenerationConfigAndGgufAreRead) {
  test::TempDir t;
  const std::string dir = t.file("m");
  ASSERT_EQ(test::kvparity("synth --out " + test::q(dir)).status, 0);
  auto edit_json = [](const std::string& path, const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = nlohmann::json::object();
    if (std::ifstream in(path); in) j = nlohmann::json::parse(in);
    f(j);
    std::ofstream(path) << j.dump();
  };
  edit_json(dir + "/config.json", [](nlohmann::json& j) { j["eos_token_id"] = {2, 300, 2}; });
  EXPECT_EQ(open_checkpoint(dir).config.eos_id, 2);
  EXPECT_EQ(open_checkpoint(dir).config.more_eos_ids, std::vector<int>{300});
  edit_json(dir + "/generation_config.json", [](nlohmann::json& j) { j["eos_token_id"] = {301, 2}; });
  EXPECT_EQ(open_checkpoint(dir).config.more_eos_ids, (std::vector<int>{300, 301}));
  // Written back as the list transformers reads.
  ASSERT_EQ(test::kvparity("convert --model " + test::q(dir) + " --to hf --out " + test::q(t.file("back"))).status, 0);
  std::ifstream back(t.file("back/config.json"));
  EXPECT_EQ(nlohmann::json::parse(back)["eos_token_id"], nlohmann::json({2, 300, 301}));
  ASSERT_EQ(test::kvparity("convert --model " + test::q(dir) + " --to gguf --out " + test::q(t.file("c.gguf"))).status,
            0);
  EXPECT_EQ(open_checkpoint(t.file("c.gguf")).config.more_eos_ids, (std::vector<int>{300, 301}));
  const auto inspected = test::kvparity("inspect --model " + test::q(dir));
  EXPECT_NE(inspected.out.find("EOS 2 (and 300, 301: generation ends at each)"), std::string::npos) << inspected.out;
  // Out of the vocabulary, or not JSON: named.
  edit_json(dir + "/generation_config.json", [](nlohmann::json& j) { j["eos_token_id"] = 9999; });
  try {
    open_checkpoint(dir);
    ADD_FAILURE() << "an eos id past the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("9999"), std::string::npos) << e.what();
  }
  std::ofstream(dir + "/generation_config.json") << "{";
  try {
    open_checkpoint(dir);
    ADD_FAILURE() << "a broken generation_config.json was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: not a JSON object"), std::string::npos) << e.what();
  }
  // A GGUF's end-of-generation tokens.
  const ModelConfig cfg = synthetic_config("llama", "tiny");
  const Checkpoint syn = synthesize_checkpoint(cfg, DType::F32);
  std::vector<TensorView> tensors;
  for (const auto& [name, view] : syn.tensors) tensors.push_back(view);
  GgufWriteOptions o;
  o.extra_kv = {{"tokenizer.ggml.eot_token_id", GgufValue::of_u32(7)},
                {"tokenizer.ggml.eom_token_id", GgufValue::of_u32(0xFFFFFFFFu)}};
  write_gguf(t.file("m.gguf"), cfg, tensors, nullptr, o);
  EXPECT_EQ(open_checkpoint(t.file("m.gguf")).config.more_eos_ids, std::vector<int>{7});
}

TEST(Stopping, StopStringCutsTextAtItsStartAndDropsTokensThatReachIt) {
  const Scripted s = scripted(kScript, true);
  struct Case {
    std::vector<std::string> stops;
    std::string text, matched;
    std::vector<std::string> kept;
  };
  const std::vector<Case> cases = {
      // " Lily" starts with a space that lies before "Lily": the token straddles the cut, dropped.
      {{"Lily"}, " dog was named ", "Lily", {"▁dog", "▁was", "▁named"}},
      // The match begins exactly at a token boundary: every token before it stays.
      {{" Lily"}, " dog was named", " Lily", {"▁dog", "▁was", "▁named"}},
      {{"med L"}, " dog was na", "med L", {"▁dog", "▁was"}},
      {{"dog"}, " ", "dog", {}},
      // Several strings complete at the same token: the earliest start wins, whatever the order ...
      {{"Lily", "named Lily"}, " dog was ", "named Lily", {"▁dog", "▁was"}},
      // ... and at the same start, the one listed first.
      {{"Lil", "Li"}, " dog was named ", "Lil", {"▁dog", "▁was", "▁named"}},
      // A string that never appears leaves the EOS stop in charge.
      {{"cat"}, " dog was named Lily.", "", {"▁dog", "▁was", "▁named", "▁Lily", ".", "</s>"}},
  };
  for (const Case& c : cases) {
    for (CacheMode cache : {CacheMode::On, CacheMode::Off}) {
      const auto r = run(s, {"<s>", "▁the"}, 20, true, c.stops, cache);
      EXPECT_EQ(r.text, c.text) << c.stops[0];
      EXPECT_EQ(r.output_ids, ids(s, c.kept)) << c.stops[0];
      EXPECT_EQ(r.stop_reason, c.matched.empty() ? "eos" : "stop_string") << c.stops[0];
      EXPECT_EQ(r.stop_string, c.matched) << c.stops[0];
      // Kept and dropped tokens together are every sampled token.
      std::vector<int> all = r.output_ids;
      all.insert(all.end(), r.dropped_ids.begin(), r.dropped_ids.end());
      const auto whole = ids(s, {"▁dog", "▁was", "▁named", "▁Lily", ".", "</s>"});
      EXPECT_TRUE(std::equal(all.begin(), all.end(), whole.begin())) << c.stops[0];
    }
  }
  // An empty stop string would match before the first token: refused (it used to be skipped).
  EXPECT_THROW(run(s, {"<s>", "▁the"}, 20, true, {"Lily", ""}, CacheMode::On), Error);
  // on_step sees the tokens the cut dropped too.
  int steps = 0;
  const auto r = run(s, {"<s>", "▁the"}, 20, true, {"Lily"}, CacheMode::On, &steps);
  EXPECT_EQ(steps, 4);
  EXPECT_EQ(r.output_ids.size(), 3u);
  EXPECT_EQ(r.dropped_ids, ids(s, {"▁Lily"}));
}

TEST(Stopping, StopStringDropsEveryByteTokenOfACharacterItReaches) {
  const Scripted s = scripted(kScript, true);
  // "é" is two byte tokens; the first adds no text on its own but its byte is part of the match.
  auto r = run(s, {"<s>", "▁hot"}, 10, true, {"é"});
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.output_ids.empty());
  EXPECT_EQ(r.stop_string, "é");
  EXPECT_EQ(r.dropped_ids, ids(s, {"<0xC3>", "<0xA9>"}));
  r = run(s, {"<s>", "▁hot"}, 10, true, {"!"});
  EXPECT_EQ(r.text, "é");
  EXPECT_EQ(r.output_ids, ids(s, {"<0xC3>", "<0xA9>"}));
  EXPECT_EQ(r.dropped_ids, ids(s, {"!"}));
  r = run(s, {"<s>", "▁hot"}, 10, true, {"é! sun"});
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.output_ids.empty());
  EXPECT_EQ(r.dropped_ids, ids(s, {"<0xC3>", "<0xA9>", "!", "▁sun"}));
}

TEST(Stopping, BatchedSequencesStopExactlyWhereTheirSoloRunsDo) {
  for (bool llama2c : {false, true}) {
    const Scripted s = scripted(kScript, llama2c);
    // EOS, BOS (llama2.c) or max_new_tokens, a stop string, a straddled stop string, max_new_tokens.
    const std::vector<std::vector<int>> prompts = {ids(s, {"<s>", "▁Lily"}), ids(s, {"<s>", "▁big"}),
                                                   ids(s, {"<s>", "▁hot"}), ids(s, {"<s>", "▁was"}),
                                                   ids(s, {"<s>"})};
    for (CacheMode cache : {CacheMode::On, CacheMode::Off}) {
      for (bool stop_at_eos : {true, false}) {
        GenerationConfig g;
        g.max_new_tokens = 9;
        g.cache = cache;
        g.stop_at_eos = stop_at_eos;
        g.stop_strings = {"!", "named L"};
        Engine batch(s.model, EngineOptions{});
        const auto rb = batch.generate_batch(prompts, g, s.tok.get());
        ASSERT_EQ(rb.size(), prompts.size());
        std::set<std::string> reasons;
        for (size_t b = 0; b < prompts.size(); ++b) {
          Engine solo(s.model, EngineOptions{});
          GenerationConfig gs = g;
          gs.sequence_id = g.sequence_id + b;
          const auto r = solo.generate(prompts[b], gs, s.tok.get());
          EXPECT_EQ(rb[b].output_ids, r.output_ids) << b;
          EXPECT_EQ(rb[b].text, r.text) << b;
          EXPECT_EQ(rb[b].stop_reason, r.stop_reason) << b;
          EXPECT_EQ(rb[b].stop_string, r.stop_string) << b;
          EXPECT_EQ(rb[b].dropped_ids, r.dropped_ids) << b;
          reasons.insert(r.stop_reason);
        }
        if (stop_at_eos) {
          EXPECT_EQ(reasons, (std::set<std::string>{llama2c ? "bos" : "eos", "eos", "stop_string", "max_new_tokens"}));
        }
      }
    }
  }
}

// ---- stories260K: llama2.c ends a story at BOS ------------------------------------------------

TEST(Stopping, Llama2cBinStopsAtBosButItsHfConversionRunsOn) {
  KVP_REQUIRE_SHARED(bin, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(hf, "models/stories260K/hf");
  GenerationConfig g;
  g.max_new_tokens = 400;
  const auto a = Engine(Model::load(bin, DType::F32), EngineOptions{}).generate({}, g, nullptr);
  const auto b = Engine(Model::load(hf, DType::F32), EngineOptions{}).generate({}, g, nullptr);
  EXPECT_EQ(a.stop_reason, "bos");
  ASSERT_EQ(a.output_ids.size(), 346u);  // see the llama2.c run below
  EXPECT_EQ(a.output_ids.back(), 1);
  // The same weights as HF Llama: BOS is not its EOS (2), so the run goes on into a second story.
  EXPECT_EQ(b.stop_reason, "max_new_tokens");
  ASSERT_EQ(b.output_ids.size(), 400u);
  EXPECT_TRUE(std::equal(a.output_ids.begin(), a.output_ids.end(), b.output_ids.begin()));
}

using CliRun = test::CliRun;

using test::kvparity;
using test::q;

// What karpathy/llama2.c's run.c (snapshot 350e04fe, built with `gcc -O2 -o run run.c -lm`) prints:
//   ./run stories260K.bin -z tok512.bin -t 0 -n 512 -i ""         (BOS at position 346 of 512)
//   ./run stories260K.bin -z tok512.bin -t 0 -n 256 -i "The cat"  (BOS at position 213 of 256)
//   ./run stories260K.bin -z tok512.bin -t 0 -n 256 -i "Lily"     (BOS at position 225 of 256)
// Each run stops at BOS before its step limit. run.c echoes the prompt (decoded) and ends with
// "\n"; below are its outputs with the prompt and that newline removed, i.e. the continuation
// kvparity reports as `text`. kvparity's llama2.c tokenizer follows run.c's whitespace rule (no
// leading space right after BOS), so the texts compare byte for byte.
const char* const kStoryEmptyPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n"
    "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do. "
    "She said, \"I want to play with your ball, but I can't find it.\"\n"
    "Lily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what "
    "to do.\"\n"
    "Lily didn't want to help her mom, so she said, \"I'm sorry, mom. I didn't know what to do.\" "
    "Her mom said, \"Don't worry, Lily. We can help you.\"\n"
    "Lily and her mom went to the park to play. They played together and had fun. After a while, "
    "Lily's mom came into the room and saw the park. She was so happy and said, \"Thank you, Lily! "
    "You are a good friend.\"";

const char* const kStoryTheCat =
    " and a boy were playing in the park. They liked to play with their toys and run around the "
    "park. They liked to play with their toys and seek.\n"
    "One day, a little boy named Tim came to the park. He saw a big box with a big box. Tim wanted "
    "to play with the box. He said, \"I want to play with it!\"\n"
    "Tim said, \"Yes, I can play with you.\" They played together and had fun. Tim was happy to "
    "have a new friend.\n"
    "Tim and his friends played together. They played together every day. They had lots of fun. "
    "Tim and the boy were happy. They played together every day.";

const char* const kStoryLily =
    " and Tom were playing in the park. They liked to play with their toys and run around the "
    "park. They saw a big box with a big box. They wanted to play with the box.\n"
    "\"Look, Mom!\" Lily said. \"Let's go to the park.\"\n"
    "\"Let's go to the park,\" Tom said. \"Let's go to the park.\"\n"
    "\"OK, Lily,\" Lily said. \"It's a small box. We can find it.\"\n"
    "\"OK,\" Tom said. \"It is a good boy. We can find it.\"\n"
    "Lily and Tom were happy. They played together and had fun. They played together every day.";

TEST(Stopping, Stories260KEndsAtBosLikeLlama2cRunC) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  const std::string base = "generate --model " + q(model) + " --tokenizer " + q(tok) + " --dtype fp32 --json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", kStoryEmptyPrompt}, {"The cat", kStoryTheCat}, {"Lily", kStoryLily}};
  for (const auto& [prompt, story] : cases) {
    for (const char* cache : {"on", "off"}) {
      const CliRun r = kvparity(base + " --max-new-tokens 500 --cache " + cache + " --prompt " + q(prompt));
      ASSERT_EQ(r.status, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["text"], story) << "prompt '" << prompt << "' cache " << cache;
      EXPECT_EQ(j["stop_reason"], "bos") << prompt;
      EXPECT_EQ(j["output_ids"].back(), 1) << prompt;
      EXPECT_FALSE(j.contains("stop_string"));
    }
  }
  // Without --json the empty prompt prints exactly what run.c printed.
  const CliRun full = kvparity("generate --model " + q(model) + " --tokenizer " + q(tok) +
                               " --prompt '' --max-new-tokens 500");
  ASSERT_EQ(full.status, 0) << full.err;
  EXPECT_EQ(full.out, std::string(kStoryEmptyPrompt) + "\n");
  // --ignore-eos runs past BOS into a second story, to --max-new-tokens.
  const CliRun on = kvparity(base + " --prompt '' --max-new-tokens 400 --ignore-eos");
  ASSERT_EQ(on.status, 0) << on.err;
  const auto j = nlohmann::json::parse(on.out);
  EXPECT_EQ(j["stop_reason"], "max_new_tokens");
  ASSERT_EQ(j["output_ids"].size(), 400u);
  EXPECT_EQ(j["output_ids"][345], 1);
  const std::string text = j["text"];
  EXPECT_EQ(text.rfind(kStoryEmptyPrompt, 0), 0u);
  EXPECT_GT(text.size(), std::string(kStoryEmptyPrompt).size());
}

TEST(Stopping, CliStopStringLeavesItsTokensOutOfOutputIds) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  const CliRun r = kvparity("generate --model " + q(model) + " --tokenizer " + q(tok) +
                            " --prompt 'Once upon a time' --max-new-tokens 40 --stop Lily --stop park --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["text"], ", there was a little girl named ");
  EXPECT_EQ(j["stop_reason"], "stop_string");
  EXPECT_EQ(j["stop_string"], "Lily");
  // ", there was a little girl named" (the reference's greedy ids); " Lily" straddles the cut.
  EXPECT_EQ(j["output_ids"], nlohmann::json({432, 383, 286, 261, 376, 298, 315, 421, 395}));
}

}  // namespace
}  // namespace kvp
