// Shared by client.js and server.js: grpc-proto's test.proto and health.proto loaded at run
// time with @grpc/proto-loader, and the interop flags (--name=value, --name value, and the
// booleans --use_tls, --use_tls=true|false).
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = process.env.GRPC_PROTO_DIR || '/usr/share/grpc-proto';

function loadProtos() {
  const def = protoLoader.loadSync(
    ['grpc/testing/test.proto', 'grpc/health/v1/health.proto'].map(
      (p) => path.join(PROTO_ROOT, p)),
    {keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
      includeDirs: [PROTO_ROOT]});
  return grpc.loadPackageDefinition(def).grpc;
}

// parseFlags(argv, {name: 'string'|'int'|'bool'}) -> {name: value}; exits 2 on a bad flag.
function parseFlags(argv, spec, usage) {
  const out = {};
  const die = (msg) => {
    process.stderr.write(`${msg}\nusage: ${usage}\n`);
    process.exit(2);
  };
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z_]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m || !(m[1] in spec)) die(`unknown argument: ${argv[i]}`);
    const [, name, inline] = m;
    let value = inline;
    if (spec[name] === 'bool') {
      if (value === undefined && i + 1 < argv.length && /^(true|false)$/.test(argv[i + 1])) {
        value = argv[++i];
      }
      if (value === undefined || value === 'true' || value === '1') out[name] = true;
      else if (value === 'false' || value === '0') out[name] = false;
      else die(`--${name}: not a boolean: ${value}`);
      continue;
    }
    if (value === undefined) {
      if (i + 1 >= argv.length) die(`--${name} needs a value`);
      value = argv[++i];
    }
    if (spec[name] === 'int') {
      if (!/^[0-9]+$/.test(value)) die(`--${name}: not a number: ${value}`);
      value = Number(value);
    }
    out[name] = value;
  }
  return out;
}

module.exports = {grpc, loadProtos, parseFlags};
