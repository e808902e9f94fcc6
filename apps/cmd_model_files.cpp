#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "core/error.h"
#include "io/gguf.h"
#include "model/checkpoint_export.h"
#include "model/quant_recipe.h"
#include "model/synthetic.h"
#include "progress_line.h"
#include "runtime/chat_for_model.h"
#include "runtime/tokenizer_for_model.h"
#include "tokenizer/hf_json_writer.h"

namespace kvp::cli {

namespace {

// The tokenizer files of an HF directory written by convert: an explicit --tokenizer, else the
// source's own (a GGUF's vocabulary, a tokenizer.json or tokenizer.bin beside the model). A
// tokenizer.json is copied; anything else is turned into one, so the directory runs on its own.
void hf_tokenizer_for_convert(const Checkpoint& ckpt, const std::string& explicit_path, bool asked, ExportOptions& eo) {
  std::string path = explicit_path;
  if (!asked && !ckpt.vocab) path = tokenizer_file_beside(ckpt.path, ckpt.format, ckpt.tokenizer_path);
  if (!path.empty() && std::filesystem::path(path).extension() == ".json") {
    eo.tokenizer_json = path;
    return;
  }
  if (path.empty() && !ckpt.vocab) return;
  try {
    const VocabSpec v = path.empty() ? *ckpt.vocab : load_tokenizer(path)->to_vocab_spec();
    const std::string& origin = path.empty() ? ckpt.path : path;
    eo.tokenizer_json_text = hf_tokenizer_json(v, origin);
    eo.tokenizer_config_text = hf_tokenizer_config_json(v, origin);
  } catch (const Error& e) {
    if (asked) throw;  // asked for: its failure is not a footnote
    std::cerr << "note: no tokenizer.json written: " << e.what() << "\n";
  }
}

// Shows an export's progress on `line`: bytes converted and written. After the last byte the file
// is flushed and synced, which on a 13 GB file takes seconds: the line says so.
void show_export_progress(ExportOptions& eo, ProgressLine& line) {
  eo.progress = [&line](const char* stage, size_t done, size_t total) {
    line.show(done == total ? "written, syncing to disk" : stage, done, total, "bytes");
  };
}

// A GGUF kvparity reads but llama.cpp will not, or runs otherwise: said, not refused (the file is still this model).
void note_llama_cpp_gaps(const ModelConfig& c) {
  for (const std::string& gap : gguf_llama_cpp_gaps(c))
    std::cerr << "note: llama.cpp will not load or run this file as kvparity does: " << gap << " (kvparity reads it)\n";
}

}  // namespace

constexpr const char* kQuantHelp =
    "quantise the matrices (GGUF only): a llama.cpp file type (Q4_0, Q8_0, Q2_K, Q3_K_M, Q4_K_M, IQ4_XS, "
    "MXFP4_MOE, ...), whose mix of formats per tensor is llama-quantize's, or Q3_K/Q4_K/Q5_K/MXFP4, one format "
    "for every matrix";
constexpr const char* kPureHelp = "every matrix in the --quant format, no mix (as llama-quantize --pure)";

void register_model_files(CLI::App& app) {
  struct SynthOpts {
    std::string arch, preset = "tiny", dtype = "fp32", format = "hf", out, seed = "1234", quant;
    bool pure = false;
  };
  auto s = std::make_shared<SynthOpts>();
  auto* synth = app.add_subcommand("synth", "write a model the project generates itself (real shapes, seeded weights)");
  one_of(synth->add_option("--arch", s->arch, "architecture (default: the preset's; llama for tiny)"),
         kSynthArchNames);
  one_of(synth->add_option("--preset", s->preset, "shapes: tiny (any --arch) or a real model's (its own --arch)"),
         kSynthPresets);
  one_of(synth->add_option("--dtype", s->dtype, "weight dtype"), kDtypeNames);
  one_of(synth->add_option("--format", s->format, "hf (directory) or gguf (file)"), {"hf", "gguf"});
  seed_option(synth, s->seed, "weight seed");
  synth->add_option("--out", s->out, "output directory (hf) or file (gguf)")->required();
  auto* synth_quant = synth->add_option("--quant", s->quant, kQuantHelp);
  one_of(synth_quant, quant_recipe_names());
  synth->add_flag("--pure", s->pure, kPureHelp)->needs(synth_quant);
  synth->callback([s, synth] {
    if (given(synth, "--quant") && s->format != "gguf") fail_usage("--quant {} needs --format gguf", s->quant);
    const ModelConfig cfg = synthetic_config(s->arch, s->preset);
    ProgressLine line("synth");
    // Each tensor is drawn as the writer reaches it: the model is never whole in memory.
    const DeferredSynthetic synthetic = synthesize_deferred(cfg, parse_dtype(s->dtype), parse_seed(s->seed));
    const Checkpoint& ckpt = synthetic.shapes;
    ExportOptions eo;
    eo.source = synthetic.make;
    show_export_progress(eo, line);
    eo.quant = s->quant;
    eo.quant_pure = s->pure;
    const VocabSpec vocab = make_synthetic_vocab(cfg.vocab_size);
    if (s->format == "gguf") {
      eo.vocab = &vocab;
    } else {
      eo.tokenizer_json_text = make_synthetic_tokenizer_json(cfg.vocab_size);
      eo.tokenizer_config_text = hf_tokenizer_config_json(vocab, "synthetic vocabulary");
    }
    export_checkpoint(ckpt, s->format, s->out, eo);
    line.clear();
    if (s->format == "gguf") note_llama_cpp_gaps(cfg);
    std::cerr << "wrote " << s->preset << " (" << family_name(cfg) << ", " << (s->quant.empty() ? s->dtype : s->quant)
              << ") to " << s->out << "\n";
  });

  struct ConvertOpts {
    std::string model, tokenizer, to, out, dtype, quant;
    bool pure = false;
  };
  auto c = std::make_shared<ConvertOpts>();
  auto* conv = app.add_subcommand("convert", "write the same weights in another format (hf or gguf)");
  conv->add_option("--model", c->model, "source checkpoint")->required();
  conv->add_option("--tokenizer", c->tokenizer,
                   "tokenizer to embed (--to gguf, when the model carries no vocabulary) or to write as "
                   "tokenizer.json (--to hf; a tokenizer.json is copied as is)");
  one_of(conv->add_option("--to", c->to, "output format")->required(), {"hf", "gguf"});
  conv->add_option("--out", c->out, "output directory (hf) or file (gguf)")->required();
  one_of(conv->add_option("--dtype", c->dtype, "convert tensors to this dtype (default: keep)"), kDtypeNames);
  auto* conv_quant = conv->add_option("--quant", c->quant, kQuantHelp);
  one_of(conv_quant, quant_recipe_names());
  conv->add_flag("--pure", c->pure, kPureHelp)->needs(conv_quant);
  conv->callback([c, conv] {
    const Checkpoint ckpt = open_checkpoint(c->model);
    if (c->to == "gguf" && ckpt.vocab && given(conv, "--tokenizer"))
      fail_usage("--tokenizer needs a model without a vocabulary ({} carries its own, which the GGUF keeps)", c->model);
    if (given(conv, "--tokenizer")) {
      // Written beside the weights, a tokenizer with ids past the embedding makes a file that fails
      // at its first such token (and that llama.cpp refuses): refuse it here, by name.
      const int n = load_tokenizer(c->tokenizer)->vocab_size();
      if (n > ckpt.config.vocab_size)
        fail("{}: {} tokens, more than the {} embedding rows of {} (not this model's tokenizer?)", c->tokenizer, n,
             ckpt.config.vocab_size, c->model);
    }
    ExportOptions eo;
    if (!c->dtype.empty()) eo.dtype = parse_dtype(c->dtype);
    if (given(conv, "--quant") && c->to != "gguf") fail_usage("--quant {} needs --to gguf", c->quant);
    if (given(conv, "--quant") && given(conv, "--dtype"))
      fail_usage("--quant and --dtype exclude each other (quantised blocks have no dtype)");
    eo.quant = c->quant;
    eo.quant_pure = c->pure;
    std::optional<VocabSpec> vocab = ckpt.vocab;
    if (c->to == "gguf" && !vocab) {
      // Embed the model's tokenizer when one can be found; a GGUF without vocabulary still loads.
      try {
        vocab = tokenizer_for_checkpoint(ckpt, c->tokenizer)->to_vocab_spec();
        if (!vocab->not_carried.empty())
          std::cerr << "note: the GGUF's vocabulary cannot hold the tokenizer's " << vocab->not_carried << "\n";
      } catch (const Error& e) {
        if (given(conv, "--tokenizer")) throw;  // asked for: its failure is not a footnote
        std::cerr << "note: no vocabulary embedded: " << e.what() << "\n";
      }
    }
    if (vocab) eo.vocab = &*vocab;
    if (c->to == "hf") hf_tokenizer_for_convert(ckpt, c->tokenizer, given(conv, "--tokenizer"), eo);
    // The chat template travels with the vocabulary, so --chat-template auto reads the copy too.
    try {
      eo.chat_template = shipped_chat_template(ckpt.path, ckpt.chat_template, c->tokenizer).jinja;
    } catch (const Error& e) {
      std::cerr << "note: no chat template carried over: " << e.what() << "\n";
    }
    ProgressLine line("convert");
    show_export_progress(eo, line);
    export_checkpoint(ckpt, c->to, c->out, eo);
    line.clear();
    if (c->to == "gguf") note_llama_cpp_gaps(ckpt.config);
    std::cerr << "wrote " << c->out << "\n";
  });
}

}  // namespace kvp::cli
