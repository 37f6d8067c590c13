#include "worker/model_file.h"

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"
#include "worker/dnn.h"

namespace asgd {
namespace {

std::string TempPath(const std::string& name) {
  return std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
         "/" + name;
}

TEST(ModelFileTest, RoundTrip) {
  DnnSpec spec;
  spec.input_dim = 6;
  spec.hidden = {4, 3};
  spec.num_classes = 5;
  spec.activation = Activation::kSigmoid;
  std::vector<float> params = InitialDnnParams(spec, 3);
  const std::string path = TempPath("model.asgd");
  ASSERT_TRUE(SaveModel(path, spec, params).ok());
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->params, params);
  EXPECT_EQ(loaded->spec.hidden, spec.hidden);
  EXPECT_EQ(loaded->spec.activation, Activation::kSigmoid);
  EXPECT_EQ(loaded->spec.num_classes, 5);
}

TEST(ModelFileTest, RejectsBadFiles) {
  EXPECT_EQ(LoadModel(TempPath("missing")).status().code(),
            absl::StatusCode::kNotFound);
  DnnSpec spec;
  spec.input_dim = 6;
  spec.hidden = {4};
  spec.num_classes = 5;
  const std::string path = TempPath("model2.asgd");
  ASSERT_TRUE(SaveModel(path, spec, InitialDnnParams(spec, 3)).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    return LoadModel(path).status();
  };
  EXPECT_EQ(write(bytes.substr(0, bytes.size() - 3)).code(),
            absl::StatusCode::kInvalidArgument);  // truncated
  EXPECT_EQ(write(bytes + "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(write("hello\n").code(), absl::StatusCode::kInvalidArgument);
  std::string wrong = bytes;
  wrong.replace(wrong.find("tensor layer0/bias 4"), 20, "tensor layer0/bias 5");
  EXPECT_EQ(write(wrong).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace asgd
