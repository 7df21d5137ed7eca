// A gRPC interop client on gRPC C++ (Debian's libgrpc++ 1.51, sync API): the cases of gRPC's
// doc/interop-test-descriptions.md that need no cloud or proxy. A reference peer for eddy's
// gRPC server (tests/grpc/interop.sh).
//
//   interop_client --server_host H --server_port P --test_case all|NAME[,NAME...]
//                  [--use_tls [--use_test_ca --ca FILE] [--server_host_override NAME]]
//
// "all" is the 14 cases; health_check (grpc.health.v1.Health/Check of "" is SERVING) runs when
// named. Prints "PASS <case>" or "FAIL <case>: <reason>" per case; exits 0 only when all passed.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "flags.h"
#include "grpc/testing/test.grpc.pb.h"

using grpc::ClientContext;
using grpc::Status;
using grpc::StatusCode;
using grpc::testing::Empty;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingInputCallRequest;
using grpc::testing::StreamingInputCallResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;
using grpc::testing::TestService;
using grpc::testing::UnimplementedService;

namespace {

const int kTimeoutSeconds = 20;  // no call of a case should take long: a stuck one fails
const char kEchoInitial[] = "x-grpc-test-echo-initial";
const char kEchoInitialValue[] = "test_initial_metadata_value";
const char kEchoTrailing[] = "x-grpc-test-echo-trailing-bin";
const std::string kEchoTrailingValue("\xab\xab\xab", 3);
const char kWhitespaceMessage[] =
    "\t\ntest with whitespace\r\nand Unicode BMP \xe2\x98\xba and non-BMP \xf0\x9f\x98\x88\t\n";

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void Check(bool cond, const std::string& what) {
  if (!cond) throw Failure(what);
}

std::string Describe(const Status& s) {
  std::ostringstream o;
  o << "status " << s.error_code() << " (\"" << s.error_message() << "\")";
  return o.str();
}

void CheckOk(const Status& s, const std::string& what) {
  Check(s.ok(), what + ": " + Describe(s));
}

void CheckCode(const Status& s, StatusCode want, const std::string& what) {
  std::ostringstream o;
  o << what << ": " << Describe(s) << ", want " << want;
  Check(s.error_code() == want, o.str());
}

void WithDeadline(ClientContext* ctx, std::chrono::microseconds after =
                                          std::chrono::seconds(kTimeoutSeconds)) {
  ctx->set_deadline(std::chrono::system_clock::now() + after);
}

void Zeros(grpc::testing::Payload* p, int n) { p->set_body(std::string(n, '\0')); }

bool BodyOk(const grpc::testing::Payload& p, size_t n) {
  return p.body().size() == n && p.body().find_first_not_of('\0') == std::string::npos;
}

StreamingOutputCallRequest DuplexRequest(int out, int in) {
  StreamingOutputCallRequest r;
  if (out >= 0) r.add_response_parameters()->set_size(out);
  Zeros(r.mutable_payload(), in);
  return r;
}

bool HasMetadata(const std::multimap<grpc::string_ref, grpc::string_ref>& md,
                 const std::string& key, const std::string& value) {
  auto range = md.equal_range(key);
  for (auto it = range.first; it != range.second; ++it)
    if (std::string(it->second.data(), it->second.size()) == value) return true;
  return false;
}

struct Peer {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<TestService::Stub> stub;
};

void EmptyUnary(Peer& p) {
  ClientContext ctx;
  WithDeadline(&ctx);
  Empty req, resp;
  CheckOk(p.stub->EmptyCall(&ctx, req, &resp), "EmptyCall");
}

void LargeUnary(Peer& p) {
  ClientContext ctx;
  WithDeadline(&ctx);
  SimpleRequest req;
  SimpleResponse resp;
  req.set_response_size(314159);
  Zeros(req.mutable_payload(), 271828);
  CheckOk(p.stub->UnaryCall(&ctx, req, &resp), "UnaryCall");
  Check(BodyOk(resp.payload(), 314159),
        "response body of " + std::to_string(resp.payload().body().size()) + " bytes");
}

void ClientStreaming(Peer& p) {
  ClientContext ctx;
  WithDeadline(&ctx);
  StreamingInputCallResponse resp;
  auto writer = p.stub->StreamingInputCall(&ctx, &resp);
  for (int n : {27182, 8, 1828, 45904}) {
    StreamingInputCallRequest req;
    Zeros(req.mutable_payload(), n);
    Check(writer->Write(req), "a write failed");
  }
  writer->WritesDone();
  CheckOk(writer->Finish(), "StreamingInputCall");
  Check(resp.aggregated_payload_size() == 74922,
        "aggregated_payload_size " + std::to_string(resp.aggregated_payload_size()));
}

void ServerStreaming(Peer& p) {
  const std::vector<int> sizes = {31415, 9, 2653, 58979};
  ClientContext ctx;
  WithDeadline(&ctx);
  StreamingOutputCallRequest req;
  for (int n : sizes) req.add_response_parameters()->set_size(n);
  auto reader = p.stub->StreamingOutputCall(&ctx, req);
  StreamingOutputCallResponse resp;
  size_t i = 0;
  while (reader->Read(&resp)) {
    Check(i < sizes.size(), "more than 4 responses");
    Check(BodyOk(resp.payload(), sizes[i]),
          "response " + std::to_string(i) + " of " +
              std::to_string(resp.payload().body().size()) + " bytes");
    i++;
  }
  CheckOk(reader->Finish(), "StreamingOutputCall");
  Check(i == sizes.size(), std::to_string(i) + " responses");
}

void PingPong(Peer& p) {
  const int outs[] = {31415, 9, 2653, 58979}, ins[] = {27182, 8, 1828, 45904};
  ClientContext ctx;
  WithDeadline(&ctx);
  auto stream = p.stub->FullDuplexCall(&ctx);
  StreamingOutputCallResponse resp;
  for (int i = 0; i < 4; i++) {
    Check(stream->Write(DuplexRequest(outs[i], ins[i])), "a write failed");
    Check(stream->Read(&resp), "the stream ended after " + std::to_string(i) + " responses");
    Check(BodyOk(resp.payload(), outs[i]),
          "response of " + std::to_string(resp.payload().body().size()) + " bytes");
  }
  stream->WritesDone();
  Check(!stream->Read(&resp), "a fifth response");
  CheckOk(stream->Finish(), "FullDuplexCall");
}

void EmptyStream(Peer& p) {
  ClientContext ctx;
  WithDeadline(&ctx);
  auto stream = p.stub->FullDuplexCall(&ctx);
  stream->WritesDone();
  StreamingOutputCallResponse resp;
  Check(!stream->Read(&resp), "a response");
  CheckOk(stream->Finish(), "FullDuplexCall");
}

void CancelAfterBegin(Peer& p) {
  ClientContext ctx;
  WithDeadline(&ctx);
  StreamingInputCallResponse resp;
  auto writer = p.stub->StreamingInputCall(&ctx, &resp);
  ctx.TryCancel();
  CheckCode(writer->Finish(), StatusCode::CANCELLED, "StreamingInputCall");
}

void CancelAfterFirstResponse(Peer& p) {
  ClientContext ctx;
  WithDeadline(&ctx);
  auto stream = p.stub->FullDuplexCall(&ctx);
  Check(stream->Write(DuplexRequest(31415, 27182)), "the write failed");
  StreamingOutputCallResponse resp;
  Check(stream->Read(&resp), "no response");
  Check(BodyOk(resp.payload(), 31415), "first response of " +
                                           std::to_string(resp.payload().body().size()) +
                                           " bytes");
  ctx.TryCancel();
  while (stream->Read(&resp)) {
  }
  CheckCode(stream->Finish(), StatusCode::CANCELLED, "FullDuplexCall");
}

void TimeoutOnSleepingServer(Peer& p) {
  ClientContext ctx;
  WithDeadline(&ctx, std::chrono::milliseconds(1));
  auto stream = p.stub->FullDuplexCall(&ctx);
  stream->Write(DuplexRequest(-1, 27182));  // may fail: the deadline may be past already
  StreamingOutputCallResponse resp;
  while (stream->Read(&resp)) {
  }
  CheckCode(stream->Finish(), StatusCode::DEADLINE_EXCEEDED, "FullDuplexCall");
}

void StatusCodeAndMessage(Peer& p, const std::string& message, bool duplex) {
  {
    ClientContext ctx;
    WithDeadline(&ctx);
    SimpleRequest req;
    SimpleResponse resp;
    req.mutable_response_status()->set_code(2);
    req.mutable_response_status()->set_message(message);
    Status s = p.stub->UnaryCall(&ctx, req, &resp);
    CheckCode(s, StatusCode::UNKNOWN, "UnaryCall");
    Check(s.error_message() == message, "unary: message \"" + s.error_message() + "\"");
  }
  if (!duplex) return;
  ClientContext ctx;
  WithDeadline(&ctx);
  auto stream = p.stub->FullDuplexCall(&ctx);
  StreamingOutputCallRequest req = DuplexRequest(-1, 0);
  req.mutable_response_status()->set_code(2);
  req.mutable_response_status()->set_message(message);
  stream->Write(req);
  stream->WritesDone();
  StreamingOutputCallResponse resp;
  while (stream->Read(&resp)) {
  }
  Status s = stream->Finish();
  CheckCode(s, StatusCode::UNKNOWN, "FullDuplexCall");
  Check(s.error_message() == message, "duplex: message \"" + s.error_message() + "\"");
}

void AddEchoMetadata(ClientContext* ctx) {
  ctx->AddMetadata(kEchoInitial, kEchoInitialValue);
  ctx->AddMetadata(kEchoTrailing, kEchoTrailingValue);
}

void CheckEchoed(ClientContext& ctx, const std::string& what) {
  Check(HasMetadata(ctx.GetServerInitialMetadata(), kEchoInitial, kEchoInitialValue),
        what + ": no echoed initial metadata");
  Check(HasMetadata(ctx.GetServerTrailingMetadata(), kEchoTrailing, kEchoTrailingValue),
        what + ": no echoed trailing metadata");
}

void CustomMetadata(Peer& p) {
  {
    ClientContext ctx;
    WithDeadline(&ctx);
    AddEchoMetadata(&ctx);
    SimpleRequest req;
    SimpleResponse resp;
    req.set_response_size(314159);
    Zeros(req.mutable_payload(), 271828);
    CheckOk(p.stub->UnaryCall(&ctx, req, &resp), "UnaryCall");
    Check(BodyOk(resp.payload(), 314159), "unary: wrong response body");
    CheckEchoed(ctx, "unary");
  }
  ClientContext ctx;
  WithDeadline(&ctx);
  AddEchoMetadata(&ctx);
  auto stream = p.stub->FullDuplexCall(&ctx);
  Check(stream->Write(DuplexRequest(314159, 271828)), "the write failed");
  stream->WritesDone();
  StreamingOutputCallResponse resp;
  Check(stream->Read(&resp), "duplex: no response");
  Check(BodyOk(resp.payload(), 314159), "duplex: wrong response body");
  Check(!stream->Read(&resp), "duplex: a second response");
  CheckOk(stream->Finish(), "FullDuplexCall");
  CheckEchoed(ctx, "duplex");
}

void UnimplementedMethod(Peer& p) {
  ClientContext ctx;
  WithDeadline(&ctx);
  Empty req, resp;
  CheckCode(p.stub->UnimplementedCall(&ctx, req, &resp), StatusCode::UNIMPLEMENTED,
            "TestService/UnimplementedCall");
}

void UnimplementedServiceCase(Peer& p) {
  auto stub = UnimplementedService::NewStub(p.channel);
  ClientContext ctx;
  WithDeadline(&ctx);
  Empty req, resp;
  CheckCode(stub->UnimplementedCall(&ctx, req, &resp), StatusCode::UNIMPLEMENTED,
            "UnimplementedService/UnimplementedCall");
}

// Not one of gRPC's interop cases, so not in "all": grpc.health.v1.Health/Check of "" answers
// SERVING. Through the generic stub, as bytes: the empty HealthCheckRequest is no bytes, and
// HealthCheckResponse{status: SERVING} is field 1, varint 1.
void HealthCheck(Peer& p) {
  grpc::GenericStub stub(p.channel);
  ClientContext ctx;
  WithDeadline(&ctx);
  grpc::Slice no_bytes;
  grpc::ByteBuffer req(&no_bytes, 1), resp;  // a default ByteBuffer is no message at all
  std::promise<Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &req, &resp,
                 [&done](Status s) { done.set_value(s); });
  CheckOk(done.get_future().get(), "Health/Check");
  std::vector<grpc::Slice> slices;
  Check(resp.Dump(&slices).ok(), "an unreadable response");
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  Check(bytes == std::string("\x08\x01", 2), "not SERVING (" + std::to_string(bytes.size()) +
                                                 " bytes)");
}

const std::vector<std::pair<std::string, std::function<void(Peer&)>>> kCases = {
    {"empty_unary", EmptyUnary},
    {"large_unary", LargeUnary},
    {"client_streaming", ClientStreaming},
    {"server_streaming", ServerStreaming},
    {"ping_pong", PingPong},
    {"empty_stream", EmptyStream},
    {"cancel_after_begin", CancelAfterBegin},
    {"cancel_after_first_response", CancelAfterFirstResponse},
    {"timeout_on_sleeping_server", TimeoutOnSleepingServer},
    {"status_code_and_message",
     [](Peer& p) { StatusCodeAndMessage(p, "test status message", true); }},
    {"special_status_message", [](Peer& p) { StatusCodeAndMessage(p, kWhitespaceMessage, false); }},
    {"custom_metadata", CustomMetadata},
    {"unimplemented_method", UnimplementedMethod},
    {"unimplemented_service", UnimplementedServiceCase},
};
const std::vector<std::pair<std::string, std::function<void(Peer&)>>> kExtra = {
    {"health_check", HealthCheck},
};

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "interop_client --server_host H --server_port P --test_case all|NAME[,NAME...] "
      "[--use_tls [--use_test_ca --ca FILE] [--server_host_override NAME]]";
  eddy_grpc::Flags flags(argc, argv, {"server_host", "server_port", "server_host_override",
                                      "test_case", "ca"},
                         {"use_tls", "use_test_ca"}, usage);
  if (!flags.Has("server_port")) eddy_grpc::Flags::Die(usage, "--server_port is required");

  auto cases = kCases;
  cases.insert(cases.end(), kExtra.begin(), kExtra.end());
  std::vector<std::string> names;
  std::stringstream list(flags.Str("test_case", "all"));
  for (std::string n; std::getline(list, n, ',');) {
    if (n == "all") {
      for (const auto& c : kCases) names.push_back(c.first);
    } else if (!n.empty()) {
      names.push_back(n);
    }
  }
  for (const auto& n : names) {
    bool known = false;
    for (const auto& c : cases) known = known || c.first == n;
    if (!known) eddy_grpc::Flags::Die(usage, "unknown test case: " + n);
  }
  if (names.empty()) eddy_grpc::Flags::Die(usage, "no test case");

  std::string target = flags.Str("server_host", "127.0.0.1") + ":" +
                       std::to_string(flags.Int("server_port", 0));
  std::string host_override = flags.Str("server_host_override");
  grpc::ChannelArguments args;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (flags.Bool("use_tls")) {
    grpc::SslCredentialsOptions opts;
    if (flags.Bool("use_test_ca")) {
      if (!flags.Has("ca")) eddy_grpc::Flags::Die(usage, "--use_test_ca needs --ca FILE");
      opts.pem_root_certs = eddy_grpc::ReadFile(flags.Str("ca"));
    }
    creds = grpc::SslCredentials(opts);
    if (!host_override.empty()) args.SetSslTargetNameOverride(host_override);
  } else if (!host_override.empty()) {
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, host_override);
  }
  Peer peer;
  peer.channel = grpc::CreateCustomChannel(target, creds, args);
  peer.stub = TestService::NewStub(peer.channel);

  int failed = 0;
  for (const auto& name : names) {
    for (const auto& c : cases) {
      if (c.first != name) continue;
      try {
        c.second(peer);
        std::printf("PASS %s\n", name.c_str());
      } catch (const std::exception& e) {
        failed++;
        std::printf("FAIL %s: %s\n", name.c_str(), e.what());
      }
      std::fflush(stdout);
    }
  }
  return failed ? 1 : 0;
}
