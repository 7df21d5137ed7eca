// bench/grpc's baseline server: grpc.testing.TestService on gRPC C++ 1.51's callback API, as
// gRPC's own benchmarks run their callback server (test/cpp/qps/server_callback.cc): one
// server, one listening port, reactors that answer from the thread that read the request, and
// the channel arguments of gRPC's "unconstrained" scenarios (grpc.minimal_stack=1,
// grpc.optimization_target=throughput). The callback API has no thread count of its own to
// set: gRPC core's poller and executor threads (on Linux, epoll1 with a background poller;
// the executor is sized by gRPC to the cores) run the reactions. Served:
//   UnaryCall            a response of response_size zero bytes (Echo Status honoured)
//   StreamingOutputCall  one response per ResponseParameters, back to back (interval_us
//                        ignored: a benchmark does not sleep)
//   FullDuplexCall       ping-pong: one response per request (of response_parameters[0]'s
//                        size, 0 without any), the next read after the write
//   EmptyCall            the empty message
//
//   cpp_server --port P
//
// Listens on 127.0.0.1; with --port 0 on an ephemeral port, then prints "PORT <n>". SIGTERM or
// SIGINT stop it (status 0).
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "flags.h"
#include "grpc/testing/test.grpc.pb.h"

using grpc::CallbackServerContext;
using grpc::Status;
using grpc::testing::Empty;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;

namespace {

// Sets body to n zero bytes, reusing the string when it already has that size.
void Zeros(grpc::testing::Payload* p, int n) {
  if (n < 0) n = 0;
  if (p->body().size() != static_cast<size_t>(n)) p->set_body(std::string(n, '\0'));
}

class Service final : public grpc::testing::TestService::CallbackService {
 public:
  grpc::ServerUnaryReactor* EmptyCall(CallbackServerContext* ctx, const Empty*,
                                      Empty*) override {
    auto* r = ctx->DefaultReactor();
    r->Finish(Status::OK);
    return r;
  }

  grpc::ServerUnaryReactor* UnaryCall(CallbackServerContext* ctx, const SimpleRequest* req,
                                      SimpleResponse* resp) override {
    auto* r = ctx->DefaultReactor();
    if (req->has_response_status() && req->response_status().code() != 0) {
      r->Finish(Status(static_cast<grpc::StatusCode>(req->response_status().code()),
                       req->response_status().message()));
      return r;
    }
    Zeros(resp->mutable_payload(), req->response_size());
    r->Finish(Status::OK);
    return r;
  }

  grpc::ServerWriteReactor<StreamingOutputCallResponse>* StreamingOutputCall(
      CallbackServerContext*, const StreamingOutputCallRequest* req) override {
    class Writer : public grpc::ServerWriteReactor<StreamingOutputCallResponse> {
     public:
      explicit Writer(const StreamingOutputCallRequest* req) : req_(req) { Next(); }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(Status(grpc::StatusCode::UNKNOWN, "write failed"));
          return;
        }
        Next();
      }
      void OnDone() override { delete this; }

     private:
      void Next() {
        if (i_ >= req_->response_parameters_size()) {
          Finish(Status::OK);
          return;
        }
        Zeros(resp_.mutable_payload(), req_->response_parameters(i_++).size());
        StartWrite(&resp_);
      }
      const StreamingOutputCallRequest* req_;
      StreamingOutputCallResponse resp_;
      int i_ = 0;
    };
    return new Writer(req);
  }

  grpc::ServerBidiReactor<StreamingOutputCallRequest, StreamingOutputCallResponse>*
  FullDuplexCall(CallbackServerContext*) override {
    class PingPong
        : public grpc::ServerBidiReactor<StreamingOutputCallRequest,
                                         StreamingOutputCallResponse> {
     public:
      PingPong() { StartRead(&req_); }
      void OnReadDone(bool ok) override {
        if (!ok) {  // the client half-closed (or went away)
          Finish(Status::OK);
          return;
        }
        Zeros(resp_.mutable_payload(),
              req_.response_parameters_size() ? req_.response_parameters(0).size() : 0);
        StartWrite(&resp_);
      }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(Status(grpc::StatusCode::UNKNOWN, "write failed"));
          return;
        }
        StartRead(&req_);
      }
      void OnDone() override { delete this; }

     private:
      StreamingOutputCallRequest req_;
      StreamingOutputCallResponse resp_;
    };
    return new PingPong;
  }
};

}  // namespace

int main(int argc, char** argv) {
  // SIGTERM and SIGINT wait for sigwait: every thread gRPC starts inherits the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  const char* usage = "cpp_server --port P";
  eddy_grpc::Flags flags(argc, argv, {"port"}, {}, usage);
  if (!flags.Has("port")) eddy_grpc::Flags::Die(usage, "--port is required");
  long port = flags.Int("port", 0);

  Service service;
  grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                           grpc::InsecureServerCredentials(), &selected);
  builder.AddChannelArgument(GRPC_ARG_MINIMAL_STACK, 1);
  builder.AddChannelArgument(GRPC_ARG_OPTIMIZATION_TARGET, "throughput");
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || selected == 0) {
    std::fprintf(stderr, "cpp_server: cannot listen on 127.0.0.1:%ld\n", port);
    return 1;
  }
  std::printf("PORT %d\n", selected);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
