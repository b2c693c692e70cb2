import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type * as grpc from '@grpc/grpc-js';
import { parse } from 'yaml';
import { z } from 'zod';
import { PolicyError, ProtocolError, type PolicyIssue } from '../../core/errors.js';

/** What one credential may claim: agent names and RLQS domains, `*` matching any run. */
export interface AgentGrant {
  readonly agents: readonly string[];
  readonly domains: readonly string[];
}

/** An allow-list entry: a certificate identity (`URI:…` or `DNS:…` SAN, `*` allowed). */
export interface CertGrant extends AgentGrant {
  readonly identity: string;
}

/** A bearer token and what it may claim. */
export interface TokenGrant extends AgentGrant {
  readonly token: string;
}

/** Why a stream was refused; the `reason` label of `sluice_controller_auth_failures_total`. */
export type AuthFailureReason =
  'no-credentials' | 'bad-token' | 'unknown-identity' | 'agent-not-allowed' | 'domain-not-allowed';

/** A refused stream: the reason counted and the error sent. */
export interface AuthRefusal {
  readonly reason: AuthFailureReason;
  readonly error: ProtocolError;
}

const grant = {
  agents: z.array(z.string().min(1)).min(1),
  domains: z.array(z.string().min(1)).min(1),
};
const certFile = z.array(
  z
    .object({ identity: z.string().regex(/^(URI|DNS):.+/, 'must be URI:… or DNS:…'), ...grant })
    .strict(),
);
const tokenFile = z.array(z.object({ token: z.string().min(16), ...grant }).strict());

/** Reads and checks an allow-list or token file (YAML or JSON); bad ones name the flag. */
function readGrants<T>(flag: string, file: string, schema: z.ZodType<T[]>): T[] {
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new PolicyError(
      'SLUICE_ERR_QUOTA_CONFIG_INVALID',
      `${flag} ${file}: ${(e as Error).message}`,
      { issues: [{ path: flag, message: (e as Error).message }] },
    );
  }
  const r = schema.safeParse(doc);
  if (r.success) return r.data;
  const issues: PolicyIssue[] = r.error.issues.map((i) => ({
    file,
    path: `${flag}[${i.path.join('.')}]`,
    message: i.message,
  }));
  throw new PolicyError(
    'SLUICE_ERR_QUOTA_CONFIG_INVALID',
    `${flag} ${file}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
    { issues },
  );
}

/** `--agent-certs-file`: a list of `{identity, agents, domains}`. */
export function readCertGrants(file: string): CertGrant[] {
  return readGrants('--agent-certs-file', file, certFile);
}

/** `--agent-tokens-file`: a list of `{token, agents, domains}` (tokens of 16 characters or more). */
export function readTokenGrants(file: string): TokenGrant[] {
  return readGrants('--agent-tokens-file', file, tokenFile);
}

/** `payments-*` as a whole-string match; `*` matches any run of characters, `/` too. */
function matches(pattern: string, value: string): boolean {
  const re = pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${re.join('.*')}$`, 's').test(value);
}

const digest = (s: string) => createHash('sha256').update(s).digest();

const refusal = (
  reason: AuthFailureReason,
  code: 'SLUICE_ERR_QUOTA_UNAUTHENTICATED' | 'SLUICE_ERR_QUOTA_PERMISSION_DENIED',
  message: string,
): AuthRefusal => ({ reason, error: new ProtocolError(code, message) });

/** The subject alternative names of a verified peer certificate, as `DNS:x` / `URI:y`. */
function peerSans(call: grpc.ServerDuplexStream<unknown, unknown>): string[] | undefined {
  // Present only when the TLS handshake verified the certificate against --client-ca.
  const cert = call.getAuthContext().sslPeerCertificate;
  if (cert === undefined) return undefined;
  return (cert.subjectaltname ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.startsWith('DNS:') || s.startsWith('URI:'));
}

/**
 * Who may stream to a controller: agents with a verified client certificate whose SAN is
 * on the allow-list, or with a bearer token from the token file (compared in constant
 * time, by SHA-256 digests so that lengths do not show either). Each credential may claim
 * only the agent names and domains its entry lists.
 */
export class AgentAuth {
  readonly #certs: readonly CertGrant[];
  readonly #tokens: readonly { digest: Buffer; grant: AgentGrant }[];

  constructor(o: { certs?: readonly CertGrant[]; tokens?: readonly TokenGrant[] }) {
    this.#certs = o.certs ?? [];
    this.#tokens = (o.tokens ?? []).map((t) => ({ digest: digest(t.token), grant: t }));
  }

  /**
   * The grants of a stream's credentials and the agent name it claims (`undefined`: no
   * `sluice-agent` metadata, allowed only by an `agents` entry `*`), or its refusal.
   */
  authenticate(
    call: grpc.ServerDuplexStream<unknown, unknown>,
    agent: string | undefined,
  ): { grants: readonly AgentGrant[] } | AuthRefusal {
    const sans = peerSans(call);
    let grants: AgentGrant[] = [];
    if (sans !== undefined)
      grants = this.#certs.filter((c) => sans.some((san) => matches(c.identity, san)));
    const header = call.metadata.get('authorization')[0];
    const bearer =
      typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7) : undefined;
    if (grants.length === 0 && bearer !== undefined) {
      const d = digest(bearer);
      // Every token is compared, so the time taken does not say which one was near.
      let found: AgentGrant | undefined;
      for (const t of this.#tokens) if (timingSafeEqual(t.digest, d)) found ??= t.grant;
      if (found === undefined)
        return refusal(
          'bad-token',
          'SLUICE_ERR_QUOTA_UNAUTHENTICATED',
          'the bearer token is not known',
        );
      grants = [found];
    }
    if (grants.length === 0) {
      if (sans !== undefined)
        return refusal(
          'unknown-identity',
          'SLUICE_ERR_QUOTA_PERMISSION_DENIED',
          `the client certificate (${sans.join(', ') || 'no SAN'}) is not on the agent allow-list`,
        );
      return refusal(
        'no-credentials',
        'SLUICE_ERR_QUOTA_UNAUTHENTICATED',
        'agents must present a client certificate or an "authorization: Bearer <token>" metadata',
      );
    }
    const allowed = grants.filter((g) =>
      g.agents.some((p) => (agent === undefined ? p === '*' : matches(p, agent))),
    );
    if (allowed.length === 0)
      return refusal(
        'agent-not-allowed',
        'SLUICE_ERR_QUOTA_PERMISSION_DENIED',
        `these credentials may not claim agent "${agent ?? '(unnamed)'}"`,
      );
    return { grants: allowed };
  }

  /** The refusal of a domain none of the stream's grants allows, if so. */
  checkDomain(grants: readonly AgentGrant[], domain: string): AuthRefusal | undefined {
    if (grants.some((g) => g.domains.some((p) => matches(p, domain)))) return undefined;
    return refusal(
      'domain-not-allowed',
      'SLUICE_ERR_QUOTA_PERMISSION_DENIED',
      `these credentials may not claim domain "${domain}"`,
    );
  }
}
