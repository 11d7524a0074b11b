// tests/integration/s3server/s3server.js: the local S3 server of the
// integration tests and the benchmark: s3rver 3.7.1 (from npm, installed
// into node_modules/ beside this file by scripts/deps.sh), with what it lacks
// for sluice's tests added in front of it:
//
//   - AWS Signature Version 4 is checked on every request that carries an
//     Authorization header (s3rver accepts any V4 signature): the canonical
//     request is rebuilt from the raw request line and headers as the AWS
//     documentation describes, so a signing mistake shows up as
//     403 SignatureDoesNotMatch, an unknown key as 403 InvalidAccessKeyId;
//   - ListMultipartUploads (GET /bucket?uploads) and AbortMultipartUpload
//     (DELETE /bucket/key?uploadId=...), over s3rver's own store of uploads
//     (an upload's Initiated is the modification time of its "key" file
//     there, which a test may set back);
//   - every request is appended to --log as "METHOD path?query status ms
//     bytes": its status, the milliseconds from its first byte to the end of
//     the answer, and its body's size (Content-Length);
//   - --part-delay-ms N holds each UploadPart N ms before it is stored, so a
//     test can stop sluice in the middle of a multipart upload;
//   - --conditional-put: PutObject with If-None-Match: * over a key that
//     exists answers 412 PreconditionFailed and stores nothing, as AWS S3
//     does (s3rver alone ignores the header on a PUT and replaces the
//     object: tests/integration/test_iceberg_s3.py shows both).
//   - a PutObject or UploadPart stores its body whole or not at all, as
//     AWS S3 does: the body is read to its end before s3rver sees it (a
//     client gone in the middle stores nothing; s3rver alone keeps the
//     bytes that came, an empty object when it went after the headers), a
//     body shorter than its Content-Length is 400 IncompleteBody, one whose
//     SHA-256 is not its x-amz-content-sha256 is 400
//     XAmzContentSHA256Mismatch; an object is written to a temporary file
//     and renamed, and answered once it is on disk (s3rver answers while
//     its write may still be pending, which a kill of the server then cuts
//     short: tests/integration/test_s3.py, S3ServerTest).
//
// usage: node s3server.js --port P --dir D --bucket B [--bucket B2] --key ID:SECRET
//        [--region us-east-1] [--log FILE] [--part-delay-ms N] [--conditional-put]
// Prints "ready <port>" on stdout once it listens.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { PassThrough } = require('stream');
const S3rver = require('s3rver');

function parseArgs(argv) {
  const o = { buckets: [], keys: new Map(), region: 'us-east-1', port: 0, dir: null, log: null, partDelay: 0 };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (k === '--conditional-put') { o.conditionalPut = true; i--; continue; }
    if (k === '--port') o.port = Number(v);
    else if (k === '--dir') o.dir = v;
    else if (k === '--bucket') o.buckets.push(v);
    else if (k === '--key') { const c = v.indexOf(':'); o.keys.set(v.slice(0, c), v.slice(c + 1)); }
    else if (k === '--region') o.region = v;
    else if (k === '--log') o.log = v;
    else if (k === '--part-delay-ms') o.partDelay = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  if (!o.dir) throw new Error('--dir is required');
  return o;
}

const opts = parseArgs(process.argv);

function xmlEscape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function s3error(ctx, status, code, message) {
  ctx.status = status;
  ctx.type = 'application/xml';
  ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${xmlEscape(message)}</Message></Error>`;
}

const hmac = (key, data) => crypto.createHmac('sha256', key).update(data).digest();
const sha256hex = data => crypto.createHash('sha256').update(data).digest('hex');

// Checks a header-signed request; returns null when it is good, else [status, code, message].
function checkSigV4(req) {
  const auth = req.headers['authorization'];
  if (!auth) return null;
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return [400, 'AuthorizationHeaderMalformed', 'The authorization header is malformed'];
  const [, keyId, date, region, service, signedHeaders, signature] = m;
  const secret = opts.keys.get(keyId);
  if (secret === undefined) return [403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.'];
  if (region !== opts.region) return [400, 'AuthorizationHeaderMalformed', `the region '${region}' is wrong; expecting '${opts.region}'`];
  if (service !== 's3') return [400, 'AuthorizationHeaderMalformed', `the service '${service}' is wrong`];
  const amzDate = req.headers['x-amz-date'];
  if (!amzDate || amzDate.slice(0, 8) !== date) return [403, 'AccessDenied', 'x-amz-date is missing or does not match the credential date'];
  const payload = req.headers['x-amz-content-sha256'];
  if (!payload) return [400, 'InvalidRequest', 'Missing required header for this request: x-amz-content-sha256'];
  const names = signedHeaders.split(';');
  if (!names.includes('host') || !names.includes('x-amz-date') || !names.includes('x-amz-content-sha256'))
    return [403, 'AccessDenied', 'host, x-amz-date and x-amz-content-sha256 must be signed'];
  const q = req.url.indexOf('?');
  const rawPath = q < 0 ? req.url : req.url.slice(0, q);
  const rawQuery = q < 0 ? '' : req.url.slice(q + 1);
  const pairs = rawQuery === '' ? [] : rawQuery.split('&').map(p => {
    const e = p.indexOf('=');
    return e < 0 ? [p, ''] : [p.slice(0, e), p.slice(e + 1)];
  });
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const canonicalQuery = pairs.map(([k, v]) => `${k}=${v}`).join('&');
  const canonicalHeaders = names.map(n => {
    const v = req.headers[n];
    if (v === undefined) return null;
    return `${n}:${String(v).trim().replace(/\s+/g, ' ')}\n`;
  });
  if (canonicalHeaders.includes(null)) return [403, 'AccessDenied', 'a signed header is missing'];
  const canonical = [req.method, rawPath, canonicalQuery, canonicalHeaders.join(''), signedHeaders, payload].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256hex(canonical)].join('\n');
  const kDate = hmac('AWS4' + secret, date);
  const key = hmac(hmac(hmac(kDate, region), service), 'aws4_request');
  const want = hmac(key, toSign).toString('hex');
  if (want !== signature)
    return [403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.'];
  return null;
}

// The whole body of req, or null when the client went away before its end.
function wholeBody(req) {
  return new Promise(resolve => {
    const chunks = [];
    let done = false;
    const finish = v => { if (!done) { done = true; resolve(v); } };
    req.on('data', c => chunks.push(c));
    req.on('end', () => finish(Buffer.concat(chunks)));
    req.on('aborted', () => finish(null));
    req.on('error', () => finish(null));
    req.on('close', () => finish(req.complete ? Buffer.concat(chunks) : null));
  });
}

// A stream of body, as s3rver reads ctx.req.
function bodyStream(req, body) {
  const s = new PassThrough();
  s.headers = req.headers;
  s.end(body);
  return s;
}

// Checks a PutObject or UploadPart body (the whole of it): null when it is
// good, else [status, code, message] as AWS S3 answers.
function checkBody(req, body) {
  const want = req.headers['content-length'];
  if (want !== undefined && Number(want) !== body.length)
    return [400, 'IncompleteBody', 'You did not provide the number of bytes specified by the Content-Length HTTP header'];
  const sha = req.headers['x-amz-content-sha256'];
  if (sha && /^[0-9a-f]{64}$/.test(sha) && sha256hex(body) !== sha)
    return [400, 'XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed."];
  return null;
}

function uploadsDir(store, bucket) {
  return store.getResourcePath(bucket, undefined, 'uploads');
}

const server = new S3rver({
  port: opts.port,
  address: '127.0.0.1',
  directory: opts.dir,
  silent: true,
  configureBuckets: opts.buckets.map(name => ({ name })),
  allowMismatchedSignatures: false,
});
// s3rver's own check knows only its dummy key: every key of ours is valid there.
const AWSAccount = require('s3rver/lib/models/account');
for (const [id, secret] of opts.keys) AWSAccount.DUMMY_ACCOUNT.createKeyPair(id, secret);

const logFd = opts.log ? fs.openSync(opts.log, 'a') : null;

async function front(ctx, next) {
  const req = ctx.req;
  const t0 = process.hrtime.bigint();
  try {
    const bad = checkSigV4(req);
    if (bad) return s3error(ctx, ...bad);
    const url = new URL(req.url, 'http://x');
    const segs = url.pathname.split('/').filter((s, i) => i > 0);
    const bucket = decodeURIComponent(segs[0] || '');
    const key = segs.slice(1).map(decodeURIComponent).join('/');
    if (bucket && !fs.existsSync(server.store.getBucketPath(bucket)) &&
        (url.searchParams.has('uploads') || url.searchParams.has('uploadId')))
      return s3error(ctx, 404, 'NoSuchBucket', 'The specified bucket does not exist');
    if (req.method === 'GET' && bucket && !key && url.searchParams.has('uploads')) {
      // ListMultipartUploads: every upload, one page (the tests have few).
      const prefix = url.searchParams.get('prefix') || '';
      const dir = uploadsDir(server.store, bucket);
      const ups = [];
      for (const id of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
        let k, t;
        try {
          k = fs.readFileSync(path.join(dir, id, 'key'), 'utf8');
          t = fs.statSync(path.join(dir, id, 'key')).mtime;
        } catch (e) { continue; }
        if (k.startsWith(prefix)) ups.push([k, id, t]);
      }
      ups.sort();
      ctx.type = 'application/xml';
      ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult>' +
        `<Bucket>${xmlEscape(bucket)}</Bucket><Prefix>${xmlEscape(prefix)}</Prefix><IsTruncated>false</IsTruncated>` +
        ups.map(([k, id, t]) => `<Upload><Key>${xmlEscape(k)}</Key><UploadId>${id}</UploadId>` +
          `<Initiated>${t.toISOString()}</Initiated></Upload>`).join('') +
        '</ListMultipartUploadsResult>';
      return;
    }
    if (req.method === 'DELETE' && key && url.searchParams.has('uploadId')) {
      // AbortMultipartUpload
      const id = url.searchParams.get('uploadId');
      const d = path.join(uploadsDir(server.store, bucket), path.basename(id));
      if (!/^[0-9a-f]+$/.test(id) || !fs.existsSync(d))
        return s3error(ctx, 404, 'NoSuchUpload', 'The specified upload does not exist.');
      fs.rmSync(d, { recursive: true, force: true });
      ctx.status = 204;
      return;
    }
    if (opts.conditionalPut && req.method === 'PUT' && key && req.headers['if-none-match'] === '*' &&
        !url.searchParams.has('uploadId') && !req.headers['x-amz-copy-source'] &&
        await server.store.existsObject(bucket, key))
      return s3error(ctx, 412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold');
    if (req.method === 'PUT' && key && !req.headers['x-amz-copy-source']) {
      const body = await wholeBody(req);
      if (body === null) {
        ctx.respond = false;   // the client is gone: nothing stored, nothing to answer
        return;
      }
      const badBody = checkBody(req, body);
      if (badBody) return s3error(ctx, ...badBody);
      ctx.req = bodyStream(req, body);
    }
    if (req.method === 'PUT' && key && url.searchParams.has('partNumber') && opts.partDelay > 0)
      await new Promise(resolve => setTimeout(resolve, opts.partDelay));
    return await next();
  } finally {
    if (logFd !== null) {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      fs.writeSync(logFd, `${req.method} ${req.url} ${ctx.status} ${ms.toFixed(3)} ${req.headers['content-length'] || 0}\n`);
    }
  }
}

// An object is on disk whole before it is answered, and never seen in part:
// a temporary file (not a key: it lacks the object suffix), renamed.
server.store.putObject = async function putObject(object) {
  const chunks = [];
  if (Buffer.isBuffer(object.content)) chunks.push(object.content);
  else for await (const c of object.content) chunks.push(c);
  const content = Buffer.concat(chunks);
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  const tmp = `${objectPath}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  const md5 = crypto.createHash('md5').update(content).digest('hex');
  await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
  await fs.promises.writeFile(tmp, content);
  await fs.promises.rename(tmp, objectPath);
  await this.putMetadata(object.bucket, object.key, object.metadata, md5);
  return { size: content.length, md5 };
};

server.middleware.unshift(front);
server.run((err, addr) => {
  if (err) {
    console.error(`s3server: ${err.message}`);
    process.exit(1);
  }
  process.stdout.write(`ready ${addr.port}\n`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
