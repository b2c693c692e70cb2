import type * as grpc from '@grpc/grpc-js';
import { ProtocolError } from '../../core/errors.js';
import { AGENT_METADATA } from '../../protocol/metadata.js';

/** The agent a stream claims to be: its `sluice-agent` metadata, if given and not empty. */
export function claimedAgent(metadata: grpc.Metadata): string | undefined {
  const named = metadata.get(AGENT_METADATA)[0];
  return typeof named === 'string' && named !== '' ? named : undefined;
}

/**
 * The refusal of a second live stream under one agent name. The first stream keeps the
 * name, and its lease: replacing it would let anyone who knows a name cut its holder off
 * (and two processes under one name would take turns, both enforcing the one lease).
 */
export function duplicateAgentError(agent: string): ProtocolError {
  return new ProtocolError(
    'SLUICE_ERR_QUOTA_DUPLICATE_AGENT',
    `agent "${agent}" already has a live stream to this controller; give each instance its own name (SLUICE_LEASE_AGENT unset picks one)`,
  );
}
