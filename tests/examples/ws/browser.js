// A real browser on eddy-ws-server's chat page (tests/examples/ws_browser.sh drives it):
// through the DevTools protocol of a headless Chromium, two tabs load the page as alice and
// bob, each says something, and each must show both messages, exactly; then a 200 KB message
// and one in UTF-8 outside the BMP. Only the page's own code talks to the server.
//
//   node browser.js DEVTOOLS_WS_URL PAGE_URL [SCREENSHOT.png]
'use strict';
const assert = require('assert');
const fs = require('fs');
const WebSocket = require('ws');

const [browserUrl, pageUrl, screenshot] = process.argv.slice(2);
setTimeout(() => {
  console.error('FAIL: the browser run took more than 60 s');
  process.exit(1);
}, 60000).unref();

const cdp = new WebSocket(browserUrl, { perMessageDeflate: false, maxPayload: 256 << 20 });
let lastId = 0;
const pending = new Map();
cdp.on('message', (data) => {
  const m = JSON.parse(data);
  const p = m.id !== undefined && pending.get(m.id);
  if (p) {
    pending.delete(m.id);
    if (m.error) p.reject(new Error(`${p.method}: ${JSON.stringify(m.error)}`));
    else p.resolve(m.result);
  }
});

function call(method, params = {}, sessionId = undefined) {
  return new Promise((resolve, reject) => {
    const id = ++lastId;
    pending.set(id, { resolve, reject, method });
    cdp.send(JSON.stringify({ id, method, params, sessionId }));
  });
}

async function evaluate(tab, expression) {
  const r = await call('Runtime.evaluate', { expression, returnByValue: true }, tab.sessionId);
  if (r.exceptionDetails) throw new Error(`${tab.name}: ${expression}: ${r.exceptionDetails.text}`);
  return r.result.value;
}

async function waitFor(tab, expression, what, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    let v;
    try {
      v = await evaluate(tab, expression);
    } catch (e) {
      v = undefined; // the page is still loading
    }
    if (v) return v;
    if (Date.now() > end) {
      const status = await evaluate(tab, "document.getElementById('status')?.textContent").catch(() => '?');
      throw new Error(`${tab.name}: ${what} did not happen in ${ms} ms (status: ${status})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const logOf = "[...document.querySelectorAll('#log li')].map((li) => li.textContent)";

async function openTab(name) {
  const { targetId } = await call('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await call('Target.attachToTarget', { targetId, flatten: true });
  const tab = { name, targetId, sessionId };
  await call('Page.navigate', { url: `${pageUrl}?name=${name}` }, sessionId);
  return tab;
}

async function main() {
  await new Promise((resolve, reject) => {
    cdp.on('open', resolve);
    cdp.on('error', reject);
  });
  const version = await call('Browser.getVersion');
  const tabs = [await openTab('alice'), await openTab('bob')];
  for (const tab of tabs) {
    await waitFor(tab, "document.body?.dataset.state === 'open'", 'the WebSocket opening');
    const ext = await evaluate(tab, 'ws.extensions');
    assert.match(ext, /^permessage-deflate/, `${tab.name}: extensions "${ext}"`);
  }
  // Both are connected: each says hello, each sees both (in either order).
  for (const tab of tabs) await evaluate(tab, `send('hello from ${tab.name}')`);
  const want = ['alice: hello from alice', 'bob: hello from bob'];
  for (const tab of tabs) {
    const got = await waitFor(tab, `${logOf}.length >= 2 && ${logOf}`, 'both messages');
    assert.deepStrictEqual([...got].sort(), want, `${tab.name} shows ${JSON.stringify(got)}`);
  }
  // A long message (deflated both ways) and one outside the BMP.
  const [alice, bob] = tabs;
  await evaluate(alice, "send('x'.repeat(200000))");
  await evaluate(bob, "send('h\\u00e9llo \\u2603 \\u{1F389}')");
  for (const tab of tabs) {
    const got = await waitFor(tab, `${logOf}.length >= 4 && ${logOf}`, 'the next two messages');
    assert.strictEqual(got.length, 4, `${tab.name}: ${got.length} messages`);
    const rest = got.slice(2).sort();
    assert.strictEqual(rest[0], 'alice: ' + 'x'.repeat(200000), `${tab.name}: the long message (${rest[0].length} characters)`);
    assert.strictEqual(rest[1], 'bob: h\u00e9llo \u2603 \u{1F389}', `${tab.name}: the UTF-8 message`);
  }
  if (screenshot) {
    const { data } = await call('Page.captureScreenshot', { format: 'png' }, alice.sessionId);
    fs.writeFileSync(screenshot, Buffer.from(data, 'base64'));
  }
  // Leaving: the page's socket closes with the tab.
  for (const tab of tabs) await call('Target.closeTarget', { targetId: tab.targetId });
  console.log(`ok ${version.product}: alice and bob saw each other's messages over ${pageUrl.split(':')[0]}`);
  await call('Browser.close').catch(() => {});
  process.exit(0);
}

main().catch((e) => {
  console.error(`FAIL: ${e.message}`);
  process.exit(1);
});
