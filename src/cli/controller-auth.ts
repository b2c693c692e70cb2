import { isIP } from 'node:net';
import { PolicyError, type PolicyIssue } from '../core/errors.js';
import { AgentAuth, readCertGrants, readTokenGrants } from '../quota/rlqs/agent-auth.js';
import type { AgentTls } from '../quota/rlqs/agent-tls.js';

/** The `sluice controller` flags of agent authentication, as parsed. */
export interface ControllerAuthFlags {
  readonly host: string;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly clientCa?: string;
  readonly agentCertsFile?: string;
  readonly agentTokensFile?: string;
  readonly insecureAgents?: boolean;
}

/** Whether `host` is a loopback address, where only this machine's processes can connect. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '[::1]';
}

/**
 * The RLQS port's TLS and who may stream, from the flags: mTLS (`--tls-cert`, `--tls-key`,
 * `--client-ca`, `--agent-certs-file`), bearer tokens (`--agent-tokens-file`), or both
 * (either credential admits). A listen address beyond loopback without either stops the
 * start (`SLUICE_ERR_QUOTA_AGENTS_INSECURE`) unless `--insecure-agents` says so.
 */
export function agentAuthFromFlags(f: ControllerAuthFlags): {
  tls?: AgentTls;
  auth?: AgentAuth;
} {
  const issues: PolicyIssue[] = [];
  if ((f.tlsCert === undefined) !== (f.tlsKey === undefined))
    issues.push({ path: '--tls-cert', message: 'give --tls-cert and --tls-key together' });
  if (f.clientCa !== undefined && f.tlsCert === undefined)
    issues.push({ path: '--client-ca', message: 'needs --tls-cert and --tls-key (mTLS)' });
  if ((f.clientCa === undefined) !== (f.agentCertsFile === undefined))
    issues.push({
      path: f.clientCa === undefined ? '--agent-certs-file' : '--client-ca',
      message:
        'give --client-ca (who signs agent certificates) and --agent-certs-file (what each may claim) together',
    });
  if (issues.length > 0)
    throw new PolicyError(
      'SLUICE_ERR_QUOTA_CONFIG_INVALID',
      `invalid controller settings: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      { issues },
    );
  const certs = f.agentCertsFile === undefined ? undefined : readCertGrants(f.agentCertsFile);
  const tokens = f.agentTokensFile === undefined ? undefined : readTokenGrants(f.agentTokensFile);
  if (certs === undefined && tokens === undefined && !f.insecureAgents && !isLoopback(f.host))
    throw new PolicyError(
      'SLUICE_ERR_QUOTA_AGENTS_INSECURE',
      `--host ${f.host} is not loopback, and any peer could claim any agent's lease: give --client-ca with --agent-certs-file (mTLS), or --agent-tokens-file, or --insecure-agents to accept unauthenticated agents`,
      { issues: [] },
    );
  return {
    ...(f.tlsCert === undefined || f.tlsKey === undefined
      ? {}
      : {
          tls: {
            certFile: f.tlsCert,
            keyFile: f.tlsKey,
            ...(f.clientCa === undefined ? {} : { clientCaFile: f.clientCa }),
            // With tokens too, a client without a certificate may still show a token.
            requireClientCert: tokens === undefined,
          },
        }),
    ...(certs === undefined && tokens === undefined
      ? {}
      : {
          auth: new AgentAuth({
            ...(certs === undefined ? {} : { certs }),
            ...(tokens === undefined ? {} : { tokens }),
          }),
        }),
  };
}
