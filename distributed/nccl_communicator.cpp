#include "nccl.h"

#include <chrono>
#include <string>
#include <thread>

#if KILN_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace kiln::distributed::nccl {

#if KILN_HAVE_NCCL

namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw DeviceError(std::string("nccl: ") + what + ": " + cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DType d, const char* who) {
  switch (d) {
    case DType::bool_:
    case DType::uint8: return ncclUint8;
    case DType::int8: return ncclInt8;
    case DType::int32: return ncclInt32;
    case DType::uint32: return ncclUint32;
    case DType::int64: return ncclInt64;
    case DType::uint64: return ncclUint64;
    case DType::float16: return ncclFloat16;
    case DType::bfloat16: return ncclBfloat16;
    case DType::float32: return ncclFloat32;
    case DType::float64: return ncclFloat64;
    default:
      throw DTypeError(std::string("nccl ") + who + ": dtype " + std::string(name(d)) + " has no NCCL type");
  }
}

ncclRedOp_t nccl_op(ReduceOp op, DType d) {
  if (d == DType::bool_) return op == ReduceOp::min ? ncclMin : ncclMax;  // logical and / or
  return op == ReduceOp::sum ? ncclSum : op == ReduceOp::max ? ncclMax : ncclMin;
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device, int rank, int size)
      : comm_(comm), device_(device), rank_(rank), size_(size) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (broken_) ncclCommAbort(comm_);
    else ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    run("all_reduce", [&] { return ncclAllReduce(send, recv, count, nccl_type(dtype, "all_reduce"), nccl_op(op, dtype), comm_, stream_); });
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) override {
    run("all_gather", [&] { return ncclAllGather(send, recv, count, nccl_type(dtype, "all_gather"), comm_, stream_); });
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override {
    run("reduce_scatter", [&] {
      return ncclReduceScatter(send, recv, count, nccl_type(dtype, "reduce_scatter"), nccl_op(op, dtype), comm_, stream_);
    });
  }
  void broadcast(void* data, size_t count, DType dtype, int root) override {
    check_rank(root, "broadcast");
    run("broadcast", [&] { return ncclBroadcast(data, data, count, nccl_type(dtype, "broadcast"), root, comm_, stream_); });
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype) override {
    if (send == recv) throw ValueError("nccl all_to_all: send and recv must differ");
    const ncclDataType_t t = nccl_type(dtype, "all_to_all");
    const size_t bytes = count * size_of(dtype);
    run("all_to_all", [&] {
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
        r = ncclSend(static_cast<const char*>(send) + p * bytes, count, t, p, comm_, stream_);
        if (r == ncclSuccess) r = ncclRecv(static_cast<char*>(recv) + p * bytes, count, t, p, comm_, stream_);
      }
      const ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    });
  }
  void send(const void* data, size_t count, DType dtype, int dst, int) override {
    check_rank(dst, "send");
    run("send", [&] { return ncclSend(data, count, nccl_type(dtype, "send"), dst, comm_, stream_); });
  }
  void recv(void* data, size_t count, DType dtype, int src, int) override {
    check_rank(src, "recv");
    run("recv", [&] { return ncclRecv(data, count, nccl_type(dtype, "recv"), src, comm_, stream_); });
  }
  void barrier() override {
    if (!scratch_) check_cuda(cudaSetDevice(device_), "cudaSetDevice"), check_cuda(cudaMalloc(&scratch_, 8), "cudaMalloc");
    all_reduce(scratch_, scratch_, 1, DType::int32, ReduceOp::sum);
  }
  std::shared_ptr<Communicator> split(int color, int key) override {
    if (color < 0) throw ValueError("nccl split: color must be >= 0, got " + std::to_string(color));
    ncclComm_t sub = nullptr;
    run("split", [&] { return ncclCommSplit(comm_, color, key, &sub, nullptr); }, false);
    int r = 0, n = 0;
    ncclCommUserRank(sub, &r);
    ncclCommCount(sub, &n);
    return std::make_shared<NcclCommunicator>(sub, device_, r, n);
  }

 private:
  void check_rank(int r, const char* what) const {
    if (r < 0 || r >= size_)
      throw ValueError(std::string("nccl ") + what + ": rank " + std::to_string(r) + " is outside [0, " +
                       std::to_string(size_) + ")");
  }
  // Enqueues op, then waits for the stream (or the timeout) polling
  // NCCL's asynchronous error state.
  template <class Op>
  void run(const char* what, Op&& op, bool on_stream = true) {
    if (broken_)
      throw CollectiveError(std::string("nccl ") + what + ": the group is broken by an earlier failed collective");
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    const ncclResult_t r = op();
    if (r != ncclSuccess && r != ncclInProgress)
      throw CollectiveError(std::string("nccl ") + what + " on rank " + std::to_string(rank_) + ": " +
                            ncclGetErrorString(r));
    if (!on_stream) return;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(collective_timeout());
    for (;;) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) check_cuda(q, what);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        broken_ = true;
        throw CollectiveError(std::string("nccl ") + what + " on rank " + std::to_string(rank_) + ": " +
                              ncclGetErrorString(async));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        broken_ = true;
        throw CollectiveError(std::string("nccl ") + what + " on rank " + std::to_string(rank_) + " of " +
                              std::to_string(size_) + ": not complete after " + std::to_string(collective_timeout()) +
                              " s (a rank did not join); the communicator is aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  ncclComm_t comm_;
  int device_, rank_, size_;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  bool broken_ = false;
};

}  // namespace

bool is_built() { return true; }

std::vector<std::shared_ptr<Communicator>> make_group(const std::vector<int>& cuda_devices) {
  if (cuda_devices.empty()) throw ValueError("nccl::make_group: expected at least one CUDA device");
  for (size_t i = 0; i < cuda_devices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (cuda_devices[i] == cuda_devices[j])
        throw ValueError("nccl::make_group: cuda:" + std::to_string(cuda_devices[i]) + " appears twice");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  for (int d : cuda_devices)
    if (d < 0 || d >= count)
      throw DeviceError("nccl::make_group: cuda:" + std::to_string(d) + " is absent (" + std::to_string(count) +
                        " CUDA device(s))");
  const int n = static_cast<int>(cuda_devices.size());
  std::vector<ncclComm_t> comms(cuda_devices.size());
  const ncclResult_t r = ncclCommInitAll(comms.data(), n, cuda_devices.data());
  if (r != ncclSuccess) throw CollectiveError(std::string("nccl::make_group: ") + ncclGetErrorString(r));
  std::vector<std::shared_ptr<Communicator>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_shared<NcclCommunicator>(comms[i], cuda_devices[i], i, n));
  return out;
}

std::shared_ptr<Communicator> make_from(Communicator& bootstrap, int cuda_device) {
  ncclUniqueId id{};
  if (bootstrap.rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess)
    throw CollectiveError("nccl::make_from: ncclGetUniqueId failed");
  bootstrap.broadcast(&id, sizeof(id), DType::uint8, 0);
  check_cuda(cudaSetDevice(cuda_device), "cudaSetDevice");
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank());
  if (r != ncclSuccess) throw CollectiveError(std::string("nccl::make_from: ") + ncclGetErrorString(r));
  return std::make_shared<NcclCommunicator>(comm, cuda_device, bootstrap.rank(), bootstrap.size());
}

#else  // !KILN_HAVE_NCCL

namespace {
[[noreturn]] void not_built(const char* what) {
  throw NotBuiltError(std::string("nccl::") + what +
                      ": kiln was built without NCCL (needs the CUDA backend and libnccl; see CMakeLists.txt)");
}
}  // namespace

bool is_built() { return false; }
std::vector<std::shared_ptr<Communicator>> make_group(const std::vector<int>&) { not_built("make_group"); }
std::shared_ptr<Communicator> make_from(Communicator&, int) { not_built("make_from"); }

#endif

}  // namespace kiln::distributed::nccl
