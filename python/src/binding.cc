// pikv._pikv: the C++ client, model-config reader and admin client for
// Python. Tensors never cross this boundary as objects: pikv/tensors.py
// describes them (address, dtype, shape, strides, extent) and KvLayout checks
// that description against the extent before anything is written. The GIL is
// released around every network wait, remap and gather.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "pikv/client/client.h"
#include "pikv/client/client_config.h"
#include "pikv/client/prompt.h"
#include "pikv/common/version.h"
#include "pikv/coord/find_controllers.h"
#include "pikv/device/model_config.h"
#ifdef PIKV_HAVE_CUDA
#include "pikv/device/cuda_memory.h"
#include "pikv/device/remap_cuda.h"
#endif
#include "pikv/rpc/admin_client.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace pikv::python {
namespace {

// A failed Status on its way to Python: the module's translator raises the
// class of pikv.errors for its code, with its message. Callers on the
// engine's hot path (the connector core) catch it and degrade.
struct StatusError : std::runtime_error {
  explicit StatusError(Status s) : std::runtime_error(s.ToString()), status(std::move(s)) {}
  Status status;
};
[[noreturn]] void Raise(const Status& s) { throw StatusError(s); }
[[noreturn]] void RaiseInvalid(std::string message) { Raise(InvalidArgument(std::move(message))); }

void TranslateStatusError(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const StatusError& e) {
    try {
      // A peer's message need not be UTF-8: what is not shows as U+FFFD.
      const std::string& m = e.status.message();
      py::object message = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(m.data(), static_cast<Py_ssize_t>(m.size()), "replace"));
      py::object error =
          py::module_::import("pikv.errors")
              .attr("from_status")(std::string(ErrorCodeName(e.status.code())), message);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    } catch (py::error_already_set& import_failed) {
      import_failed.restore();
    }
  }
}
template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(*r);
}

DType DTypeOf(const std::string& name) {
  auto d = ParseDType(name);
  if (!d) RaiseInvalid("dtype '" + name + "' is not f32, f16 or bf16");
  return *d;
}

py::object ModelInfo(const std::string& path, uint32_t max_model_len, const std::string& dtype) {
  std::ifstream file(path);
  if (!file) RaiseInvalid("cannot read " + path);
  std::stringstream text;
  text << file.rdbuf();
  device::ModelConfigOptions options;
  options.max_model_len = max_model_len;
  if (!dtype.empty()) options.dtype = DTypeOf(dtype);
  auto spec = Take(device::ReadModelConfig(text.str(), options, path));
  return py::module_::import("json").attr("loads")(device::DescribeModelJson(spec));
}

// The engine's paged KV tensors, one per layer, as pikv::device::PagedLayout.
// `layer_ptrs` and `layer_bytes` give each layer's address and the bytes its
// tensor may be addressed in; the strides must stay inside them.
device::PagedLayout MakeLayout(const std::string& dtype, const std::string& kv_format,
                               uint32_t num_kv_heads, uint32_t head_dim, uint32_t block_size,
                               uint64_t num_blocks, std::vector<int64_t> strides,
                               std::vector<uintptr_t> layer_ptrs, std::vector<uint64_t> layer_bytes,
                               bool host) {
  if (kv_format != "standard" && kv_format != "mla")
    RaiseInvalid("kv_format '" + kv_format + "' is not standard or mla");
  if (strides.size() != 4) RaiseInvalid("strides: (plane, block, offset, head)");
  if (layer_ptrs.size() != layer_bytes.size() || layer_ptrs.empty())
    RaiseInvalid("one address and one size per layer");
  device::PagedLayout l;
  l.dtype = DTypeOf(dtype);
  l.kv_format = kv_format == "mla" ? KvFormat::kMla : KvFormat::kStandard;
  l.num_kv_heads = num_kv_heads;
  l.head_dim = head_dim;
  l.block_size = block_size;
  l.num_blocks = num_blocks;
  l.stride_plane = strides[0];
  l.stride_block = strides[1];
  l.stride_offset = strides[2];
  l.stride_head = strides[3];
  l.host = host;
  if (Status s = l.Validate(); !s.ok()) Raise(s);
  const uint64_t extent = l.ElementsPerLayer() * DTypeSize(l.dtype);
  for (size_t i = 0; i < layer_ptrs.size(); ++i) {
    if (layer_ptrs[i] == 0) RaiseInvalid("layer " + std::to_string(i) + " is null");
    if (extent > layer_bytes[i]) {
      RaiseInvalid("layer " + std::to_string(i) + ": the layout spans " + std::to_string(extent) +
                   " bytes but the tensor holds " + std::to_string(layer_bytes[i]));
    }
    l.layers.push_back(reinterpret_cast<void*>(layer_ptrs[i]));
  }
  return l;
}

// Client::PrepareRemap as a dict: the payload's place in the object, its
// geometry and K form, each layer's rotation set (-1: NoPE) and the
// rotations, float32 [sets][rows][rotary_dim / 2].
py::dict PrepareRemap(client::Client& c, const SharedBuffer& object, const client::ChunkPlan& chunk,
                      const std::vector<int64_t>& slots, const device::PagedLayout& cache) {
  Result<device::RemapTables> prepared = InvalidArgument("not prepared");
  {
    py::gil_scoped_release nogil;
    prepared = c.PrepareRemap(object, chunk, slots, cache);
  }
  device::RemapTables t = Take(std::move(prepared));
  const ChunkGeometry& g = t.header.geometry;
  const device::RopeSpec& rope = c.options().rope.main();
  const py::ssize_t half = rope.rotary_dim / 2;
  const py::ssize_t sets = half ? static_cast<py::ssize_t>(t.cos.size()) / (t.rows * half) : 0;
  auto table = [&](const std::vector<float>& v) {
    py::array_t<float> a({sets, static_cast<py::ssize_t>(t.rows), half});
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
  };
  return py::dict("payload_offset"_a = t.header.header_size,
                  "payload_nbytes"_a = t.header.payload_size, "num_layers"_a = g.num_layers,
                  "num_tokens"_a = g.num_tokens, "num_kv_heads"_a = g.num_kv_heads,
                  "head_dim"_a = g.head_dim, "dtype"_a = std::string(DTypeName(g.dtype)),
                  "kv_format"_a = std::string(KvFormatName(g.kv_format)),
                  "pre_rope"_a = t.header.k_form == KForm::kPreRope,
                  "layer_rotation"_a = t.layer_spec, "rotary_dim"_a = rope.rotary_dim,
                  "rope_offset"_a = rope.rope_offset, "neox"_a = rope.style == RopeStyle::kNeox,
                  "cos"_a = table(t.cos), "sin"_a = table(t.sin));
}

#ifdef PIKV_HAVE_CUDA
// The fused CUDA remap (device/src/remap_cuda.cu) of a chunk pikv.device
// has checked (prepare_remap) and staged on the device: every layer in one
// launch on `stream`. Addresses are the device's (torch's data_ptr): the
// payload, the slots (int64, one per token, -1 skipped) and prepare_remap's
// cos and sin tables. The cache must be described by its real strides.
void RemapCuda(client::Client& c, const SharedBuffer& object, const device::PagedLayout& cache,
               uintptr_t payload, uintptr_t slots, uintptr_t cos, uintptr_t sin, uintptr_t stream) {
  if (cache.host) RaiseInvalid("remap_cuda writes a CUDA device's cache, not host memory");
  auto header = ParseChunkHeader(object.span());
  if (!header.ok()) Raise(header.status());
  // What the kernel indexes by, checked here (the slots were, by
  // prepare_remap, against this cache's geometry): a mismatch would be an
  // access outside the device's memory, not an error.
  if (Status s = cache.Validate(); !s.ok()) Raise(s);
  const ChunkGeometry& g = header->geometry;
  if (g.dtype != cache.dtype || g.kv_format != cache.kv_format ||
      g.num_kv_heads != cache.num_kv_heads || g.head_dim != cache.head_dim ||
      g.num_layers != cache.layers.size() || header->rope_spec != c.options().rope.Signature())
    RaiseInvalid("remap_cuda: the object is not of this cache's geometry or RoPE");
  Status s = device::RemapCudaLaunch(
      *header, reinterpret_cast<const uint8_t*>(payload), reinterpret_cast<const int64_t*>(slots),
      reinterpret_cast<const float*>(cos), reinterpret_cast<const float*>(sin), c.options().rope,
      cache, reinterpret_cast<void*>(stream));
  if (!s.ok()) Raise(s);
}
#endif

// The client's counters by their declared names (client_stats.h).
py::dict StatsDict(const client::ClientStats& s) {
  StatsSink sink;
  client::SampleClientStats(s, sink);
  py::dict d;
  for (const MetricSample& sample : sink.Take())
    d[py::str(FieldName(sample))] = std::get<uint64_t>(sample.value);
  return d;
}

// A store running in the background; result() waits (without the GIL).
struct PendingStore {
  std::shared_ptr<std::future<Status>> future;
  bool Wait() {
    py::gil_scoped_release nogil;
    return future->get().ok();
  }
  bool Done() const {
    return future->wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
};

// A key given in hex ("" = none), or raised as InvalidArgument.
std::optional<ChunkKey> KeyOrNone(const std::string& hex) {
  if (hex.empty()) return std::nullopt;
  auto key = ChunkKey::FromHex(hex);
  if (!key) RaiseInvalid("'" + hex + "' is not a chunk key (32 hex digits)");
  return key;
}

// A chunk's key context from Python: the system prompt's key and the
// scope, both hex ("" = none).
client::KeyContext ContextOf(const std::string& sys_key_hex, const std::string& scope_hex) {
  return {KeyOrNone(sys_key_hex), KeyOrNone(scope_hex)};
}

// A store's future as the Python API returns it: None once it landed
// (wait), a PendingStore otherwise; a failed store raises.
py::object StoreResult(std::future<Status> f, bool wait) {
  if (!wait) return py::cast(PendingStore{std::make_shared<std::future<Status>>(std::move(f))});
  Status s;
  {
    py::gil_scoped_release nogil;
    s = f.get();
  }
  if (!s.ok()) Raise(s);
  return py::none();
}

// Client::StoreWritten with a Python writer. The store runs without the
// GIL (its reserve, put and commit wait on the node); the writer runs on
// this thread with the GIL taken back, over a memoryview released when it
// returns, so a view kept past that cannot reach the memory (the node's, or
// freed, by then). The writer must copy into it and keep nothing made from
// it (a tensor or array over it is not tracked). What it raises becomes a
// failed store, never an exception through C++.
py::object StoreWith(client::Client& c, const std::vector<int32_t>& tokens, size_t payload_nbytes,
                     const py::function& write, int64_t virtual_start, bool wait,
                     const std::string& sys_key_hex, const std::string& scope_hex) {
  const client::KeyContext context = ContextOf(sys_key_hex, scope_hex);
  auto writer = [&](std::span<uint8_t> payload) -> Status {
    py::gil_scoped_acquire gil;
    try {
      py::memoryview view = py::memoryview::from_memory(
          payload.data(), static_cast<py::ssize_t>(payload.size()), /*readonly=*/false);
      write(view);
      view.attr("release")();  // a BufferError (an export still held) fails the store
      return Status::Ok();
    } catch (const py::error_already_set& e) {
      return InvalidArgument(std::string("the payload writer failed: ") + e.what());
    }
  };
  const ChunkKey key = c.KeyOf(tokens, context);
  std::future<Status> f;
  {
    py::gil_scoped_release nogil;
    f = c.StoreWritten(key, tokens, virtual_start, payload_nbytes, writer, !wait, context);
  }
  return StoreResult(std::move(f), wait);
}

py::dict Audit(client::Client& c, const SharedBuffer& object, const client::ChunkPlan& chunk,
               py::buffer recomputed, int64_t start, bool pre_rope) {
  const py::buffer_info info = recomputed.request();
  py::ssize_t step = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; step *= info.shape[d], --d) {
    if (info.shape[d] > 1 && info.strides[d] != step)
      RaiseInvalid("the recomputed payload must be one contiguous buffer");
  }
  const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(info.ptr),
                                       static_cast<size_t>(info.size * info.itemsize));
  Result<client::Client::Audited> audited = InvalidArgument("not audited");
  {
    py::gil_scoped_release nogil;
    audited = c.Audit(object, chunk, bytes, {pre_rope ? KForm::kPreRope : KForm::kRotated, start});
  }
  const client::Client::Audited a = Take(std::move(audited));
  return py::dict("match"_a = a.finding.match, "comparable"_a = a.finding.comparable,
                  "worst"_a = a.finding.worst, "worst_l2"_a = a.finding.worst_l2,
                  "where"_a = a.finding.where, "writer"_a = a.finding.writer,
                  "reported"_a = a.reported);
}

client::ClientOptions LoadOptions(const std::string& path,
                                  const std::map<std::string, std::string>& overrides,
                                  const std::map<std::string, std::string>& defaults) {
  // etcd:// specs too: this module links coord.
  return Take(
      client::LoadClientOptions(path, nullptr, overrides, &coord::FindControllers, defaults));
}

// A controller connection for pikv.Admin: one AdminClient, so its finder
// (the leader it last found) lasts across calls instead of being found
// again each time. Calls are serialised (an AdminClient is one socket).
class AdminConnection {
 public:
  AdminConnection(const std::string& endpoint, int timeout_ms, const std::string& curve_key,
                  const std::string& curve_keyring) {
    std::optional<CurveClientKeys> curve;
    if (auto security = Take(CurveSecurity::Load(curve_key, curve_keyring)))
      curve = Take(security->ForController());
    admin_ = std::make_unique<rpc::AdminClient>(
        coord::FindControllers(endpoint), std::chrono::milliseconds(timeout_ms), std::move(curve));
  }

  py::object Json(MsgType type, const std::vector<std::string>& keys, const std::string& node,
                  const std::string& host, const std::string& engine) {
    std::vector<ChunkKey> parsed;
    for (const auto& k : keys) {
      auto key = ChunkKey::FromHex(k);
      if (!key) RaiseInvalid("'" + k + "' is not a chunk key (32 hex digits)");
      parsed.push_back(*key);
    }
    Result<std::string> text = Unavailable("not asked");
    rpc::AdminArgs args;
    args.node = node;
    args.host = host;
    args.engine = engine;
    {
      py::gil_scoped_release nogil;
      std::lock_guard lock(mu_);
      text = admin_->Json(type, parsed, args);
    }
    return py::module_::import("json").attr("loads")(Take(std::move(text)));
  }

  // The controller the last call went to ("" before any).
  std::string Endpoint() {
    std::lock_guard lock(mu_);
    return admin_->endpoint();
  }

 private:
  std::mutex mu_;
  std::unique_ptr<rpc::AdminClient> admin_;
};

void DefineErrors(py::module_& m) {
  py::register_exception_translator(&TranslateStatusError);
  m.def(
      "status_codes",
      [] {
        std::vector<std::string> names;
        for (const auto& [code, name] : kErrorCodeNames) {
          if (code != ErrorCode::kOk) names.emplace_back(name);
        }
        return names;
      },
      "The names of pikv's failure codes (pikv.errors has a class for each)");
}

void DefineCuda(py::module_& m) {
#ifdef PIKV_HAVE_CUDA
  // Through pikv's own CUDA runtime: a failure is handled here, never left
  // as a pending error for the engine's next launch check.
  m.def(
      "cuda_host_register",
      [](uintptr_t address, size_t size) {
        if (Status s = device::CudaHostRegister(reinterpret_cast<const void*>(address), size,
                                                /*read_only=*/true);
            !s.ok())
          Raise(s);
      },
      "address"_a, "size"_a, "Page-locks read-only host memory for direct copies to CUDA devices");
  m.def("cuda_device_count", &device::CudaDeviceCount,
        "CUDA devices pikv's own runtime sees (0: it cannot run here)");
  m.def(
      "cuda_host_unregister",
      [](uintptr_t address) {
        if (Status s = device::CudaHostUnregister(reinterpret_cast<const void*>(address)); !s.ok())
          Raise(s);
      },
      "address"_a);
#endif
}

void DefineSettings(py::module_& m) {
  m.def("model_info", &ModelInfo, "path"_a, "max_model_len"_a = 0, "dtype"_a = "",
        "What pikv derives from a Hugging Face config.json (pikv model-info)");

  py::class_<client::ClientOptions>(m, "Options")
      .def_static("load", &LoadOptions, "path"_a = "",
                  "overrides"_a = std::map<std::string, std::string>{},
                  "defaults"_a = std::map<std::string, std::string>{},
                  "Settings from `defaults` (the program's own, replacing pikv's), a YAML file, "
                  "PIKV_* variables, then overrides (keys as in deploy/client.example.yaml)")
      .def_readonly("model_id", &client::ClientOptions::model_id)
      .def_readonly("local_node", &client::ClientOptions::local_node)
      .def_readonly("controller", &client::ClientOptions::controller)
      .def_readonly("num_layers", &client::ClientOptions::num_layers)
      .def_readonly("num_kv_heads", &client::ClientOptions::num_kv_heads)
      .def_readonly("head_dim", &client::ClientOptions::head_dim)
      .def_property_readonly(
          "dtype", [](const client::ClientOptions& o) { return std::string(DTypeName(o.dtype)); })
      .def_property_readonly(
          "kv_format",
          [](const client::ClientOptions& o) { return std::string(KvFormatName(o.kv_format)); })
      .def_property_readonly("rope_signature",
                             [](const client::ClientOptions& o) { return o.rope.Signature(); })
      .def_readonly("windowed_layers", &client::ClientOptions::windowed_layers)
      .def_readonly("tenant", &client::ClientOptions::tenant)
      .def_property_readonly(
          "attention_mode",
          [](const client::ClientOptions& o) { return std::string(AttentionModeName(o.mode)); })
      .def_property_readonly(
          "distance_buckets",
          [](const client::ClientOptions& o) { return o.distance_buckets.Name(); })
      .def_readonly("audit_rate", &client::ClientOptions::audit_rate)
      .def_property_readonly("fetch_timeout_ms", [](const client::ClientOptions& o) {
        return static_cast<int64_t>(o.fetch_timeout.count());
      });

  // dynamic_attr: pikv.kv_layout keeps the tensors it describes on the layout,
  // so their memory lives as long as anything can write through it.
  py::class_<device::PagedLayout>(m, "KvLayout", py::dynamic_attr())
      .def(py::init(&MakeLayout), "dtype"_a, "kv_format"_a, "num_kv_heads"_a, "head_dim"_a,
           "block_size"_a, "num_blocks"_a, "strides"_a, "layer_ptrs"_a, "layer_bytes"_a,
           "host"_a = true)
      .def_readonly("host", &device::PagedLayout::host)
      .def_readonly("block_size", &device::PagedLayout::block_size)
      .def_readonly("num_blocks", &device::PagedLayout::num_blocks)
      .def_property_readonly("num_layers",
                             [](const device::PagedLayout& l) { return l.layers.size(); });
}

// What the client's calls return.
void DefineResults(py::module_& m) {
  py::class_<rpc::ZeroCopyClient::Arena>(m, "ZeroCopyArena")
      .def_property_readonly(
          "address",
          [](const rpc::ZeroCopyClient::Arena& a) { return reinterpret_cast<uintptr_t>(a.data); })
      .def_readonly("size", &rpc::ZeroCopyClient::Arena::size);

  py::class_<client::ChunkPlan>(m, "ChunkPlan")
      .def_property_readonly("key", [](const client::ChunkPlan& c) { return c.key.Hex(); })
      .def_readonly("segment", &client::ChunkPlan::segment)
      .def_property_readonly(
          "source", [](const client::ChunkPlan& c) { return std::string(SourceName(c.source)); })
      .def_readonly("peer_id", &client::ChunkPlan::peer_id)
      .def_readonly("peer_endpoint", &client::ChunkPlan::peer_endpoint)
      .def_readonly("actual_start", &client::ChunkPlan::actual_start)
      .def_readonly("encoded_start", &client::ChunkPlan::encoded_start)
      .def_readonly("adjacent", &client::ChunkPlan::adjacent);

  py::class_<client::Plan>(m, "Plan")
      .def_readonly("chunks", &client::Plan::chunks)
      .def_readonly("local_node_answered", &client::Plan::local_node_answered)
      .def_readonly("controller_answered", &client::Plan::controller_answered);

  // Read-only bytes, viewable without a copy (memoryview, numpy, torch).
  py::class_<SharedBuffer>(m, "ChunkObject", py::buffer_protocol())
      .def_buffer([](const SharedBuffer& b) {
        return py::buffer_info(const_cast<uint8_t*>(b.data()), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {1}, /*readonly=*/true);
      })
      .def("__len__", &SharedBuffer::size)
      .def_property_readonly("nbytes", &SharedBuffer::size);

  py::class_<PendingStore>(m, "PendingStore")
      .def("result", &PendingStore::Wait, "Waits for the put; True if it landed (once)")
      .def("done", &PendingStore::Done, "Whether the put has ended (result() will not wait)");
}

// (source, peer_id, peer_endpoint[, adjacent]) per chunk, as Python holds
// a plan's.
std::vector<client::PlannedSource> PlannedSources(const std::vector<py::tuple>& given) {
  std::vector<client::PlannedSource> out;
  for (const py::tuple& t : given) {
    if (t.size() != 3 && t.size() != 4)
      RaiseInvalid("planned sources: (source, peer_id, peer_endpoint[, adjacent]) per chunk");
    const auto source = t[0].cast<std::string>();
    const std::optional<client::Source> parsed = client::ParseSource(source);
    if (!parsed) Raise(InvalidArgument("planned sources: no source '" + source + "'"));
    out.push_back({*parsed, t[1].cast<std::string>(), t[2].cast<std::string>(),
                   t.size() == 4 && t[3].cast<bool>()});
  }
  return out;
}

py::list Fetch(client::Client& c, client::Plan& plan) {
  std::vector<Result<SharedBuffer>> got;
  {
    py::gil_scoped_release nogil;
    got = c.Fetch(plan);
  }
  py::list out;
  for (auto& r : got) out.append(r.ok() ? py::cast(std::move(*r)) : py::none());
  return out;
}

py::object StoreFromCache(client::Client& c, const std::vector<int32_t>& tokens,
                          const device::PagedLayout& cache, const std::vector<int64_t>& slots,
                          int64_t virtual_start, bool wait, const std::string& sys_key_hex,
                          const std::string& scope_hex) {
  const client::KeyContext context = ContextOf(sys_key_hex, scope_hex);
  const ChunkKey key = c.KeyOf(tokens, context);
  std::future<Status> f;
  {
    py::gil_scoped_release nogil;
    f = c.StoreFromCache(key, tokens, cache, slots, virtual_start, !wait, context);
  }
  return StoreResult(std::move(f), wait);
}

py::object ZeroCopyArena(client::Client& c) {
  std::optional<rpc::ZeroCopyClient::Arena> arena;
  {
    py::gil_scoped_release nogil;  // may (re)connect the zero-copy channel
    arena = c.ZeroCopyArena();
  }
  if (!arena) return py::none();
  return py::cast(*arena);
}

// The prompt Python names: its segments, its scope and, for a store at a
// distance from its system prompt (prefixed mode only), that distance.
client::ChunkedPrompt PromptOf(const client::Client& c, std::vector<std::vector<int32_t>> segments,
                               const std::string& scope_hex, int64_t distance) {
  auto prompt = Take(client::FromSegments(std::move(segments)));
  prompt.scope = KeyOrNone(scope_hex);
  if (distance < 0 || distance > client::DistanceBuckets::kMaxDistance)
    RaiseInvalid("distance " + std::to_string(distance) + " is out of range");
  if (distance > 0 && c.options().mode != AttentionMode::kPrefixed)
    RaiseInvalid("a distance from the system prompt needs attention-mode prefixed");
  prompt.distance = distance;
  return prompt;
}

// Client.plan: a plan of its own, or (with `sources`) another process's.
client::Plan MakePlan(client::Client& c, std::vector<std::vector<int32_t>> segments,
                      std::optional<std::vector<py::tuple>> sources, bool local_node_answered,
                      const std::string& scope_hex, int64_t distance, bool adjacent_fallback) {
  client::ChunkedPrompt prompt = PromptOf(c, std::move(segments), scope_hex, distance);
  prompt.adjacent_fallback = adjacent_fallback;
  if (sources) return Take(c.PlanFrom(prompt, PlannedSources(*sources), local_node_answered));
  py::gil_scoped_release nogil;
  return c.MakePlan(prompt);
}

// Client.build_object: the chunk object over a contiguous payload.
SharedBuffer BuildObject(const client::Client& c, const std::vector<int32_t>& tokens,
                         py::buffer payload, int64_t virtual_start, bool pre_rope,
                         const std::string& sys_key_hex, const std::string& scope_hex) {
  const py::buffer_info info = payload.request();
  py::ssize_t step = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; step *= info.shape[d], --d) {
    if (info.shape[d] > 1 && info.strides[d] != step)
      RaiseInvalid("the payload must be one contiguous buffer");
  }
  const client::KeyContext context = ContextOf(sys_key_hex, scope_hex);
  const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(info.ptr),
                                       static_cast<size_t>(info.size * info.itemsize));
  return Take(c.BuildObject(c.KeyOf(tokens, context), tokens, virtual_start, bytes,
                            pre_rope ? KForm::kPreRope : KForm::kRotated, context));
}

// Client's keys, asking nobody: a chunk's, a prompt's, a distance bucket's.
void DefineKeys(py::class_<client::Client>& cls) {
  cls.def(
         "key_of",
         [](const client::Client& c, const std::vector<int32_t>& tokens,
            const std::string& sys_key_hex, const std::string& scope_hex) {
           return c.KeyOf(tokens, ContextOf(sys_key_hex, scope_hex)).Hex();
         },
         "tokens"_a, "sys_key"_a = "", "scope"_a = "",
         "The chunk key of `tokens` (hex); in prefixed mode, of a chunk computed after the "
         "prefix whose key is `sys_key`; in `scope` (hex, a request's sub-namespace) if given")
      .def(
          "plan_keys",
          [](const client::Client& c, std::vector<std::vector<int32_t>> segments,
             const std::string& scope_hex) {
            return c.PlanKeys(PromptOf(c, std::move(segments), scope_hex, 0));
          },
          "segments"_a, "scope"_a = "",
          "The prompt's chunks keyed and placed as plan would, every source a miss; asks nobody")
      .def(
          "bucket_of",
          [](const client::Client& c, int64_t distance) {
            return c.options().distance_buckets.BucketOf(distance);
          },
          "distance"_a,
          "The distance from the system prompt a document used `distance` tokens after it is "
          "stored at (the setting distance-buckets)")
      .def(
          "prefix_key_at",
          [](const client::Client&, const std::string& sys_key_hex, int64_t distance) {
            const std::optional<ChunkKey> key = KeyOrNone(sys_key_hex);
            if (!key) RaiseInvalid("prefix_key_at: no system prompt key");
            if (distance < 0 || distance > client::DistanceBuckets::kMaxDistance)
              RaiseInvalid("distance " + std::to_string(distance) + " is out of range");
            return PrefixKeyAt(*key, distance).Hex();
          },
          "sys_key"_a, "distance"_a,
          "The context key (hex) of a chunk computed `distance` tokens after the system prompt "
          "whose key is `sys_key`: what key_of's and store's sys_key take for it");
}

void DefineClient(py::module_& m) {
  py::class_<client::Client> cls(m, "Client");
  DefineKeys(cls);
  cls.def(py::init<client::ClientOptions>(), "options"_a)
      .def_property_readonly("options", &client::Client::options)
      .def("plan", &MakePlan, "segments"_a, "sources"_a = py::none(),
           "local_node_answered"_a = true, "scope"_a = "", "distance"_a = 0,
           "adjacent_fallback"_a = true,
           "A source per chunk for [system, chunks..., question]; with `sources` "
           "((source, peer_id, peer_endpoint) per chunk, and whether the local node answered, "
           "as another process's plan gave them), that plan, asking nobody. `distance`: a "
           "prompt that stores its last segment that far after the system prompt (which is "
           "then loaded encoded that far back). `adjacent_fallback`: a chunk whose distance "
           "bucket's copy is found nowhere is planned from its adjacent copy where found "
           "(False: what precompute asks)")
      .def("fetch", &Fetch, "plan"_a,
           "The plan's chunk objects, verified, in plan order; None for a miss")
      .def(
          "remap",
          [](client::Client& c, const SharedBuffer& object, const client::ChunkPlan& chunk,
             const std::vector<int64_t>& slots, const device::PagedLayout& cache, int threads) {
            Status s;
            {
              py::gil_scoped_release nogil;
              s = c.Remap(object, chunk, slots, cache, threads);
            }
            if (!s.ok()) Raise(s);
          },
          "object"_a, "chunk"_a, "slots"_a, "cache"_a, "threads"_a = 1)
      .def("build_object", &BuildObject, "tokens"_a, "payload"_a, "virtual_start"_a = 0,
           "pre_rope"_a = false, "sys_key"_a = "", "scope"_a = "",
           "The chunk object of `tokens` over a contiguous payload [layer][k|v][token][head][dim] "
           "(K rotated at virtual_start, or pre-RoPE), stored nowhere")
      .def(
          "check_layout",
          [](const client::Client& c, const device::PagedLayout& cache) {
            if (Status s = c.CheckLayout(cache); !s.ok()) Raise(s);
          },
          "cache"_a, "Raises unless the cache's geometry and dtype are this client's namespace")
      .def("prepare_remap", &PrepareRemap, "object"_a, "chunk"_a, "slots"_a, "cache"_a,
           "Every check remap makes, and its rotations, for a remap on the engine's device "
           "(pikv.device); writes nothing")
#ifdef PIKV_HAVE_CUDA
      .def("remap_cuda", &RemapCuda, "object"_a, "cache"_a, "payload"_a, "slots"_a, "cos"_a,
           "sin"_a, "stream"_a,
           "The fused CUDA remap of a chunk prepare_remap checked, staged on the device")
#endif
      .def("zero_copy_arena", &ZeroCopyArena,
           "The local node's arena as leased objects are mapped (address, size; kept mapped "
           "while the result lives), or None without a zero-copy channel")
      .def("lease_held", &client::Client::LeaseHeld, "chunk"_a,
           "False once the node may reuse a leased object's memory")
      .def("store_with", &StoreWith, "tokens"_a, "payload_nbytes"_a, "write"_a,
           "virtual_start"_a = 0, "wait"_a = true, "sys_key"_a = "", "scope"_a = "",
           "Stores the chunk of `tokens` whose payload write(memoryview) puts straight into "
           "the object (in the local node's arena when it lends one)")
      .def("store", &StoreFromCache, "tokens"_a, "cache"_a, "slots"_a, "virtual_start"_a = 0,
           "wait"_a = true, "sys_key"_a = "", "scope"_a = "",
           "Gathers a chunk by slots out of the cache and stores it under its key, "
           "key_of(tokens) (in prefixed mode after the system prompt whose key is `sys_key`, "
           "hex); wait=False returns a PendingStore (the gather "
           "is done either way)")
      .def("should_audit", &client::Client::ShouldAudit,
           "True for the options' audit_rate share of calls: audit this hit")
      .def("audit", &Audit, "object"_a, "chunk"_a, "recomputed"_a, "start"_a = 0,
           "pre_rope"_a = false,
           "Compares a fetched chunk with the engine's own recomputation (a contiguous payload "
           "[layer][k|v][token][head][dim] in the KV dtype, K rotated at positions start.. "
           "(the chunk alone: 0) or pre-RoPE), each brought to one form first; a mismatch is "
           "reported to the controller, which drops the chunk everywhere. Returns {match, "
           "comparable (false: not judged, not reported, do not use it), worst, worst_l2 (in "
           "units of their tolerances: above 1 is a mismatch), where, writer, reported}")
      .def("stats", [](const client::Client& c) { return StatsDict(c.Stats()); });
}

void DefineAdmin(py::module_& m) {
  py::enum_<MsgType>(m, "AdminQuery")
      .value("nodes", MsgType::kAdminNodes)
      .value("stats", MsgType::kAdminStats)
      .value("health", MsgType::kAdminHealth)
      .value("locate", MsgType::kLocate)
      .value("pin", MsgType::kAdminPin)
      .value("unpin", MsgType::kAdminUnpin)
      .value("evict", MsgType::kAdminEvict)
      .value("clear", MsgType::kAdminClear)
      .value("revoke", MsgType::kAdminRevoke);
  py::class_<AdminConnection>(m, "AdminConnection",
                              "A connection to the controller (its leader found once, followed "
                              "across failovers) for admin queries")
      .def(py::init<const std::string&, int, const std::string&, const std::string&>(),
           "endpoint"_a, "timeout_ms"_a, "curve_key"_a = "", "curve_keyring"_a = "")
      .def("json", &AdminConnection::Json, "query"_a, "keys"_a = std::vector<std::string>{},
           "node"_a = "", "host"_a = "", "engine"_a = "",
           "The controller's document for an admin query (over CURVE with a key and keyring)")
      .def_property_readonly("endpoint", &AdminConnection::Endpoint,
                             "The controller the last call went to");
}

}  // namespace

PYBIND11_MODULE(_pikv, m) {
  m.doc() = "pikv's C++ client, model-config reader and admin client";
  m.attr("__version__") = std::string(Version());
  DefineErrors(m);
  DefineCuda(m);
  DefineSettings(m);
  DefineResults(m);
  DefineClient(m);
  DefineAdmin(m);
}

}  // namespace pikv::python
