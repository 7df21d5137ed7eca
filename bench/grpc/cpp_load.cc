// bench/grpc's load client: closed-loop gRPC load on gRPC C++ 1.51's callback API against any
// grpc.testing.TestService server (cpp_server here; eddy's later). N channels, each its own
// TCP connection (a unique channel argument and a local subchannel pool, so no two share a
// subchannel), with M calls outstanding on each; every call must end with grpc-status OK.
//
//   cpp_load --server_host H --server_port P --mode unary|server_streaming|ping_pong
//            [--size 1024] [--connections N] [--streams M] [--duration S] [--warmup S]
//            [--messages K] [--server_pid PID]
//
// What one "call" is, per mode (latency is per call, from its start to its end):
//   unary             one UnaryCall: a request of --size zero bytes asking for --size back
//   server_streaming  one StreamingOutputCall asking for K (--messages, default 10) responses
//                     of --size bytes; "messages" counts the responses
//   ping_pong         one round trip on a FullDuplexCall stream that each slot keeps open the
//                     whole run: a request of --size bytes, its response of --size bytes (as
//                     gRPC's streaming ping-pong benchmark counts)
// After --warmup seconds (default 1) it counts for --duration seconds (default 5), then prints
// one line of JSON: {"mode":..,"size":..,"connections":..,"streams":..,"calls":..,
// "seconds":..,"calls_per_s":..,"p50_us":..,"p99_us":..,"errors":..,"client_cpu_s":..} with
// "messages" in server_streaming, and "server_cpu_s" (utime+stime of /proc/PID/stat over the
// counted seconds) given --server_pid. Exits 1 when a call failed.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flags.h"
#include "grpc/testing/test.grpc.pb.h"

using Clock = std::chrono::steady_clock;
using grpc::ClientContext;
using grpc::Status;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;
using grpc::testing::TestService;

namespace {

enum Phase { kWarmup, kCounting, kStopping };
std::atomic<int> g_phase{kWarmup};
std::atomic<long> g_errors{0};
std::mutex g_error_mu;
std::string g_first_error;

void Error(const std::string& what) {
  if (g_errors.fetch_add(1) == 0) {
    std::lock_guard<std::mutex> lock(g_error_mu);
    g_first_error = what;
  }
}

// One slot: one outstanding call (or one ping-pong stream). Its calls follow one another,
// so what it counts needs no lock; main reads it after the slot is done.
struct Slot {
  TestService::Stub* stub = nullptr;
  std::vector<uint32_t> latencies_us;  // the counted calls'
  long messages = 0;                   // server_streaming: the counted calls' responses
  bool done = false;
};

struct Done {
  std::mutex mu;
  std::condition_variable cv;
  long running = 0;
  void Finish(Slot* s) {
    std::lock_guard<std::mutex> lock(mu);
    s->done = true;
    if (--running == 0) cv.notify_all();
  }
};
Done g_done;

void Record(Slot* s, Clock::time_point start, long messages = 0) {
  if (g_phase.load(std::memory_order_relaxed) != kCounting) return;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  s->latencies_us.push_back(static_cast<uint32_t>(us));
  s->messages += messages;
}

// unary: one UnaryCall after another.
class Unary {
 public:
  Unary(Slot* slot, int size) : slot_(slot) {
    req_.set_response_size(size);
    req_.mutable_payload()->set_body(std::string(size, '\0'));
  }
  void Start() {
    if (g_phase.load() == kStopping) {
      g_done.Finish(slot_);
      delete this;
      return;
    }
    ctx_ = std::make_unique<ClientContext>();
    start_ = Clock::now();
    slot_->stub->async()->UnaryCall(ctx_.get(), &req_, &resp_, [this](Status s) {
      if (!s.ok()) {
        Error("UnaryCall: status " + std::to_string(s.error_code()) + " " + s.error_message());
      } else if (resp_.payload().body().size() != static_cast<size_t>(req_.response_size())) {
        Error("UnaryCall: a response of " + std::to_string(resp_.payload().body().size()) +
              " bytes");
      } else {
        Record(slot_, start_);
      }
      if (!s.ok()) {  // a failing server is not hammered: this slot stops
        g_done.Finish(slot_);
        delete this;
        return;
      }
      Start();
    });
  }

 private:
  Slot* slot_;
  SimpleRequest req_;
  SimpleResponse resp_;
  std::unique_ptr<ClientContext> ctx_;
  Clock::time_point start_;
};

// server_streaming: one StreamingOutputCall of K responses after another.
class ServerStreaming : public grpc::ClientReadReactor<StreamingOutputCallResponse> {
 public:
  ServerStreaming(Slot* slot, const StreamingOutputCallRequest* req) : slot_(slot), req_(req) {}
  void Start() {
    if (g_phase.load() == kStopping) {
      g_done.Finish(slot_);
      delete this;
      return;
    }
    start_ = Clock::now();
    slot_->stub->async()->StreamingOutputCall(&ctx_, req_, this);
    StartRead(&resp_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the end: OnDone follows
    received_++;
    StartRead(&resp_);
  }
  void OnDone(const Status& s) override {
    long want = req_->response_parameters_size();
    bool good = s.ok() && received_ == want;
    if (!s.ok())
      Error("StreamingOutputCall: status " + std::to_string(s.error_code()) + " " +
            s.error_message());
    else if (received_ != want)
      Error("StreamingOutputCall: " + std::to_string(received_) + " responses");
    else
      Record(slot_, start_, received_);
    Slot* slot = slot_;
    const StreamingOutputCallRequest* req = req_;
    delete this;  // a reactor serves one call: the next gets a new one
    if (!good) {
      g_done.Finish(slot);
      return;
    }
    (new ServerStreaming(slot, req))->Start();
  }

 private:
  Slot* slot_;
  const StreamingOutputCallRequest* req_;
  ClientContext ctx_;
  StreamingOutputCallResponse resp_;
  long received_ = 0;
  Clock::time_point start_;
};

// ping_pong: one FullDuplexCall stream for the whole run, a request and its response at a time.
class PingPong : public grpc::ClientBidiReactor<StreamingOutputCallRequest,
                                                StreamingOutputCallResponse> {
 public:
  PingPong(Slot* slot, int size) : slot_(slot) {
    req_.add_response_parameters()->set_size(size);
    req_.mutable_payload()->set_body(std::string(size, '\0'));
    size_ = size;
  }
  void Start() {
    slot_->stub->async()->FullDuplexCall(&ctx_, this);
    Send();
    StartCall();
  }
  // The next request goes once both the last write and its response are done: the two
  // reactions may run at once on different threads.
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Error("FullDuplexCall: a write failed");
      return;  // the stream is broken: OnDone follows
    }
    Step();
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      if (!half_closed_) Error("FullDuplexCall: the stream ended early");
      return;
    }
    if (resp_.payload().body().size() != static_cast<size_t>(size_)) {
      Error("FullDuplexCall: a response of " + std::to_string(resp_.payload().body().size()) +
            " bytes");
    } else {
      Record(slot_, start_);
    }
    Step();
  }
  void OnDone(const Status& s) override {
    if (!s.ok())
      Error("FullDuplexCall: status " + std::to_string(s.error_code()) + " " + s.error_message());
    g_done.Finish(slot_);
    delete this;
  }

 private:
  void Send() {
    pending_.store(2);
    start_ = Clock::now();
    StartWrite(&req_);
    StartRead(&resp_);
  }
  void Step() {
    if (pending_.fetch_sub(1) != 1) return;
    if (g_phase.load() == kStopping || g_errors.load() > 0) {
      half_closed_ = true;
      StartWritesDone();
      StartRead(&resp_);  // the end of the stream: OnReadDone(false), then OnDone
      return;
    }
    Send();
  }
  Slot* slot_;
  int size_;
  ClientContext ctx_;
  StreamingOutputCallRequest req_;
  StreamingOutputCallResponse resp_;
  std::atomic<int> pending_{0};
  bool half_closed_ = false;
  Clock::time_point start_;
};

// utime + stime of /proc/PID/stat, in seconds; -1 if unreadable.
double CpuSeconds(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(f, line)) return -1;
  size_t paren = line.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(line.substr(paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; rest >> field; i++) {  // field 3 is the state
    if (i == 14 || i == 15) ticks += std::stod(field);
    if (i == 15) break;
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "cpp_load --server_host H --server_port P --mode unary|server_streaming|ping_pong "
      "[--size 1024] [--connections N] [--streams M] [--duration S] [--warmup S] "
      "[--messages K] [--server_pid PID]";
  eddy_grpc::Flags flags(argc, argv,
                         {"server_host", "server_port", "mode", "size", "connections", "streams",
                          "duration", "warmup", "messages", "server_pid"},
                         {}, usage);
  if (!flags.Has("server_port")) eddy_grpc::Flags::Die(usage, "--server_port is required");
  std::string mode = flags.Str("mode", "unary");
  if (mode != "unary" && mode != "server_streaming" && mode != "ping_pong")
    eddy_grpc::Flags::Die(usage, "--mode: unary, server_streaming or ping_pong");
  int size = static_cast<int>(flags.Int("size", 1024));
  int conns = static_cast<int>(flags.Int("connections", 1));
  int streams = static_cast<int>(flags.Int("streams", 1));
  int messages = static_cast<int>(flags.Int("messages", 10));
  double duration = flags.Double("duration", 5), warmup = flags.Double("warmup", 1);
  std::string server_pid = flags.Str("server_pid");
  if (size < 0 || conns < 1 || streams < 1 || messages < 1 || duration <= 0 || warmup < 0)
    eddy_grpc::Flags::Die(usage, "sizes and counts must be positive");
  std::string target = flags.Str("server_host", "127.0.0.1") + ":" +
                       std::to_string(flags.Int("server_port", 0));

  // The channels, each connected before the load starts.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<TestService::Stub>> stubs;
  for (int i = 0; i < conns; i++) {
    grpc::ChannelArguments args;
    args.SetInt("eddy.bench.channel", i);  // a distinct subchannel key: its own connection
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    args.SetString(GRPC_ARG_OPTIMIZATION_TARGET, "throughput");
    args.SetMaxReceiveMessageSize(-1);
    auto ch = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "cpp_load: cannot connect to %s\n", target.c_str());
      return 1;
    }
    channels.push_back(ch);
    stubs.push_back(TestService::NewStub(ch));
  }

  StreamingOutputCallRequest stream_req;
  for (int i = 0; i < messages; i++) stream_req.add_response_parameters()->set_size(size);

  std::vector<Slot> slots(static_cast<size_t>(conns) * streams);
  g_done.running = static_cast<long>(slots.size());
  for (size_t i = 0; i < slots.size(); i++) {
    slots[i].stub = stubs[i / streams].get();
    slots[i].latencies_us.reserve(1 << 12);
    if (mode == "unary")
      (new Unary(&slots[i], size))->Start();
    else if (mode == "server_streaming")
      (new ServerStreaming(&slots[i], &stream_req))->Start();
    else
      (new PingPong(&slots[i], size))->Start();
  }

  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  double client0 = CpuSeconds("self"), server0 = server_pid.empty() ? 0 : CpuSeconds(server_pid);
  auto t0 = Clock::now();
  g_phase.store(kCounting);
  std::this_thread::sleep_for(std::chrono::duration<double>(duration));
  g_phase.store(kStopping);
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  double client1 = CpuSeconds("self"), server1 = server_pid.empty() ? 0 : CpuSeconds(server_pid);

  {
    std::unique_lock<std::mutex> lock(g_done.mu);
    if (!g_done.cv.wait_for(lock, std::chrono::seconds(30), [] { return g_done.running == 0; })) {
      std::fprintf(stderr, "cpp_load: %ld calls still running 30 s after the end\n",
                   g_done.running);
      std::fflush(stderr);
      _exit(1);
    }
  }

  std::vector<uint32_t> all;
  long total_messages = 0;
  for (auto& s : slots) {
    all.insert(all.end(), s.latencies_us.begin(), s.latencies_us.end());
    total_messages += s.messages;
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) -> unsigned {
    if (all.empty()) return 0;
    size_t i = static_cast<size_t>(p * static_cast<double>(all.size() - 1) + 0.5);
    return all[std::min(i, all.size() - 1)];
  };
  std::printf("{\"mode\":\"%s\",\"size\":%d,\"connections\":%d,\"streams\":%d,\"calls\":%zu,"
              "\"seconds\":%.3f,\"calls_per_s\":%.1f,\"p50_us\":%u,\"p99_us\":%u,"
              "\"errors\":%ld,\"client_cpu_s\":%.2f",
              mode.c_str(), size, conns, streams, all.size(), seconds,
              static_cast<double>(all.size()) / seconds, pct(0.50), pct(0.99), g_errors.load(),
              client1 - client0);
  if (mode == "server_streaming")
    std::printf(",\"messages\":%ld,\"messages_per_s\":%.1f", total_messages,
                static_cast<double>(total_messages) / seconds);
  if (!server_pid.empty()) std::printf(",\"server_cpu_s\":%.2f", server1 - server0);
  std::printf("}\n");
  std::fflush(stdout);
  if (g_errors.load() > 0) {
    std::fprintf(stderr, "cpp_load: %ld failed calls; the first: %s\n", g_errors.load(),
                 g_first_error.c_str());
    return 1;
  }
  return all.empty() ? 1 : 0;
}
