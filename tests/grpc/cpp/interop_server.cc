// A gRPC interop server on gRPC C++ (Debian's libgrpc++ 1.51, sync API):
// grpc.testing.TestService (EmptyCall, UnaryCall, StreamingInputCall, StreamingOutputCall,
// FullDuplexCall, with Echo Status and Echo Metadata; UnimplementedCall left to the generated
// base class, which answers UNIMPLEMENTED) and grpc.health.v1.Health (gRPC's default health
// service: SERVING for ""). A reference peer for eddy's gRPC client (tests/grpc/interop.sh).
//
//   interop_server --port P [--use_tls --cert FILE --key FILE]
//
// Listens on 127.0.0.1 only; with --port 0 on an ephemeral port, then prints "PORT <n>".
// SIGTERM or SIGINT stop it (status 0).
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "flags.h"
#include "grpc/testing/test.grpc.pb.h"

using grpc::ServerContext;
using grpc::Status;
using grpc::testing::Empty;
using grpc::testing::ResponseParameters;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingInputCallRequest;
using grpc::testing::StreamingInputCallResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;

namespace {

const char kEchoInitial[] = "x-grpc-test-echo-initial";
const char kEchoTrailing[] = "x-grpc-test-echo-trailing-bin";

// Echo Metadata: the two keys go back, in the headers and in the trailers.
void EchoMetadata(ServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(kEchoInitial);
  if (it != md.end()) ctx->AddInitialMetadata(kEchoInitial, std::string(it->second.data(),
                                                                        it->second.size()));
  it = md.find(kEchoTrailing);
  if (it != md.end()) ctx->AddTrailingMetadata(kEchoTrailing, std::string(it->second.data(),
                                                                          it->second.size()));
}

// Echo Status: a request with a response_status ends the call with it.
template <class Request>
bool EchoStatus(const Request& req, Status* status) {
  if (!req.has_response_status() || req.response_status().code() == 0) return false;
  *status = Status(static_cast<grpc::StatusCode>(req.response_status().code()),
                   req.response_status().message());
  return true;
}

void Fill(grpc::testing::Payload* payload, int size) {
  payload->set_body(std::string(size > 0 ? size : 0, '\0'));
}

// Writes one response per ResponseParameters, interval_us before each.
template <class Writer>
bool Respond(Writer* writer, const StreamingOutputCallRequest& req) {
  StreamingOutputCallResponse resp;
  for (const ResponseParameters& p : req.response_parameters()) {
    if (p.interval_us() > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(p.interval_us()));
    Fill(resp.mutable_payload(), p.size());
    if (!writer->Write(resp)) return false;
  }
  return true;
}

class TestServiceImpl final : public grpc::testing::TestService::Service {
 public:
  Status EmptyCall(ServerContext* ctx, const Empty*, Empty*) override {
    EchoMetadata(ctx);
    return Status::OK;
  }

  Status UnaryCall(ServerContext* ctx, const SimpleRequest* req, SimpleResponse* resp) override {
    EchoMetadata(ctx);
    Status status;
    if (EchoStatus(*req, &status)) return status;
    Fill(resp->mutable_payload(), req->response_size());
    return Status::OK;
  }

  Status StreamingInputCall(ServerContext*, grpc::ServerReader<StreamingInputCallRequest>* reader,
                            StreamingInputCallResponse* resp) override {
    StreamingInputCallRequest req;
    int total = 0;
    while (reader->Read(&req)) total += static_cast<int>(req.payload().body().size());
    resp->set_aggregated_payload_size(total);
    return Status::OK;
  }

  Status StreamingOutputCall(ServerContext* ctx, const StreamingOutputCallRequest* req,
                             grpc::ServerWriter<StreamingOutputCallResponse>* writer) override {
    EchoMetadata(ctx);
    if (!Respond(writer, *req)) return Status(grpc::StatusCode::INTERNAL, "write failed");
    Status status;
    if (EchoStatus(*req, &status)) return status;
    return Status::OK;
  }

  // One response per ResponseParameters of each request, as each request comes; a request
  // without any gets none (timeout_on_sleeping_server's "sleeping server").
  Status FullDuplexCall(ServerContext* ctx,
                        grpc::ServerReaderWriter<StreamingOutputCallResponse,
                                                 StreamingOutputCallRequest>* stream) override {
    EchoMetadata(ctx);
    StreamingOutputCallRequest req;
    while (stream->Read(&req)) {
      Status status;
      if (EchoStatus(req, &status)) return status;
      if (!Respond(stream, req)) return Status(grpc::StatusCode::INTERNAL, "write failed");
    }
    return Status::OK;
  }
};

}  // namespace

int main(int argc, char** argv) {
  // The signals wait for sigwait at the end: every thread gRPC starts (the first ones as soon
  // as credentials are made) inherits the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  const char* usage = "interop_server --port P [--use_tls --cert FILE --key FILE]";
  eddy_grpc::Flags flags(argc, argv, {"port", "cert", "key"}, {"use_tls"}, usage);
  if (!flags.Has("port")) eddy_grpc::Flags::Die(usage, "--port is required");
  long port = flags.Int("port", 0);

  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (flags.Bool("use_tls")) {
    if (!flags.Has("cert") || !flags.Has("key"))
      eddy_grpc::Flags::Die(usage, "--use_tls needs --cert and --key");
    grpc::SslServerCredentialsOptions opts;
    opts.pem_key_cert_pairs.push_back(
        {eddy_grpc::ReadFile(flags.Str("key")), eddy_grpc::ReadFile(flags.Str("cert"))});
    creds = grpc::SslServerCredentials(opts);
  }

  grpc::EnableDefaultHealthCheckService(true);
  TestServiceImpl service;
  grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), creds, &selected);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || selected == 0) {
    std::fprintf(stderr, "interop_server: cannot listen on 127.0.0.1:%ld\n", port);
    return 1;
  }
  std::printf("PORT %d\n", selected);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
