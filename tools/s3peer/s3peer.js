#!/usr/bin/env node
// Starts s3rver (an S3 protocol server; pinned in the repository's package.json) on a loopback
// port for tests, with its data in a temporary directory.
//
//   node tools/s3peer/s3peer.js --port-file FILE [--bucket NAME]... [--log FILE] [--port N]
//                               [--address IP]
//
// --address: the address to listen on instead of 127.0.0.1, e.g. the bridge address of
// kubesim-node --pod-network netns, which pods in their own network namespaces can reach.
//
// Writes the chosen port to FILE (atomically, once it accepts connections); with --log, appends
// one line per request: "METHOD URL CONTENT-LENGTH". Exits, deleting its data, on SIGTERM or
// SIGINT, and when its parent dies (a crashed test must not leave servers behind).
//
// s3rver checks that the access key id is known (S3RVER) but does not verify SigV4 signatures;
// the SigV4 test vectors cover signatures.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

function usage(message) {
  process.stderr.write(`s3peer: ${message}\n`);
  process.exit(2);
}

const args = { buckets: [], port: 0, address: '127.0.0.1' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const value = () => {
    if (i + 1 >= argv.length) usage(`${argv[i]} needs a value`);
    return argv[++i];
  };
  switch (argv[i]) {
    case '--port-file': args.portFile = value(); break;
    case '--bucket': args.buckets.push(value()); break;
    case '--log': args.log = value(); break;
    case '--port': args.port = Number(value()); break;
    case '--address': args.address = value(); break;
    default: usage(`unknown argument ${argv[i]}`);
  }
}
if (!args.portFile) usage('--port-file is required');

let S3rver;
try {
  S3rver = require('s3rver');
} catch (err) {
  usage('the s3rver npm package is not installed: run scripts/bootstrap (npm ci at the ' +
        `repository root); ${err.message}`);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'starforge-s3peer-'));
const server = new S3rver({
  address: args.address,
  port: args.port,
  silent: true,
  directory: dir,
  configureBuckets: args.buckets.map(name => ({ name })),
});

let stopping = false;
function stop(code) {
  if (stopping) return;
  stopping = true;
  try { fs.rmSync(dir, { recursive: true, force: true }); } catch (err) { /* best effort */ }
  process.exit(code);
}
process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));

// Re-parented (to init or a subreaper) means the test process that started us is gone.
const parent = process.ppid;
setInterval(() => { if (process.ppid !== parent) stop(0); }, 200).unref();

server.run().then(address => {
  if (args.log) {
    server.httpServer.on('request', req => {
      const length = req.headers['content-length'] || '0';
      fs.appendFileSync(args.log, `${req.method} ${req.url} ${length}\n`);
    });
  }
  const tmp = `${args.portFile}.tmp`;
  fs.writeFileSync(tmp, `${address.port}\n`);
  fs.renameSync(tmp, args.portFile);
}).catch(err => {
  process.stderr.write(`s3peer: cannot start s3rver: ${err.stack || err}\n`);
  stop(1);
});
