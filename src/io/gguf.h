#pragma once
// GGUF (llama.cpp's model format), versions 2 and 3, little-endian only.
// Layout: "GGUF", u32 version, u64 tensor_count, u64 kv_count, kv pairs, tensor infos,
// padding to general.alignment, tensor data. Tensor dims are stored innermost first (ne[0]).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/checkpoint.h"

namespace kvp {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string gguf_type_name(GgufType t);

// One metadata value. Scalars keep their integer or floating value exactly; arrays keep their
// element type (`elem`) and elements: numbers and bools packed as the file stores them (a
// vocabulary's 10^5 scores and token types then cost their bytes, not an object each), strings
// as strings, arrays as values.
struct GgufValue {
  GgufType type = GgufType::U32;
  uint64_t u = 0;   // unsigned integers and bool
  int64_t i = 0;    // signed integers
  double f = 0.0;   // F32 / F64
  std::string s;    // String
  GgufType elem = GgufType::U8;
  std::vector<uint8_t> packed;       // arrays of numbers or bools: the elements' little-endian bytes
  std::vector<std::string> strings;  // arrays of strings
  std::vector<GgufValue> arr;        // arrays of arrays

  bool is_integer() const;
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
  size_t size() const;          // array length
  GgufValue at(size_t k) const; // array element k as a value of type `elem`
  static GgufValue of_u32(uint32_t v) { GgufValue x; x.type = GgufType::U32; x.u = v; return x; }
  static GgufValue of_i32(int32_t v) { GgufValue x; x.type = GgufType::I32; x.i = v; return x; }
  static GgufValue of_f32(float v) { GgufValue x; x.type = GgufType::F32; x.f = v; return x; }
  static GgufValue of_bool(bool v) { GgufValue x; x.type = GgufType::Bool; x.u = v; return x; }
  static GgufValue of_str(std::string v) { GgufValue x; x.type = GgufType::String; x.s = std::move(v); return x; }
  // Every item must have type `elem` (error otherwise).
  static GgufValue of_array(GgufType elem, const std::vector<GgufValue>& items);
  static GgufValue of_strings(std::vector<std::string> items);
};

// Bytes of one stored number or bool of type t (0 for String and Array).
size_t gguf_scalar_size(GgufType t);

// Plain ggml tensor types; the block-quantised ones this project reads are in core/quant.h
// (QuantType, quant_from_ggml_type), and every other type is refused naming the tensor.
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, BF16 = 30 };

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // as stored: ne[0] innermost
  uint32_t type = 0;         // raw ggml type id
  uint64_t offset = 0;       // relative to the data section
};

struct GgufFile {
  uint32_t version = 3;
  std::map<std::string, GgufValue> kv;
  std::vector<GgufTensorInfo> tensors;  // file order
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // absolute start of the data section
};

// Parses header, metadata and tensor infos of an in-memory image, checking every count and length
// against the bytes that remain before allocating, and every tensor's data range against `size`.
// Tensors of types other than F32/F16/BF16 and the QuantType formats are refused here, naming
// tensor and type. `name` is used in errors.
GgufFile parse_gguf(const uint8_t* data, size_t size, const std::string& name);

// Turns a parsed image into a Checkpoint: hyper-parameters from <arch>.* keys, tensors renamed
// to canonical HF names with PyTorch shape order (views into `data`), and the embedded vocabulary.
Checkpoint gguf_to_checkpoint(const GgufFile& g, const uint8_t* data, size_t size, const std::string& name);

Checkpoint load_gguf(const std::string& path);

// Name mapping between llama.cpp and HF, per GGUF architecture ("llama" | "qwen2" | "qwen3" | "gemma2" |
// "gemma3").
// Return "" for names with no counterpart.
std::string gguf_to_hf_name(const std::string& gguf_name, const std::string& gguf_arch);
// llama.cpp's RoPE frequency divisors (F32, [head_dim/2]); a model parameter, not a weight.
inline constexpr const char* kRopeFreqsTensor = "rope_freqs.weight";
// llama.cpp's phi3 longrope factors (io/gguf_phi3.h).
inline constexpr const char* kPhi3RopeFactorsLong = "rope_factors_long.weight";
inline constexpr const char* kPhi3RopeFactorsShort = "rope_factors_short.weight";
std::string hf_to_gguf_name(const std::string& hf_name, const std::string& gguf_arch);
// "llama" for Llama and Mistral (as llama.cpp's converter does), else the family name.
std::string gguf_arch_for(Arch a);
// The model's: its Arch's, but qwen2moe / qwen3moe for the Qwen mixtures of experts (Mixtral is "llama").
std::string gguf_arch_for(const ModelConfig& c);
// What a GGUF of this model holds that llama.cpp's loader for its architecture cannot read or runs
// otherwise (each a sentence naming it; empty when llama.cpp runs the whole file as kvparity does): kvparity reads such files, and
// writes them, but llama.cpp refuses them. A Qwen mixture of experts with dense layers
// (mlp_only_layers, decoder_sparse_step): llama.cpp's qwen2moe / qwen3moe want experts in every
// layer; OLMoE with grouped-query attention or q wider than the hidden size: llama.cpp's olmoe
// creates q, o and both q/k norms {n_embd}; EXAONE 4.0 whose window llama.cpp's exaone4 loader
// ignores (below 64 layers) or imposes (at 64).
std::vector<std::string> gguf_llama_cpp_gaps(const ModelConfig& c);
// Splits "<prefix>N.<rest>" (a layer's tensor name) into N and rest; false when it has another form.
bool split_layer_name(const std::string& s, const std::string& prefix, long* layer, std::string* rest);

}  // namespace kvp
