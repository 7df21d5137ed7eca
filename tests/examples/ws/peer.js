// The node `ws` package as eddy's WebSocket peer (tests/examples/ws.sh drives it).
//
//   node peer.js echo URL [CA]       clients against eddy-ws-server --echo: text, UTF-8, empty,
//                                    binary, fragments, 1 MiB, pings, 1000 pipelined, the
//                                    limits (1009) and bad UTF-8 (1007), each with and without
//                                    permessage-deflate; then a clean close
//   node peer.js broadcast URL [CA]  three clients (with and without deflate) against
//                                    eddy-ws-server: each message reaches all three, 1 MiB
//                                    ones too; then a client that stops reading is let go
//   node peer.js server PORTFILE     a ws server (deflate accepted) that echoes, for
//                                    eddy-ws-client; writes its port to PORTFILE and logs each
//                                    connection's extensions on stdout
//
// Every check is exact; the first failure exits 1 with what differed. Each step has a
// deadline, and the whole run one more.
'use strict';
const assert = require('assert');
const crypto = require('crypto');
const fs = require('fs');
const WebSocket = require('ws');

const [mode, arg, caFile] = process.argv.slice(2);
const ca = caFile ? fs.readFileSync(caFile) : undefined;
setTimeout(() => {
  console.error('FAIL: the run took more than 90 s');
  process.exit(1);
}, 90000).unref();

function step(what, ms, promise) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result in ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

// A client whose messages queue up for next(); deflate offers permessage-deflate.
function connect(url, deflate) {
  const ws = new WebSocket(url, { perMessageDeflate: deflate, ca, maxPayload: 64 << 20 });
  const inbox = [];
  const waiters = [];
  ws.on('message', (data, isBinary) => {
    const m = { data: Buffer.from(data), isBinary };
    if (waiters.length > 0) waiters.shift()(m);
    else inbox.push(m);
  });
  ws.next = (what = 'a message') =>
    step(what, 10000, new Promise((resolve) => {
      if (inbox.length > 0) resolve(inbox.shift());
      else waiters.push(resolve);
    }));
  ws.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('error', (e) => { ws.lastError = e; });
  return step(`connect ${url}`, 10000, new Promise((resolve, reject) => {
    ws.on('open', () => resolve(ws));
    ws.on('error', reject);
  }));
}

function expectMessage(m, data, isBinary, what) {
  assert.strictEqual(m.isBinary, isBinary, `${what}: binary flag`);
  assert.ok(m.data.equals(Buffer.from(data)), `${what}: ${m.data.length} bytes came back, want ${Buffer.from(data).length}` +
    (m.data.length < 200 ? ` (${JSON.stringify(m.data.toString())})` : ''));
}

async function echoRound(url, deflate) {
  const tag = deflate ? 'deflate' : 'plain';
  const ws = await connect(url, deflate);
  const ext = ws.extensions;
  if (deflate) assert.match(ext, /^permessage-deflate/, `${tag}: extensions "${ext}"`);
  else assert.strictEqual(ext, '', `${tag}: extensions "${ext}"`);

  const cases = [
    ['text', 'hello, eddy', false],
    ['utf-8', 'h\u00e9llo \u2603 \u{1F389} \u4e2d\u6587', false],
    ['empty text', '', false],
    ['binary', Buffer.from([...Array(256).keys()]), true],
    ['empty binary', Buffer.alloc(0), true],
    ['1 MiB binary', crypto.randomBytes(1 << 20), true],
    ['1 MiB text', 'eddy '.repeat(1 << 20).slice(0, 1 << 20), false],
  ];
  for (const [what, data, binary] of cases) {
    ws.send(data, { binary });
    expectMessage(await ws.next(what), data, binary, `${tag} ${what}`);
  }
  // A message in three fragments comes back whole.
  ws.send('frag', { fin: false });
  ws.send('men', { fin: false });
  ws.send('ted', { fin: true });
  expectMessage(await ws.next('fragments'), 'fragmented', false, `${tag} fragments`);
  // Pings are answered with their payload.
  const pong = new Promise((resolve) => ws.once('pong', (d) => resolve(d.toString())));
  ws.ping('are you there');
  assert.strictEqual(await step('pong', 5000, pong), 'are you there', `${tag} pong payload`);
  // 1000 messages in one go come back in order.
  for (let i = 0; i < 1000; i++) ws.send(`message ${i}`);
  for (let i = 0; i < 1000; i++) expectMessage(await ws.next(`message ${i}`), `message ${i}`, false, `${tag} pipelined ${i}`);
  // A clean close: our status comes back.
  ws.close(1000, 'done');
  const c = await step('close', 5000, ws.closed);
  assert.strictEqual(c.code, 1000, `${tag} close code`);

  // Over the limit (1 MiB): 1009. Text that is not UTF-8: 1007.
  const big = await connect(url, deflate);
  big.send(Buffer.alloc((1 << 20) + 1, 0x61), { binary: true });
  assert.strictEqual((await step('1009', 10000, big.closed)).code, 1009, `${tag} message over 1 MiB`);
  const bad = await connect(url, deflate);
  bad.send(Buffer.from([0x68, 0x69, 0xff]), { binary: false });
  assert.strictEqual((await step('1007', 10000, bad.closed)).code, 1007, `${tag} text that is not UTF-8`);
  console.log(`ok echo ${tag} (${ext || 'no extension'})`);
}

async function broadcast(url) {
  const names = ['a', 'b', 'c'];
  const clients = [];
  for (const [i, name] of names.entries()) {
    const ws = await connect(url, i !== 1); // b without deflate: one frame, two encodings
    ws.name = name;
    clients.push(ws);
  }
  const all = async (data, binary, what) => {
    for (const ws of clients) expectMessage(await ws.next(`${what} at ${ws.name}`), data, binary, `${what} at ${ws.name}`);
  };
  for (const ws of clients) {
    ws.send(`${ws.name}: hello`);
    await all(`${ws.name}: hello`, false, `text from ${ws.name}`);
  }
  // The same message, sent twice: the deflaters' windows carry over per member.
  for (let k = 0; k < 2; k++) {
    clients[1].send('again and again and again');
    await all('again and again and again', false, `repeat ${k}`);
  }
  const blob = crypto.randomBytes(1 << 20);
  clients[0].send(blob);
  await all(blob, true, '1 MiB binary');
  const text = 'broadcast '.repeat(100000).slice(0, 1 << 20);
  clients[2].send(text);
  await all(text, false, '1 MiB text');
  // One leaves; the others go on.
  clients[2].close(1000);
  assert.strictEqual((await step('close', 5000, clients[2].closed)).code, 1000, 'c close');
  clients.pop();
  clients[0].send('a: still here');
  await all('a: still here', false, 'after c left');
  console.log('ok broadcast to 3 clients (deflate, plain, deflate), 1 MiB messages');

  // A client that stops reading falls behind and is closed by the server (past its 4 MiB
  // high water mark, and what the kernel buffers), while the others go on being served.
  const slow = await connect(url, false);
  slow._socket.pause();
  let slowGot = 0;
  slow.on('message', () => slowGot++);
  const chunk = crypto.randomBytes(1 << 20);
  const chunks = 40;
  for (let i = 0; i < chunks; i++) {
    clients[0].send(chunk);
    for (const ws of clients) expectMessage(await ws.next(`chunk ${i}`), chunk, true, `chunk ${i} at ${ws.name}`);
  }
  slow._socket.resume();
  const sc = await step('slow client closed', 10000, slow.closed);
  assert.strictEqual(sc.code, 1006, 'the slow client was closed without a close handshake');
  assert.ok(slowGot < chunks, `the slow client was never let go (it got all ${chunks} MiB)`);
  clients[0].send('a: after the slow one');
  await all('a: after the slow one', false, 'after the slow client');
  console.log(`ok a client that stopped reading was closed after ${slowGot} of ${chunks} MiB`);
  for (const ws of clients) ws.close(1000);
  for (const ws of clients) assert.strictEqual((await step('close', 5000, ws.closed)).code, 1000, `${ws.name} close`);
}

function server(portFile) {
  const wss = new WebSocket.Server({ host: '127.0.0.1', port: 0, perMessageDeflate: true });
  wss.on('connection', (ws, req) => {
    console.log(`connection ${req.url} extensions=${ws.extensions || 'none'}`);
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
    ws.on('close', (code) => console.log(`closed ${code}`));
  });
  wss.on('listening', () => {
    fs.writeFileSync(portFile + '.tmp', String(wss.address().port));
    fs.renameSync(portFile + '.tmp', portFile);
  });
  process.on('SIGTERM', () => process.exit(0));
}

async function main() {
  if (mode === 'echo') {
    await echoRound(arg, false);
    await echoRound(arg, true);
  } else if (mode === 'broadcast') {
    await broadcast(arg);
  } else if (mode === 'server') {
    server(arg);
    return;
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  process.exit(0);
}

main().catch((e) => {
  console.error(`FAIL: ${e.message}`);
  process.exit(1);
});
