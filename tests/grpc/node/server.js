// A gRPC interop server on @grpc/grpc-js (package.json pins it): grpc.testing.TestService
// (EmptyCall, UnaryCall, StreamingInputCall, StreamingOutputCall, FullDuplexCall, with Echo
// Status and Echo Metadata; UnimplementedCall left out, which grpc-js answers UNIMPLEMENTED)
// and grpc.health.v1.Health/Check. A reference peer for eddy's gRPC client
// (tests/grpc/interop.sh). grpc-js runs on Node's http2 module, that is nghttp2.
//
//   node server.js --port P [--use_tls --cert FILE --key FILE]
//
// Listens on 127.0.0.1 only; with --port 0 on an ephemeral port, then prints "PORT <n>".
// SIGTERM or SIGINT stop it (status 0).
'use strict';

const fs = require('fs');
const {grpc, loadProtos, parseFlags} = require('./common');

const ECHO_INITIAL = 'x-grpc-test-echo-initial';
const ECHO_TRAILING = 'x-grpc-test-echo-trailing-bin';
const pb = loadProtos();

// Echo Metadata: sends the initial key back at once; returns the trailers to end with.
function echoMetadata(call) {
  const initial = call.metadata.get(ECHO_INITIAL);
  if (initial.length) {
    const md = new grpc.Metadata();
    md.set(ECHO_INITIAL, initial[0]);
    call.sendMetadata(md);
  }
  const trailers = new grpc.Metadata();
  const trailing = call.metadata.get(ECHO_TRAILING);
  if (trailing.length) trailers.set(ECHO_TRAILING, trailing[0]);
  return trailers;
}

// Echo Status: the error to end the call with, or null.
function echoStatus(req, trailers) {
  const st = req.response_status;
  if (!st || !st.code) return null;
  return {code: st.code, details: st.message, metadata: trailers};
}

const payload = (size) => ({body: Buffer.alloc(size)});
const sleep = (us) => new Promise((resolve) => setTimeout(resolve, us / 1000));

// Writes one response per ResponseParameters, interval_us before each; false if cancelled.
async function respond(call, params) {
  for (const p of params) {
    if (p.interval_us > 0) await sleep(p.interval_us);
    if (call.cancelled) return false;
    call.write({payload: payload(p.size)});
  }
  return true;
}

const service = {
  EmptyCall(call, callback) {
    callback(null, {}, echoMetadata(call));
  },
  UnaryCall(call, callback) {
    const trailers = echoMetadata(call);
    const err = echoStatus(call.request, trailers);
    if (err) callback(err);
    else callback(null, {payload: payload(call.request.response_size)}, trailers);
  },
  StreamingInputCall(call, callback) {
    let total = 0;
    call.on('data', (req) => {
      total += req.payload ? req.payload.body.length : 0;
    });
    call.on('end', () => callback(null, {aggregated_payload_size: total}));
    call.on('error', () => {});
  },
  async StreamingOutputCall(call) {
    const trailers = echoMetadata(call);
    if (!(await respond(call, call.request.response_parameters))) return;
    const err = echoStatus(call.request, trailers);
    if (err) call.emit('error', err);
    else call.end(trailers);
  },
  FullDuplexCall(call) {
    // Requests are answered in order, each once the one before is: a promise chain.
    const trailers = echoMetadata(call);
    let chain = Promise.resolve(true);
    let over = false;
    call.on('data', (req) => {
      chain = chain.then(async (going) => {
        if (!going || over) return false;
        const err = echoStatus(req, trailers);
        if (err) {
          over = true;
          call.emit('error', err);
          return false;
        }
        return respond(call, req.response_parameters);
      });
    });
    call.on('end', () => {
      chain = chain.then(() => {
        if (!over && !call.cancelled) call.end(trailers);
        over = true;
      });
    });
    call.on('error', () => {});
  },
};

const health = {
  Check(call, callback) {
    const name = call.request.service;
    if (name === '' || name === 'grpc.testing.TestService') {
      callback(null, {status: 'SERVING'});
    } else {
      callback({code: grpc.status.NOT_FOUND, details: 'unknown service'});
    }
  },
};

function main() {
  const usage = 'node server.js --port P [--use_tls --cert FILE --key FILE]';
  const flags = parseFlags(process.argv.slice(2),
    {port: 'int', use_tls: 'bool', cert: 'string', key: 'string'}, usage);
  if (flags.port === undefined) {
    process.stderr.write(`--port is required\nusage: ${usage}\n`);
    process.exit(2);
  }
  let creds = grpc.ServerCredentials.createInsecure();
  if (flags.use_tls) {
    if (!flags.cert || !flags.key) {
      process.stderr.write(`--use_tls needs --cert and --key\nusage: ${usage}\n`);
      process.exit(2);
    }
    creds = grpc.ServerCredentials.createSsl(null, [{
      cert_chain: fs.readFileSync(flags.cert), private_key: fs.readFileSync(flags.key)}]);
  }
  const server = new grpc.Server();
  server.addService(pb.testing.TestService.service, service);
  server.addService(pb.health.v1.Health.service, health);
  server.bindAsync(`127.0.0.1:${flags.port}`, creds, (err, port) => {
    if (err) {
      process.stderr.write(`server.js: cannot listen: ${err.message}\n`);
      process.exit(1);
    }
    process.stdout.write(`PORT ${port}\n`);
  });
  const stop = () => {
    setTimeout(() => {
      server.forceShutdown();
      process.exit(0);
    }, 1000).unref();
    server.tryShutdown(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
