#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>

#include "core/env.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_fail.h"
#include "cuda/cuda_pass_graphs.cuh"
#include "cuda/cuda_runtime_api.h"
#include "cuda/kernel_names.h"

namespace kvp::cuda {
namespace {
constexpr size_t kKeptGraphs = 8;  // e.g. one decode shape per batch size in use
std::atomic<bool> g_graphs_on{true};
std::atomic<size_t> g_replays{0};
std::mutex g_busiest_mutex;
GraphNodes g_busiest;  // of the graph replayed most so far
size_t g_busiest_replays = 0;

// A kernel node's function name, through the driver (cuBLAS launches through it too, where the
// runtime's cudaGraphKernelNodeGetParams knows only this program's kernels), its entry points
// looked up at run time so that nothing links libcuda; "?" where the driver cannot say.
std::string kernel_node_name(cudaGraphNode_t node) {
  using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  using FuncName = CUresult (*)(const char**, CUfunction);
  using KernelName = CUresult (*)(const char**, CUkernel);
  static const auto entry = [](const char* name) -> void* {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion(name, &f, 12030, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    cudaGetLastError();  // a missing entry point is no error of the pass
    return f;
  };
  static const auto get_params = reinterpret_cast<GetParams>(entry("cuGraphKernelNodeGetParams"));
  static const auto func_name = reinterpret_cast<FuncName>(entry("cuFuncGetName"));
  static const auto kernel_name = reinterpret_cast<KernelName>(entry("cuKernelGetName"));
  CUDA_KERNEL_NODE_PARAMS p{};
  if (get_params == nullptr || get_params(node, &p) != CUDA_SUCCESS) return "?";
  const char* name = nullptr;
  if (p.func != nullptr && func_name != nullptr && func_name(&name, p.func) != CUDA_SUCCESS) name = nullptr;
  if (p.func == nullptr && p.kern != nullptr && kernel_name != nullptr && kernel_name(&name, p.kern) != CUDA_SUCCESS)
    name = nullptr;
  return short_kernel_name(name);
}

// Counts what a replay of `graph` launches (before it is instantiated): the kernel nodes, all
// nodes, and the kernels' names tallied.
GraphNodes count_nodes(cudaGraph_t graph) {
  size_t n = 0;
  check(cudaGraphGetNodes(graph, nullptr, &n), "counting a CUDA graph's nodes");
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) check(cudaGraphGetNodes(graph, nodes.data(), &n), "counting a CUDA graph's nodes");
  std::vector<std::string> names;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    check(cudaGraphNodeGetType(node, &t), "counting a CUDA graph's nodes");
    if (t == cudaGraphNodeTypeKernel) names.push_back(kernel_node_name(node));
  }
  return GraphNodes{names.size(), n, kernel_tally(names)};
}

void note_replay(size_t replays, const GraphNodes& g) {
  std::lock_guard<std::mutex> lock(g_busiest_mutex);
  if (replays <= g_busiest_replays) return;
  g_busiest_replays = replays;
  g_busiest = g;
}
}  // namespace

void set_pass_graphs(bool on) { g_graphs_on = on; }
size_t pass_graph_replays() { return g_replays; }
void reset_busiest_pass_graph() {
  std::lock_guard<std::mutex> lock(g_busiest_mutex);
  g_busiest = {};
  g_busiest_replays = 0;
}
GraphNodes busiest_pass_graph_nodes() {
  std::lock_guard<std::mutex> lock(g_busiest_mutex);
  return g_busiest;
}
bool pass_graphs_on() { return g_graphs_on; }

namespace {
EnvSwitch g_fusion_on{"KVPARITY_CUDA_FUSION", true};
EnvSwitch g_group_on{"KVPARITY_CUDA_GROUP", true};
EnvSwitch g_skip_dead{"KVPARITY_CUDA_SKIP_DEAD_WRITES", true};
EnvSwitch g_gemm_out16{"KVPARITY_CUDA_GEMM_OUT16", false};
}  // namespace
void set_gemm_out16(bool on) { g_gemm_out16.set(on); }
bool gemm_out16_on() { return g_gemm_out16.on(); }
void set_skip_dead_writes(bool on) { g_skip_dead.set(on); }
bool skip_dead_writes_on() { return g_skip_dead.on(); }
void set_launch_fusion(bool on) { g_fusion_on.set(on); }
bool launch_fusion_on() { return g_fusion_on.on(); }
void set_group_launches(bool on) { g_group_on.set(on); }
bool group_launches_on() { return g_group_on.on(); }

namespace {
std::atomic<size_t> g_ring_bytes{0};
}  // namespace
void set_upload_ring_bytes(size_t bytes) { g_ring_bytes = bytes; }

namespace {
int split_keys_from_env() { return env_int("KVPARITY_CUDA_SPLIT_KEYS", 32, 16, 4096); }
std::atomic<int> g_split_keys{0};  // 0: not read yet
}  // namespace
void set_decode_split_keys(int keys) { g_split_keys = std::clamp(keys, 16, 4096); }
int decode_split_keys() {
  if (g_split_keys == 0) g_split_keys = split_keys_from_env();
  return g_split_keys;
}
size_t upload_ring_bytes() { return g_ring_bytes == 0 ? size_t(4) << 20 : g_ring_bytes.load(); }

PassGraphs::~PassGraphs() {
  for (auto& [h, e] : graphs_)
    if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
}

void PassGraphs::begin_pass() {
  pending_.clear();
  // A graph captured with programmatic launches is not the one to replay without them.
  hash_ = mix(0x6a09e667f3bcc908ull, pdl_launch() ? 1 : 0);
  collecting_ = enabled_;
}

void PassGraphs::run_pending() {
  // Moved out first: a launch that throws leaves the queue empty, not half replayed later.
  std::vector<std::function<void()>> todo;
  todo.swap(pending_);
  for (auto& f : todo) f();
}

void PassGraphs::flush() {
  if (!collecting_) return;
  collecting_ = false;
  run_pending();
}

void PassGraphs::end_pass() {
  if (!collecting_) return;
  collecting_ = false;
  if (pending_.empty()) return;
  // Hashes met once (prefills of ever new lengths) are forgotten in bulk now and then.
  if (graphs_.size() > 4096)
    for (auto it = graphs_.begin(); it != graphs_.end();) it = it->second.exec == nullptr ? graphs_.erase(it) : ++it;
  Entry& e = graphs_[hash_];
  if (e.exec != nullptr) {
    pending_.clear();
    check(cudaGraphLaunch(e.exec, stream_), "replaying the pass's CUDA graph");
    note_replay(++e.replays, e.nodes);
    ++replays_;
    ++g_replays;
    order_.remove(hash_);
    order_.push_back(hash_);
    return;
  }
  if (++e.seen < 2) {
    run_pending();
    return;
  }
  // Second time this exact pass: capture it (capturing does not run it), then launch the graph.
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "starting a CUDA graph capture");
  try {
    run_pending();
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  check(cudaStreamEndCapture(stream_, &graph), "ending a CUDA graph capture");
  GraphNodes counted;
  try {
    counted = count_nodes(graph);
  } catch (...) {
    cudaGraphDestroy(graph);
    throw;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(err, "instantiating a CUDA graph");
  e.exec = exec;
  e.nodes = std::move(counted);
  ++captures_;
  order_.push_back(hash_);
  while (order_.size() > kKeptGraphs) {
    auto it = graphs_.find(order_.front());
    if (it != graphs_.end()) {
      if (it->second.exec != nullptr) cudaGraphExecDestroy(it->second.exec);
      graphs_.erase(it);
    }
    order_.pop_front();
  }
  check(cudaGraphLaunch(exec, stream_), "launching the pass's CUDA graph");
  ++g_replays;
}

}  // namespace kvp::cuda
