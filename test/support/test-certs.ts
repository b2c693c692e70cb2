/**
 * Certificate authorities and certificates made with the openssl command (Debian's
 * `openssl`, installed when missing) for the TLS tests: P-256 keys, valid for two days.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ensureDebianCommand, run } from './debian-package.js';

/** A CA able to sign certificates. */
export interface TestCa {
  readonly certFile: string;
  readonly keyFile: string;
  /** The CA certificate's PEM. */
  readonly cert: Buffer;
}

/** A certificate and its key, as files and PEM. */
export interface TestCert {
  readonly certFile: string;
  readonly keyFile: string;
  readonly cert: Buffer;
  readonly key: Buffer;
}

async function openssl(args: readonly string[]): Promise<void> {
  const bin = await ensureDebianCommand('openssl', 'openssl');
  const { code, stdout } = await run(bin, args);
  if (code !== 0) throw new Error(`openssl ${args.join(' ')} exited with ${code}:\n${stdout}`);
}

/** A self-signed CA named `name`, its files in `dir`. */
export async function makeCa(dir: string, name: string): Promise<TestCa> {
  const certFile = path.join(dir, `${name}.crt`);
  const keyFile = path.join(dir, `${name}.key`);
  await openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return { certFile, keyFile, cert: fs.readFileSync(certFile) };
}

/** What a certificate names and allows. */
export interface CertOptions {
  /** DNS names (subjectAltName). */
  readonly dns?: readonly string[];
  /** IP addresses (subjectAltName). */
  readonly ips?: readonly string[];
  /** URIs (subjectAltName), e.g. a SPIFFE id. */
  readonly uris?: readonly string[];
  /** Extended key usages. @default ['serverAuth', 'clientAuth'] */
  readonly usages?: readonly string[];
}

/**
 * A certificate `name` signed by `ca`, its files in `dir` (written over any of the same
 * name, key first then certificate, as a rotation would).
 */
export async function issueCert(
  dir: string,
  ca: TestCa,
  name: string,
  options: CertOptions = {},
): Promise<TestCert> {
  const certFile = path.join(dir, `${name}.crt`);
  const keyFile = path.join(dir, `${name}.key`);
  const work = fs.mkdtempSync(path.join(dir, `${name}-`));
  const csr = path.join(work, 'req.csr');
  const key = path.join(work, 'key.pem');
  const cert = path.join(work, 'cert.pem');
  const ext = path.join(work, 'ext.cnf');
  const san = [
    ...(options.dns ?? []).map((d) => `DNS:${d}`),
    ...(options.ips ?? []).map((i) => `IP:${i}`),
    ...(options.uris ?? []).map((u) => `URI:${u}`),
  ];
  fs.writeFileSync(
    ext,
    [
      ...(san.length === 0 ? [] : [`subjectAltName=${san.join(',')}`]),
      `extendedKeyUsage=${(options.usages ?? ['serverAuth', 'clientAuth']).join(',')}`,
    ].join('\n') + '\n',
  );
  await openssl([
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    csr,
    '-subj',
    `/CN=${name}`,
  ]);
  await openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.certFile,
    '-CAkey',
    ca.keyFile,
    '-set_serial',
    String(Date.now() * 1000 + Math.floor(Math.random() * 1000)),
    '-out',
    cert,
    '-days',
    '2',
    '-extfile',
    ext,
  ]);
  const pem = { key: fs.readFileSync(key), cert: fs.readFileSync(cert) };
  fs.writeFileSync(keyFile, pem.key);
  fs.writeFileSync(certFile, pem.cert);
  fs.rmSync(work, { recursive: true, force: true });
  return { certFile, keyFile, ...pem };
}
