// --device cpu|cuda on a machine that cannot run CUDA (every CI machine): the device-aware
// interface on the CPU changes nothing, and asking for the GPU stops every command that runs a
// model with exit 1 before anything is written, naming why (a build without CUDA, or the CUDA
// error met when opening the GPU). The GPU itself is tested by the CUDA suite (tests/cuda/).
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_run.h"
#include "core/device.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "lab/run_spec.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"
#include "test_util.h"

namespace kvp {
namespace {

using test::CliRun;
using test::shell_quoted;

// Empty when this machine has a usable GPU (then these tests do not apply), else the reason.
std::string why_no_gpu() {
  try {
    require_device(Device::Cuda);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

#define KVP_REQUIRE_NO_GPU()                                                             \
  const std::string no_gpu = why_no_gpu();                                               \
  if (no_gpu.empty()) GTEST_SKIP() << "this machine runs CUDA: see the CUDA suite instead"

TEST(Device, NamesParseAndUnknownOnesAreUsageErrors) {
  EXPECT_EQ(parse_device("cpu"), Device::Cpu);
  EXPECT_EQ(parse_device("cuda"), Device::Cuda);
  EXPECT_EQ(device_name(Device::Cuda), "cuda");
  try {
    parse_device("gpu", "--device");
    FAIL() << "'gpu' accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("--device"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(require_device(Device::Cpu));
  EXPECT_EQ(device_description(Device::Cpu), "cpu");
}

TEST(Device, CudaIsRefusedWithTheReasonWhenThisMachineCannotRunIt) {
  KVP_REQUIRE_NO_GPU();
  EXPECT_NE(no_gpu.find("--device cuda"), std::string::npos) << no_gpu;
  if (!cuda_built())
    EXPECT_NE(no_gpu.find("built without CUDA"), std::string::npos) << no_gpu;
  else
    EXPECT_NE(no_gpu.find("CUDA"), std::string::npos) << no_gpu;  // the CUDA error, by name
  EXPECT_THROW(make_kernels(KernelPolicy::Standard, nullptr, Device::Cuda), Error);
  auto model = Model::from_checkpoint(synthesize_checkpoint(synthetic_config("llama", "tiny"), DType::F32), DType::F32);
  EngineOptions eo;
  eo.device = Device::Cuda;
  EXPECT_THROW(Engine(model, eo), Error);
  EXPECT_THROW(DeviceBuffer(Device::Cuda, 64), Error);
}

TEST(Device, CpuBuffersAndCopies) {
  DeviceBuffer b(Device::Cpu, 100);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  const char text[] = "kvparity";
  host_to_device(Device::Cpu, b.data(), text, sizeof text);
  char back[sizeof text] = {};
  device_to_host(Device::Cpu, back, b.data(), sizeof text);
  EXPECT_STREQ(back, text);
  DeviceBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.size(), 100u);
}

// A cache-OFF run's pass is a row longer every step: its scratch must not be reallocated at every
// step (on a GPU each free waits for the device), only a logarithmic number of times.
TEST(Device, ScratchGrowsByAQuarterAtLeast) {
  EXPECT_EQ(grown_size(0, 100), 100u);
  EXPECT_EQ(grown_size(100, 101), 125u);
  EXPECT_EQ(grown_size(100, 125), 125u);
  EXPECT_EQ(grown_size(100, 126), 126u);
  EXPECT_EQ(grown_size(100, 1000), 1000u);

  ActivationBuffer a;
  a.ensure(Device::Cpu, 1000);
  EXPECT_EQ(a.size(), 1000u);  // a fixed shape (a batch's decode steps) takes exactly what it needs
  int reallocations = 0;
  for (size_t n = 1001; n <= 2000; ++n) {
    const size_t before = a.size();
    a.ensure(Device::Cpu, n);
    ASSERT_GE(a.size(), n);
    ASSERT_NE(a.data(), nullptr);
    a.data()[n - 1] = 1.0f;  // the whole size is there to be written
    reallocations += a.size() != before;
  }
  EXPECT_EQ(reallocations, 4);  // to 5000, 6250, 7812 and 9765 bytes
  a.ensure(Device::Cpu, 10);    // never shrinks
  EXPECT_EQ(a.size(), 9765u / sizeof(float));
}

TEST(Device, RunSpecTakesTheDeviceKey) {
  const RunSpec s = RunSpec::parse("device=cuda,cache=off", "--baseline");
  EXPECT_EQ(s.text(), "cache=off,device=cuda");
  EXPECT_EQ(RunSpec::parse("device=cpu", "--baseline").resolve(RunDefaults{}).device, Device::Cpu);
  RunSettings cpu, gpu;
  gpu.device = Device::Cuda;
  // A CPU side keeps the spelling records had before devices existed; a GPU side names it.
  EXPECT_EQ(cpu.spec().find("device"), std::string::npos) << cpu.spec();
  EXPECT_NE(gpu.spec().find(",device=cuda"), std::string::npos) << gpu.spec();
  EXPECT_NE(sides_key(cpu, gpu).find("/device=cpu->cuda"), std::string::npos) << sides_key(cpu, gpu);
  EXPECT_EQ(sides_key(cpu, cpu).find("device"), std::string::npos);
  try {
    RunSpec::parse("device=tpu", "--candidate");
    FAIL() << "device=tpu accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("--candidate"), std::string::npos) << e.what();
  }
}

TEST(DeviceCli, EveryCommandThatRunsAModelRefusesCudaBeforeWritingAnything) {
  KVP_REQUIRE_NO_GPU();
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  KVP_REQUIRE_SHARED(gsm, "data/gsm8k/test.jsonl");
  test::TempDir t;
  const std::string m = " --model " + shell_quoted(model) + " --tokenizer " + shell_quoted(tok);
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"generate", "generate" + m + " --prompt 'Once upon' --max-new-tokens 4"},
      {"forward", "forward --model " + shell_quoted(model) + " --tokens 1,2,3 --logits-out " +
                      shell_quoted(t.file("logits.npy"))},
      {"demo", "demo"},
      {"bench", "bench --prompt-tokens 4 --decode-tokens 2 --cache-off-tokens 4 --repeats 1"},
      {"compare", "compare" + m + " --prompt 'Once upon' --max-new-tokens 4 --out " + shell_quoted(t.file("compare"))},
      {"profile", "profile" + m + " --prompt 'Once upon' --out " + shell_quoted(t.file("profile"))},
      {"patch", "patch" + m + " --prompt 'Once upon' --max-new-tokens 4 --out " + shell_quoted(t.file("patch"))},
      {"eval gsm8k", "eval gsm8k --data " + shell_quoted(gsm) + " --model " + shell_quoted(model) +
                         " --shots 0 --max-new-tokens 4 --limit 1 --out " + shell_quoted(t.file("eval"))},
  };
  for (const auto& [name, args] : commands) {
    SCOPED_TRACE(name);
    const CliRun r = test::run_kvparity(args + " --device cuda");
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("error: --device cuda"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_FALSE(std::filesystem::exists(t.file("logits.npy")));
  for (const char* dir : {"compare", "profile", "patch", "eval"})
    EXPECT_FALSE(std::filesystem::exists(t.file(dir) + "/manifest.json")) << dir << " wrote a manifest";
  // A comparison with one side on the GPU is refused the same way, naming the SPEC's device.
  const CliRun spec = test::run_kvparity("compare" + m + " --prompt 'Once upon' --max-new-tokens 4 --candidate "
                                         "device=cuda --out " + shell_quoted(t.file("spec")));
  EXPECT_EQ(spec.status, 1) << spec.err;
  EXPECT_NE(spec.err.find("--device cuda"), std::string::npos) << spec.err;
}

TEST(DeviceCli, UnknownDevicesAreUsageErrorsAndCpuIsTheDefault) {
  KVP_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  KVP_REQUIRE_SHARED(tok, "models/stories260K/tok512.bin");
  const std::string args = "generate --model " + shell_quoted(model) + " --tokenizer " + shell_quoted(tok) +
                           " --prompt 'Once upon a time' --max-new-tokens 16 --dtype fp16";
  const CliRun bad = test::run_kvparity(args + " --device gpu");
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_NE(bad.err.find("--device"), std::string::npos) << bad.err;
  const CliRun plain = test::run_kvparity(args), cpu = test::run_kvparity(args + " --device cpu");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(cpu.status, 0) << cpu.err;
  EXPECT_EQ(plain.out, cpu.out);
  const CliRun demo = test::run_kvparity("demo --device cpu --max-new-tokens 8");
  EXPECT_EQ(demo.status, 0) << demo.err;
  EXPECT_EQ(demo.out, test::run_kvparity("demo --max-new-tokens 8").out);
}

}  // namespace
}  // namespace kvp
