// A gRPC interop client on @grpc/grpc-js (package.json pins it): the cases of gRPC's
// doc/interop-test-descriptions.md that need no cloud or proxy. A reference peer for eddy's
// gRPC server (tests/grpc/interop.sh). grpc-js runs on Node's http2 module, that is nghttp2.
//
//   node client.js --server_host H --server_port P --test_case all|NAME[,NAME...]
//                  [--use_tls [--use_test_ca --ca FILE] [--server_host_override NAME]]
//
// "all" is the 14 cases; health_check (grpc.health.v1.Health/Check of "" is SERVING) runs when
// named. Prints "PASS <case>" or "FAIL <case>: <reason>" per case; exits 0 only when all passed.
'use strict';

const fs = require('fs');
const {grpc, loadProtos, parseFlags} = require('./common');

const pb = loadProtos();
const TIMEOUT_MS = 20000; // no call of a case should take long: a stuck one fails, not hangs
const WHITESPACE_MESSAGE =
  '\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \u{1f608}\t\n';
const ECHO_INITIAL = ['x-grpc-test-echo-initial', 'test_initial_metadata_value'];
const ECHO_TRAILING = ['x-grpc-test-echo-trailing-bin', Buffer.from([0xab, 0xab, 0xab])];
const S = grpc.status;
const statusName = (code) => Object.keys(S).find((k) => S[k] === code) || String(code);

class Failure extends Error {}
function check(cond, what) {
  if (!cond) throw new Failure(what);
}
const deadline = (ms = TIMEOUT_MS) => ({deadline: Date.now() + ms});
const zeros = (n) => ({body: Buffer.alloc(n)});
const bodyOk = (resp, n) =>
  resp && resp.payload && resp.payload.body.length === n && resp.payload.body.every((b) => b === 0);
const bodyLen = (resp) => (resp && resp.payload ? resp.payload.body.length : -1);

// A unary or client-streaming call as a promise of {err, resp, initial, status}.
function finished(start) {
  return new Promise((resolve) => {
    let initial = null;
    let result = null;
    let status = null;
    const done = () => {
      if (result && status) resolve({...result, initial, status});
    };
    const call = start((err, resp) => {
      result = {err, resp};
      done();
    });
    call.on('metadata', (md) => {
      initial = md;
    });
    call.on('status', (st) => {
      status = st;
      done();
    });
  });
}

// Reads a server-streaming or bidi call one message at a time: next() resolves to a message,
// or null at the end of the stream, and rejects with the call's error; status resolves to its
// final status.
class Reader {
  constructor(call) {
    this.call = call;
    this.items = [];
    this.waiter = null;
    this.initial = null;
    this.status = new Promise((resolve) => call.on('status', resolve));
    call.on('metadata', (md) => {
      this.initial = md;
    });
    call.on('data', (d) => this.push({value: d}));
    call.on('end', () => this.push({done: true}));
    call.on('error', (e) => this.push({error: e}));
  }
  push(item) {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = null;
      w(item);
    } else {
      this.items.push(item);
    }
  }
  take(item) {
    if (item.error || item.done) this.items.unshift(item); // the end stays the end
    if (item.error) throw item.error;
    return item.done ? null : item.value;
  }
  async next() {
    const item = this.items.length ? this.items.shift()
      : await new Promise((resolve) => {
        this.waiter = resolve;
      });
    return this.take(item);
  }
  async all() {
    const out = [];
    for (let m = await this.next(); m !== null; m = await this.next()) out.push(m);
    return out;
  }
}

async function expectError(code, promise) {
  try {
    await promise;
  } catch (err) {
    check(err.code === code, `status ${statusName(err.code)} (${JSON.stringify(err.details)}), ` +
      `want ${statusName(code)}`);
    return err;
  }
  throw new Failure(`the call succeeded, want ${statusName(code)}`);
}

function metadata() {
  const md = new grpc.Metadata();
  md.set(...ECHO_INITIAL);
  md.set(...ECHO_TRAILING);
  return md;
}

function hasEcho(md, [key, want]) {
  if (!md) return false;
  return md.get(key).some((v) => (Buffer.isBuffer(want) ? Buffer.isBuffer(v) && v.equals(want)
    : v === want));
}

function duplexRequest(out, inn = 0, status = null) {
  const r = {payload: zeros(inn), response_parameters: []};
  if (out !== undefined && out !== null) r.response_parameters.push({size: out});
  if (status) r.response_status = status;
  return r;
}

// status_code_and_message and special_status_message: Echo Status, unary (and bidi).
async function statusCodeAndMessage(c, message, duplex) {
  const st = {code: 2, message};
  const r = await finished((cb) => c.UnaryCall({response_status: st}, new grpc.Metadata(),
    deadline(), cb));
  check(r.err && r.err.code === S.UNKNOWN,
    `unary: status ${r.err ? statusName(r.err.code) : 'OK'}, want UNKNOWN`);
  check(r.err.details === message,
    `unary: message ${JSON.stringify(r.err.details)}, want ${JSON.stringify(message)}`);
  if (!duplex) return;
  const call = c.FullDuplexCall(new grpc.Metadata(), deadline());
  const rd = new Reader(call);
  call.write(duplexRequest(null, 0, st));
  call.end();
  const err = await expectError(S.UNKNOWN, rd.all());
  check(err.details === message,
    `duplex: message ${JSON.stringify(err.details)}, want ${JSON.stringify(message)}`);
}

const cases = {
  async empty_unary(c) {
    const r = await finished((cb) => c.EmptyCall({}, new grpc.Metadata(), deadline(), cb));
    if (r.err) throw r.err;
    check(r.resp !== null && typeof r.resp === 'object', 'no Empty response');
  },
  async large_unary(c) {
    const r = await finished((cb) => c.UnaryCall({response_size: 314159, payload: zeros(271828)},
      new grpc.Metadata(), deadline(), cb));
    if (r.err) throw r.err;
    check(bodyOk(r.resp, 314159), `response body of ${bodyLen(r.resp)} bytes`);
  },
  async client_streaming(c) {
    const r = await finished((cb) => {
      const call = c.StreamingInputCall(new grpc.Metadata(), deadline(), cb);
      for (const n of [27182, 8, 1828, 45904]) call.write({payload: zeros(n)});
      call.end();
      return call;
    });
    if (r.err) throw r.err;
    check(r.resp.aggregated_payload_size === 74922,
      `aggregated_payload_size ${r.resp.aggregated_payload_size}`);
  },
  async server_streaming(c) {
    const sizes = [31415, 9, 2653, 58979];
    const rd = new Reader(c.StreamingOutputCall(
      {response_parameters: sizes.map((size) => ({size}))}, new grpc.Metadata(), deadline()));
    const got = await rd.all();
    check(JSON.stringify(got.map(bodyLen)) === JSON.stringify(sizes),
      `response sizes ${got.map(bodyLen)}`);
    check(got.every((r, i) => bodyOk(r, sizes[i])), 'non-zero payload');
    check((await rd.status).code === S.OK, 'status not OK');
  },
  async ping_pong(c) {
    const call = c.FullDuplexCall(new grpc.Metadata(), deadline());
    const rd = new Reader(call);
    const outs = [31415, 9, 2653, 58979];
    const ins = [27182, 8, 1828, 45904];
    for (let i = 0; i < 4; i++) {
      call.write(duplexRequest(outs[i], ins[i]));
      const resp = await rd.next();
      check(resp !== null, `the stream ended after ${i} responses`);
      check(bodyOk(resp, outs[i]), `response of ${bodyLen(resp)} bytes, want ${outs[i]}`);
    }
    call.end();
    check((await rd.next()) === null, 'a fifth response');
    check((await rd.status).code === S.OK, 'status not OK');
  },
  async empty_stream(c) {
    const call = c.FullDuplexCall(new grpc.Metadata(), deadline());
    const rd = new Reader(call);
    call.end();
    const got = await rd.all();
    check(got.length === 0, `${got.length} responses`);
    check((await rd.status).code === S.OK, 'status not OK');
  },
  async cancel_after_begin(c) {
    const r = await finished((cb) => {
      const call = c.StreamingInputCall(new grpc.Metadata(), deadline(), cb);
      call.cancel();
      return call;
    });
    check(r.err && r.err.code === S.CANCELLED,
      `status ${r.err ? statusName(r.err.code) : 'OK'}, want CANCELLED`);
  },
  async cancel_after_first_response(c) {
    const call = c.FullDuplexCall(new grpc.Metadata(), deadline());
    const rd = new Reader(call);
    call.write(duplexRequest(31415, 27182));
    const resp = await rd.next();
    check(bodyOk(resp, 31415), `first response of ${bodyLen(resp)} bytes`);
    call.cancel();
    await expectError(S.CANCELLED, rd.next());
    check((await rd.status).code === S.CANCELLED, 'status not CANCELLED');
  },
  async timeout_on_sleeping_server(c) {
    const call = c.FullDuplexCall(new grpc.Metadata(), deadline(1));
    const rd = new Reader(call);
    call.write(duplexRequest(null, 27182));
    await expectError(S.DEADLINE_EXCEEDED, rd.next());
    call.end();
  },
  async status_code_and_message(c) {
    await statusCodeAndMessage(c, 'test status message', true);
  },
  async special_status_message(c) {
    await statusCodeAndMessage(c, WHITESPACE_MESSAGE, false);
  },
  async custom_metadata(c) {
    const r = await finished((cb) => c.UnaryCall({response_size: 314159, payload: zeros(271828)},
      metadata(), deadline(), cb));
    if (r.err) throw r.err;
    check(bodyOk(r.resp, 314159), `unary: response of ${bodyLen(r.resp)} bytes`);
    check(hasEcho(r.initial, ECHO_INITIAL), 'unary: no echoed initial metadata');
    check(hasEcho(r.status.metadata, ECHO_TRAILING), 'unary: no echoed trailing metadata');

    const call = c.FullDuplexCall(metadata(), deadline());
    const rd = new Reader(call);
    call.write(duplexRequest(314159, 271828));
    call.end();
    const got = await rd.all();
    check(got.length === 1 && bodyOk(got[0], 314159), `duplex: responses ${got.map(bodyLen)}`);
    const st = await rd.status;
    check(st.code === S.OK, `duplex: status ${statusName(st.code)}`);
    check(hasEcho(rd.initial, ECHO_INITIAL), 'duplex: no echoed initial metadata');
    check(hasEcho(st.metadata, ECHO_TRAILING), 'duplex: no echoed trailing metadata');
  },
  async unimplemented_method(c) {
    const r = await finished((cb) => c.UnimplementedCall({}, new grpc.Metadata(), deadline(),
      cb));
    check(r.err && r.err.code === S.UNIMPLEMENTED,
      `status ${r.err ? statusName(r.err.code) : 'OK'}, want UNIMPLEMENTED`);
  },
  // Not one of gRPC's interop cases, so not in "all": Health/Check of "" answers SERVING.
  async health_check(c, u, h) {
    const r = await finished((cb) => h.Check({service: ''}, new grpc.Metadata(), deadline(), cb));
    if (r.err) throw r.err;
    check(r.resp.status === 'SERVING', `status ${r.resp.status}`);
  },
  async unimplemented_service(c, u) {
    const r = await finished((cb) => u.UnimplementedCall({}, new grpc.Metadata(), deadline(),
      cb));
    check(r.err && r.err.code === S.UNIMPLEMENTED,
      `status ${r.err ? statusName(r.err.code) : 'OK'}, want UNIMPLEMENTED`);
  },
};

async function main() {
  const usage = 'node client.js --server_host H --server_port P --test_case all|NAME[,NAME...] ' +
    '[--use_tls [--use_test_ca --ca FILE] [--server_host_override NAME]]';
  const flags = parseFlags(process.argv.slice(2), {
    server_host: 'string', server_port: 'int', server_host_override: 'string',
    test_case: 'string', use_tls: 'bool', use_test_ca: 'bool', ca: 'string'}, usage);
  const die = (msg) => {
    process.stderr.write(`${msg}\nusage: ${usage}\n`);
    process.exit(2);
  };
  if (flags.server_port === undefined) die('--server_port is required');
  const all = Object.keys(cases).filter((n) => n !== 'health_check');
  const names = (flags.test_case || 'all').split(',').filter((n) => n)
    .flatMap((n) => (n === 'all' ? all : [n]));
  const unknown = names.filter((n) => !(n in cases));
  if (unknown.length || !names.length) {
    die(`unknown test case(s): ${unknown}; known: all, ${Object.keys(cases)}`);
  }
  if (flags.use_test_ca && !flags.ca) die('--use_test_ca needs --ca FILE');

  const target = `${flags.server_host || '127.0.0.1'}:${flags.server_port}`;
  const options = {};
  if (flags.server_host_override) options['grpc.default_authority'] = flags.server_host_override;
  let creds = grpc.credentials.createInsecure();
  if (flags.use_tls) {
    creds = grpc.credentials.createSsl(flags.use_test_ca ? fs.readFileSync(flags.ca) : null);
    if (flags.server_host_override) {
      options['grpc.ssl_target_name_override'] = flags.server_host_override;
    }
  }
  const client = new pb.testing.TestService(target, creds, options);
  const unimplemented = new pb.testing.UnimplementedService(target, creds, options);
  const health = new pb.health.v1.Health(target, creds, options);

  let failed = 0;
  for (const name of names) {
    try {
      await cases[name](client, unimplemented, health);
      process.stdout.write(`PASS ${name}\n`);
    } catch (err) {
      failed++;
      const why = err instanceof Failure ? err.message
        : err.code !== undefined ? `status ${statusName(err.code)}: ${JSON.stringify(err.details)}`
          : `${err.name}: ${err.message}`;
      process.stdout.write(`FAIL ${name}: ${why}\n`);
    }
  }
  client.close();
  unimplemented.close();
  health.close();
  // Exit at once: after a call cancelled mid-stream (cancel_after_begin on a connected
  // channel) grpc-js 1.14 keeps a timer alive until that call's deadline would have passed.
  process.stdout.write('', () => process.exit(failed ? 1 : 0));
}

main();
