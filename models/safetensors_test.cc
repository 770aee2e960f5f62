#include "models/safetensors.h"

#include <ATen/ATen.h>
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace troupe {
namespace models {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// A directory `name` in this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static test::TempDir root("safetensors");
  const std::string dir = root.Path(name);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The 8-byte little-endian length followed by the header, built by hand.
std::string LengthPrefixed(const std::string& header) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header;
}

std::string Bytes(std::initializer_list<unsigned char> bytes) {
  return std::string(bytes.begin(), bytes.end());
}

// A safetensors file with one F32 [2] tensor "a" and the given header entry for "b" (+ data).
std::string FileWith(const std::string& b_entry, const std::string& data) {
  return LengthPrefixed(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":)" + b_entry +
                        "}") +
         data;
}

absl::Status OpenStatus(const std::string& name, const std::string& bytes) {
  std::string path = TestDir("bad") + "/" + name + ".safetensors";
  test::WriteFile(path, bytes);
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(path);
  if (reader.ok()) return absl::OkStatus();
  EXPECT_THAT(reader.status().message(), HasSubstr(path)) << name;
  return reader.status();
}

TEST(Safetensors, ReadsAFileBuiltByteByByteFromTheSpec) {
  // Header written by hand; data as raw little-endian bit patterns.
  const std::string header = R"({"__metadata__":{"format":"pt","note":"hand made"},)"
                             R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                             R"("h":{"dtype":"F16","shape":[3],"data_offsets":[16,22]},)"
                             R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[22,26]},)"
                             R"("i":{"dtype":"I64","shape":[1],"data_offsets":[26,34]},)"
                             R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[34,34]}})";
  std::string data = Bytes({
      0x00, 0x00, 0x80, 0x3f,             // 1.0f
      0x00, 0x00, 0x00, 0xc0,             // -2.0f
      0x00, 0x00, 0x00, 0x3f,             // 0.5f
      0x00, 0x00, 0x40, 0x40,             // 3.0f
      0x00, 0x3c, 0x00, 0xc0,             // f16 1.0, -2.0
      0x00, 0x38,                         // f16 0.5
      0x80, 0x3f, 0x00, 0xbf,             // bf16 1.0, -0.5
      0x07, 0,    0,    0,    0, 0, 0, 0  // i64 7
  });
  std::string path = TestDir("by_hand") + "/hand.safetensors";
  test::WriteFile(path, LengthPrefixed(header) + data);

  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->names(), (std::vector<std::string>{"b", "e", "h", "i", "w"}));
  EXPECT_EQ(reader->metadata().at("note"), "hand made");
  EXPECT_EQ(reader->total_bytes(), 34);

  absl::StatusOr<at::Tensor> w = reader->Get("w");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(*w, at::tensor({1.0f, -2.0f, 0.5f, 3.0f}).reshape({2, 2})));
  absl::StatusOr<at::Tensor> h = reader->Get("h");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->scalar_type(), at::kHalf);
  EXPECT_TRUE(at::equal(h->to(at::kFloat), at::tensor({1.0f, -2.0f, 0.5f})));
  absl::StatusOr<at::Tensor> b = reader->Get("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(b->to(at::kFloat), at::tensor({1.0f, -0.5f})));
  absl::StatusOr<at::Tensor> i = reader->Get("i");  // at a misaligned address: copied
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->scalar_type(), at::kLong);
  EXPECT_EQ(i->item<int64_t>(), 7);
  absl::StatusOr<at::Tensor> e = reader->Get("e");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->sizes(), at::IntArrayRef({0, 3}));
  EXPECT_EQ(reader->Get("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(Safetensors, RoundTripsFloat32Float16AndBFloat16BitForBit) {
  std::string path = TestDir("roundtrip") + "/m.safetensors";
  at::manual_seed(3);
  NamedTensors tensors = {{"x.f32", at::randn({3, 5})},
                          {"x.f16", at::randn({7}).to(at::kHalf)},
                          {"x.bf16", at::randn({2, 2, 3}).to(at::kBFloat16)},
                          {"x.i32", at::arange(5, at::kInt)},
                          {"x.u8", at::arange(4, at::kByte)},
                          {"x.bool", at::tensor({1, 0, 1}).to(at::kBool)},
                          {"x.scalar", at::scalar_tensor(2.5)},
                          {"x.strided", at::randn({4, 3}).t()}};
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"step", "12"}}).ok());
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->metadata().at("format"), "pt");
  EXPECT_EQ(reader->metadata().at("step"), "12");
  for (const auto& [name, expected] : tensors) {
    absl::StatusOr<at::Tensor> got = reader->Get(name);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->scalar_type(), expected.scalar_type()) << name;
    EXPECT_TRUE(at::equal(*got, expected)) << name;
  }
  // Header padded to a multiple of 8 so the buffer is aligned, as the reference writer does.
  std::string bytes = test::ReadFile(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
}

TEST(Safetensors, GetAliasesTheMappingInsteadOfCopying) {
  std::string path = TestDir("alias") + "/m.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {{"w", at::ones({64, 64})}}).ok());
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok());
  at::Tensor a = *reader->Get("w");
  at::Tensor b = *reader->Get("w");
  EXPECT_EQ(a.data_ptr(), b.data_ptr());
  // The tensor keeps the mapping alive after the reader is gone; writes never reach the file.
  { SafetensorsReader gone = std::move(*reader); }
  a.mul_(3);
  EXPECT_EQ(a.sum().item<float>(), 3.0f * 64 * 64);
  absl::StatusOr<SafetensorsReader> again = SafetensorsReader::Open(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Get("w")->sum().item<float>(), 64.0f * 64);
}

TEST(Safetensors, ShardedIndexRoundTrips) {
  std::string dir = TestDir("sharded");
  NamedTensors tensors;
  for (int i = 0; i < 5; ++i) {
    tensors.emplace_back("layer." + std::to_string(i) + ".w",
                         at::full({10, 10}, static_cast<float>(i)));  // 400 B
  }
  absl::StatusOr<std::vector<std::string>> shards =
      WriteShardedSafetensors(dir, tensors, /*max_shard_bytes=*/900);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ(*shards, (std::vector<std::string>{"model-00001-of-00003.safetensors",
                                               "model-00002-of-00003.safetensors",
                                               "model-00003-of-00003.safetensors"}));
  Json index = Json::parse(test::ReadFile(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 2000);
  EXPECT_EQ(index["weight_map"]["layer.4.w"], "model-00003-of-00003.safetensors");

  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(dir);  // finds the index
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->names().size(), 5u);
  EXPECT_EQ(reader->total_bytes(), 2000);
  for (const auto& [name, expected] : tensors) {
    EXPECT_TRUE(at::equal(*reader->Get(name), expected)) << name;
  }
}

TEST(Safetensors, RefusesEachMalformedFileNamingTheFileAndField) {
  const std::string a_data(8, '\0');
  struct Case {
    const char* name;
    std::string bytes;
    const char* says;
  };
  std::string good = FileWith(R"({"dtype":"F32","shape":[1],"data_offsets":[8,12]})",
                              a_data + std::string(4, '\0'));
  ASSERT_TRUE(OpenStatus("good", good).ok()) << OpenStatus("good", good);
  const Case cases[] = {
      {"tiny", "abc", "too short"},
      {"huge_header", LengthPrefixed("{}").replace(0, 1, 1, '\x7f'), "header length"},
      {"truncated", good.substr(0, good.size() - 3), "outside"},
      {"malformed_json", LengthPrefixed(R"({"a":{"dtype":"F32",)") + a_data, "malformed JSON"},
      {"not_object", LengthPrefixed("[1,2]") + a_data, "JSON object"},
      {"out_of_range", FileWith(R"({"dtype":"F32","shape":[1],"data_offsets":[8,12]})", a_data),
       "'b'"},
      {"overlap", FileWith(R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})", a_data),
       "overlaps"},
      {"gap",
       FileWith(R"({"dtype":"F32","shape":[1],"data_offsets":[12,16]})",
                a_data + std::string(8, '\0')),
       "unused bytes"},
      {"trailing", good + "xx", "trailing bytes"},
      {"wrong_size",
       FileWith(R"({"dtype":"F32","shape":[2],"data_offsets":[8,12]})",
                a_data + std::string(4, '\0')),
       "need 8"},
      {"unknown_dtype",
       FileWith(R"({"dtype":"Q4","shape":[1],"data_offsets":[8,12]})",
                a_data + std::string(4, '\0')),
       "unsupported dtype"},
      {"fp8_dtype",
       FileWith(R"({"dtype":"F8_E4M3","shape":[4],"data_offsets":[8,12]})",
                a_data + std::string(4, '\0')),
       "field 'dtype'"},
      {"negative_shape",
       FileWith(R"({"dtype":"F32","shape":[-1],"data_offsets":[8,12]})",
                a_data + std::string(4, '\0')),
       "field 'shape'"},
      {"reversed_offsets",
       FileWith(R"({"dtype":"F32","shape":[1],"data_offsets":[12,8]})",
                a_data + std::string(4, '\0')),
       "field 'data_offsets'"},
      {"missing_offsets", FileWith(R"({"dtype":"F32","shape":[1]})", a_data + std::string(4, '\0')),
       "field 'data_offsets'"},
      {"bad_metadata",
       LengthPrefixed(R"({"__metadata__":{"n":1},"a":{"dtype":"F32","shape":[2],)"
                      R"("data_offsets":[0,8]}})") +
           a_data,
       "'__metadata__'"},
  };
  for (const Case& c : cases) {
    absl::Status s = OpenStatus(c.name, c.bytes);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.says)) << c.name;
  }
  absl::StatusOr<SafetensorsReader> missing =
      SafetensorsReader::Open(TestDir("bad") + "/absent.safetensors");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("absent.safetensors"));
}

// Each way a shard's header can lie about its data, reached through a sharded index: refused
// before any tensor byte is read, naming the index and the shard. (Single files: the test above.)
TEST(Safetensors, RefusesAShardWhoseHeaderLiesWithoutReadingOutOfBounds) {
  const std::string four_floats(16, '\0');
  struct Case {
    const char* name;
    std::string bytes;
    const char* says;
  };
  std::string huge_length(8, '\xff');  // 2^64 - 1: no wrap-around in the size check
  const Case cases[] = {
      {"header_longer_than_file", huge_length + "{}", "header length"},
      {"header_just_past_end", LengthPrefixed("{}").replace(0, 1, 1, '\x03'), "header length"},
      {"offsets_past_end",
       FileWith(R"({"dtype":"F32","shape":[1],"data_offsets":[8,1099511627776]})", four_floats),
       "outside"},
      {"offsets_at_int64_max",
       FileWith(R"({"dtype":"F32","shape":[1],"data_offsets":[8,9223372036854775807]})",
                four_floats),
       "outside"},
      {"offsets_overflow_int64",
       FileWith(R"({"dtype":"F32","shape":[1],"data_offsets":[8,18446744073709551615]})",
                four_floats),
       "field 'data_offsets'"},
      {"overlapping",
       FileWith(R"({"dtype":"F32","shape":[2],"data_offsets":[4,12]})", four_floats.substr(0, 12)),
       "overlaps"},
      {"dtype_longer_than_span",
       FileWith(R"({"dtype":"BF16","shape":[4],"data_offsets":[8,12]})", four_floats.substr(0, 12)),
       "need 8"},
      {"dtype_shorter_than_span",
       FileWith(R"({"dtype":"F16","shape":[1],"data_offsets":[8,12]})", four_floats.substr(0, 12)),
       "need 2"},
      {"numel_overflow",
       FileWith(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[8,12]})",
                four_floats.substr(0, 12)),
       "too large"},
  };
  const std::string dir = TestDir("lying_shards");
  test::WriteFile(dir + "/model.safetensors.index.json",
                  R"({"weight_map": {"a": "shard.safetensors", "b": "shard.safetensors"}})");
  for (const Case& c : cases) {
    test::WriteFile(dir + "/shard.safetensors", c.bytes);
    absl::StatusOr<SafetensorsReader> reader =
        SafetensorsReader::Open(dir + "/model.safetensors.index.json");
    EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(reader.status().message(), HasSubstr("model.safetensors.index.json")) << c.name;
    EXPECT_THAT(reader.status().message(), HasSubstr("shard.safetensors")) << c.name;
    EXPECT_THAT(reader.status().message(), HasSubstr(c.says)) << c.name << ": " << reader.status();
  }
}

TEST(Safetensors, RefusesAnIndexInconsistentWithItsShards) {
  std::string dir = TestDir("bad_index");
  ASSERT_TRUE(
      WriteSafetensors(dir + "/s1.safetensors", {{"a", at::ones({2})}, {"b", at::ones({2})}}).ok());
  struct Case {
    const char* name;
    std::string index;
    const char* says;
  };
  const Case cases[] = {
      {"no_weight_map", R"({"metadata":{}})", "'weight_map'"},
      {"not_listed", R"({"weight_map":{"a":"s1.safetensors"}})", "not listed"},
      {"missing_in_shard",
       R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s1.safetensors"}})", "'c'"},
      {"escapes_dir", R"({"weight_map":{"a":"../s1.safetensors"}})", "relative path"},
      {"malformed", R"({"weight_map":)", "malformed JSON"},
      {"absent_shard", R"({"weight_map":{"a":"s9.safetensors"}})", "s9.safetensors"},
  };
  for (const Case& c : cases) {
    std::string path = dir + "/" + c.name + ".index.json";
    test::WriteFile(path, c.index);
    absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(path);
    ASSERT_FALSE(reader.ok()) << c.name;
    EXPECT_THAT(reader.status().message(), HasSubstr(path)) << c.name;
    EXPECT_THAT(reader.status().message(), HasSubstr(c.says)) << c.name << ": " << reader.status();
  }
}

TEST(Safetensors, WriterRefusesBadNamesAndDtypes) {
  std::string path = TestDir("bad_write") + "/m.safetensors";
  EXPECT_THAT(WriteSafetensors(path, {{"a", at::ones({1})}, {"a", at::ones({1})}}).message(),
              HasSubstr("twice"));
  EXPECT_THAT(WriteSafetensors(path, {{"__metadata__", at::ones({1})}}).message(),
              HasSubstr("__metadata__"));
  EXPECT_THAT(WriteSafetensors(path, {{"c", at::ones({1}, at::kComplexFloat)}}).message(),
              HasSubstr("'c'"));
  EXPECT_THAT(WriteSafetensors(path, {{"u", at::Tensor()}}).message(), HasSubstr("'u'"));
  EXPECT_EQ(ListDir(TestDir("bad_write")), std::vector<std::string>{});
}

TEST(Safetensors, SaveLeavesTheTargetUnchangedWhenWritingFailsMidway) {
  std::string dir = TestDir("atomic");
  std::string path = dir + "/model.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {{"w", at::ones({4})}}).ok());
  const std::string before = test::ReadFile(path);

  // A 16 KiB file-size limit makes the 256 KiB write fail with EFBIG part-way through the data
  // (this works as root, unlike a read-only directory).
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &previous), 0);
  rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 16 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status s = WriteSafetensors(path, {{"w", at::zeros({256, 256})}});
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &previous, nullptr);

  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("model.safetensors"));
  EXPECT_EQ(test::ReadFile(path), before);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"model.safetensors"});
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE(at::equal(*reader->Get("w"), at::ones({4})));
}

struct TinyImpl : torch::nn::Module {
  TinyImpl() {
    fc = register_module("fc", torch::nn::Linear(3, 2));
    scale = register_parameter("scale", at::ones({2}));
    steps = register_buffer("steps", at::zeros({1}, at::kLong));
  }
  torch::nn::Linear fc{nullptr};
  at::Tensor scale;
  at::Tensor steps;
};

TEST(Safetensors, SavesAndLoadsAModuleConvertingDtype) {
  std::string dir = TestDir("module");
  TinyImpl source;
  {
    at::NoGradGuard no_grad;
    source.fc->weight.copy_(at::arange(6, at::kFloat).reshape({2, 3}) / 4);
    source.steps.fill_(9);
  }
  ASSERT_TRUE(SaveModule(source, dir + "/f32.safetensors").ok());
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(dir + "/f32.safetensors");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->names(), (std::vector<std::string>{"fc.bias", "fc.weight", "scale", "steps"}));

  TinyImpl target;
  ASSERT_TRUE(LoadIntoModule(*reader, target).ok());
  EXPECT_TRUE(at::equal(target.fc->weight, source.fc->weight));
  EXPECT_TRUE(at::equal(target.fc->bias, source.fc->bias));
  EXPECT_EQ(target.steps.item<int64_t>(), 9);

  // A bf16 checkpoint loads into float32 parameters (values exactly representable here).
  NamedTensors bf16 = ModuleTensors(source);
  for (auto& [name, t] : bf16) {
    if (t.is_floating_point()) t = t.to(at::kBFloat16);
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/bf16.safetensors", bf16).ok());
  TinyImpl from_bf16;
  ASSERT_TRUE(LoadIntoModule(*SafetensorsReader::Open(dir + "/bf16.safetensors"), from_bf16).ok());
  EXPECT_EQ(from_bf16.fc->weight.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(from_bf16.fc->weight, source.fc->weight));
}

TEST(Safetensors, LoadNamesMissingMismatchedAndUnexpectedTensorsAndChangesNothing) {
  std::string dir = TestDir("module_errors");
  TinyImpl source;
  NamedTensors tensors;
  for (auto& [name, t] : ModuleTensors(source)) {
    if (name == "scale") continue;                                            // missing
    tensors.emplace_back(name, name == "fc.weight" ? at::zeros({2, 4}) : t);  // wrong shape
  }
  tensors.emplace_back("lm_head.weight", at::zeros({1}));  // extra
  ASSERT_TRUE(WriteSafetensors(dir + "/m.safetensors", tensors).ok());
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(dir + "/m.safetensors");
  ASSERT_TRUE(reader.ok());

  TinyImpl target;
  at::Tensor bias_before = target.fc->bias.clone();
  absl::Status s = LoadIntoModule(*reader, target);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("m.safetensors"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("missing tensor(s): 'scale' (module expects [2])"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("'fc.weight' has shape [2, 4] in the file but the module "
                        "expects [2, 3]"));
  EXPECT_THAT(s.message(), HasSubstr("unexpected tensor(s)"));
  EXPECT_THAT(s.message(), HasSubstr("'lm_head.weight'"));
  EXPECT_TRUE(at::equal(target.fc->bias, bias_before));  // nothing copied

  // Extras alone: refused by default, accepted when allowed or ignored.
  NamedTensors ok_plus_extra = ModuleTensors(source);
  ok_plus_extra.emplace_back("lm_head.weight", at::zeros({1}));
  ASSERT_TRUE(WriteSafetensors(dir + "/extra.safetensors", ok_plus_extra).ok());
  absl::StatusOr<SafetensorsReader> extra = SafetensorsReader::Open(dir + "/extra.safetensors");
  ASSERT_TRUE(extra.ok());
  EXPECT_FALSE(LoadIntoModule(*extra, target).ok());
  LoadOptions allow;
  allow.allow_unexpected = true;
  EXPECT_TRUE(LoadIntoModule(*extra, target, allow).ok());
  LoadOptions ignore;
  ignore.ignore = [](const std::string& name) { return name == "lm_head.weight"; };
  EXPECT_TRUE(LoadIntoModule(*extra, target, ignore).ok());
}

TEST(Safetensors, LoadsAModuleFromTensorsInMemory) {
  TinyImpl source;
  NamedTensors tensors = ModuleTensors(source);
  for (auto& [name, t] : tensors) t = t.detach().clone().to(at::kDouble);  // any dtype
  TinyImpl target;
  ASSERT_TRUE(LoadIntoModule(tensors, "weights v3", target).ok());
  EXPECT_TRUE(at::equal(target.fc->weight, source.fc->weight));
  EXPECT_EQ(target.fc->weight.scalar_type(), at::kFloat);

  tensors.emplace_back("fc.weight", at::zeros({2, 3}));
  absl::Status twice = LoadIntoModule(tensors, "weights v3", target);
  EXPECT_THAT(std::string(twice.message()),
              HasSubstr("weights v3: tensor 'fc.weight' appears twice"));
  tensors.pop_back();
  tensors.front().second = at::zeros({5});
  absl::Status wrong = LoadIntoModule(tensors, "weights v3", target);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("weights v3: cannot load"));
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("has shape [5] in the tensors"));
}

TEST(Safetensors, LoadsASubmoduleUnderAPrefix) {
  std::string dir = TestDir("prefix");
  TinyImpl source;
  NamedTensors prefixed;
  for (auto& [name, t] : ModuleTensors(*source.fc)) prefixed.emplace_back("model.fc." + name, t);
  ASSERT_TRUE(WriteSafetensors(dir + "/m.safetensors", prefixed).ok());
  TinyImpl target;
  LoadOptions options;
  options.prefix = "model.fc.";
  ASSERT_TRUE(
      LoadIntoModule(*SafetensorsReader::Open(dir + "/m.safetensors"), *target.fc, options).ok());
  EXPECT_TRUE(at::equal(target.fc->weight, source.fc->weight));
}

}  // namespace
}  // namespace models
}  // namespace troupe
