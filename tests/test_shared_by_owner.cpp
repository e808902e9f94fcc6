// SharedByOwner (src/core/shared_by_owner.h): what the CUDA kernels of one model share, its device
// weights. The GPU side (one upload for a study's engines, and the same bits as engines alone) is
// tests/cuda/test_cuda_shared_weights.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "core/shared_by_owner.h"

namespace kvp {
namespace {

struct Copies {
  explicit Copies(int* made) { ++*made; }
};

TEST(SharedByOwner, HoldersOfOneOwnerShareOneObjectUntilTheLastLetsGo) {
  SharedByOwner<Copies> reg;
  int made = 0;
  const auto make = [&] { return std::make_shared<Copies>(&made); };
  int model_a = 0, model_b = 0;
  auto a1 = reg.get(&model_a, make);
  auto a2 = reg.get(&model_a, make);
  EXPECT_EQ(a1.get(), a2.get());
  EXPECT_EQ(made, 1);
  auto b = reg.get(&model_b, make);
  EXPECT_NE(b.get(), a1.get()) << "another owner shares nothing";
  EXPECT_EQ(made, 2);
  EXPECT_EQ(reg.held(), 2u);

  a1.reset();
  EXPECT_EQ(reg.get(&model_a, make).get(), a2.get()) << "a holder is left";
  EXPECT_EQ(made, 2);
  a2.reset();
  EXPECT_EQ(reg.held(), 1u);
  // Every holder gone: a new object, even at the same owner address (a new model may sit there).
  auto a3 = reg.get(&model_a, make);
  EXPECT_EQ(made, 3);
  EXPECT_EQ(reg.held(), 2u);
}

TEST(SharedByOwner, NullOwnerSharesWithNobody) {
  SharedByOwner<Copies> reg;
  int made = 0;
  const auto make = [&] { return std::make_shared<Copies>(&made); };
  auto x = reg.get(nullptr, make), y = reg.get(nullptr, make);
  EXPECT_NE(x.get(), y.get());
  EXPECT_EQ(made, 2);
  EXPECT_EQ(reg.held(), 0u);
}

TEST(SharedByOwner, ThreadsAskingTogetherGetOneObject) {
  SharedByOwner<Copies> reg;
  int made = 0;  // written under the registry's lock only
  int owner = 0;
  std::vector<std::shared_ptr<Copies>> got(8);
  std::vector<std::thread> ts;
  for (size_t t = 0; t < got.size(); ++t)
    ts.emplace_back([&, t] { got[t] = reg.get(&owner, [&] { return std::make_shared<Copies>(&made); }); });
  for (auto& t : ts) t.join();
  for (const auto& g : got) EXPECT_EQ(g.get(), got[0].get());
  EXPECT_EQ(made, 1);
}

}  // namespace
}  // namespace kvp
